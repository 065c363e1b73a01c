//go:build tinygo || wasm

package main

import "github.com/buddy-run/buddy/skillkit"

// parse: a Bot API response (or a webhook delivery) → events, a cursor, a
// message id or an error (docs/CHANNELS.md, "parse").
//
//go:wasmexport parse
func parse() int32 { return skillkit.Run(Parse) }

// render: a message, an approval question, a poll → a Bot API request
// (docs/CHANNELS.md, "render").
//
//go:wasmexport render
func render() int32 { return skillkit.Run(Render) }
