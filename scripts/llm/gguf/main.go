// Command gguf writes a tiny hand-weighted llama-architecture GGUF (the
// "scripted" model, 191 KB) for `make e2e-llm`: llama.cpp's llama-server loads
// it and answers deterministically, so the end-to-end test of buddy's agent
// loop runs against a real server speaking both the OpenAI and the Anthropic
// API, without any real model weights.
//
//	go run ./scripts/llm/gguf -o scripted.gguf
//
// It has a byte-level BPE vocab (ASCII only) and a ChatML/Hermes tool-call
// template (template.jinja). Behaviour at temperature 0 (greedy):
//   - tools offered, no tool result yet in the conversation -> emits one
//     <tool_call> (grammar-constrained by the server; string arguments come
//     out as "x"; the first tool offered wins)
//   - a tool result (</tool_response>) is present, or no tools -> answers "OK"
//
// One attention layer with q=k=0 (uniform attention) counts marker tokens.
// It exercises the plumbing (streamed tool calls, tool results, both APIs),
// not planning.
package main

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"flag"
	"log"
	"math"
	"os"
)

//go:embed template.jinja
var chatTemplate string

const (
	tU32  = 4
	tI32  = 5
	tF32  = 6
	tBool = 7
	tStr  = 8
)

type kv struct {
	key string
	typ uint32
	val any
}

type tensor struct {
	name string
	dims []uint64
	data []float32
}

var buf bytes.Buffer

func w(v any) { binary.Write(&buf, binary.LittleEndian, v) }
func ws(s string) {
	w(uint64(len(s)))
	buf.WriteString(s)
}

func bytesToUnicode() map[byte]rune {
	var bs []int
	for b := int('!'); b <= int('~'); b++ {
		bs = append(bs, b)
	}
	for b := 0xA1; b <= 0xAC; b++ {
		bs = append(bs, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		bs = append(bs, b)
	}
	in := map[int]bool{}
	for _, b := range bs {
		in[b] = true
	}
	m := map[byte]rune{}
	for _, b := range bs {
		m[byte(b)] = rune(b)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if !in[b] {
			m[byte(b)] = rune(256 + n)
			n++
		}
	}
	return m
}

func main() {
	out := flag.String("o", "scripted.gguf", "output")
	flag.Parse()

	b2u := bytesToUnicode()
	var tokens []string
	var types []int32
	for b := 0; b < 128; b++ { // ASCII only: every token is valid UTF-8 on its own
		tokens = append(tokens, string(b2u[byte(b)]))
		types = append(types, 1)
	}
	sp := string(b2u[' '])
	merges := []string{sp + " t", sp + " a"}
	tokens = append(tokens, sp+"t", sp+"a")
	types = append(types, 1, 1)
	id := map[string]int{}
	add := func(s string, typ int32) {
		id[s] = len(tokens)
		tokens = append(tokens, s)
		types = append(types, typ)
	}
	add("<|endoftext|>", 3)
	add("<|im_start|>", 3)
	add("<|im_end|>", 3)
	for _, s := range []string{"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"} {
		add(s, 4) // USER_DEFINED, as in Qwen2.5
	}
	nV := len(tokens)

	const E, H, F = 64, 4, 64
	kvs := []kv{
		{"general.architecture", tStr, "llama"},
		{"general.name", tStr, "tiny-scripted-toolcaller"},
		{"general.alignment", tU32, uint32(32)},
		{"llama.context_length", tU32, uint32(4096)},
		{"llama.embedding_length", tU32, uint32(E)},
		{"llama.block_count", tU32, uint32(1)},
		{"llama.feed_forward_length", tU32, uint32(F)},
		{"llama.attention.head_count", tU32, uint32(H)},
		{"llama.attention.head_count_kv", tU32, uint32(H)},
		{"llama.rope.dimension_count", tU32, uint32(E / H)},
		{"llama.rope.freq_base", tF32, float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", tF32, float32(1e-5)},
		{"llama.vocab_size", tU32, uint32(nV)},
		{"tokenizer.ggml.model", tStr, "gpt2"},
		{"tokenizer.ggml.pre", tStr, "default"},
		{"tokenizer.ggml.tokens", uint32(9), tokens},
		{"tokenizer.ggml.token_type", uint32(9), types},
		{"tokenizer.ggml.merges", uint32(9), merges},
		{"tokenizer.ggml.bos_token_id", tU32, uint32(id["<|endoftext|>"])},
		{"tokenizer.ggml.eos_token_id", tU32, uint32(id["<|im_end|>"])},
		{"tokenizer.ggml.padding_token_id", tU32, uint32(id["<|endoftext|>"])},
		{"tokenizer.ggml.add_bos_token", tBool, false},
		{"tokenizer.chat_template", tStr, chatTemplate},
	}

	// residual-stream dimensions
	const (
		dC    = 0  // constant 1
		dTind = 1  // token is <tool_call>
		dRind = 2  // token is </tool_response>
		dTsig = 3  // attention: share of <tool_call> tokens so far (scaled)
		dRsig = 4  // attention: share of </tool_response> tokens so far (scaled)
		fNL   = 5  // current token is "\n"
		fO    = 6  // current token is "O"
		fK    = 7  // current token is "K"
		fQ    = 8  // current token is '"'
		fX    = 9  // current token is "x"
		fTCE  = 10 // current token is </tool_call>
		fTC   = 11 // current token is <tool_call>
		fNN   = 12 // current token is NOT "\n"
	)
	const big = 100.0
	const S = 100000.0

	mat := func(rows, cols int) []float32 { return make([]float32, rows*cols) } // rows=ne1 (out), cols=ne0 (in)
	// token embeddings [E, nV]
	emb := mat(nV, E)
	set := func(m []float32, row, col int, v float32) { m[row*E+col] = v }
	for t := 0; t < nV; t++ {
		set(emb, t, dC, 1)
	}
	for t := 0; t < nV; t++ {
		if t != '\n' {
			set(emb, t, fNN, big)
		}
	}
	set(emb, id["<tool_call>"], dTind, big)
	set(emb, id["<tool_call>"], fTC, big)
	set(emb, id["</tool_response>"], dRind, big)
	set(emb, '\n', fNL, big)
	set(emb, 'O', fO, big)
	set(emb, 'K', fK, big)
	set(emb, '"', fQ, big)
	set(emb, 'x', fX, big)
	set(emb, id["</tool_call>"], fTCE, big)

	zeros := func(n int) []float32 { return make([]float32, n) }
	ones := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = 1
		}
		return d
	}
	// attention: q=k=0 -> uniform weights; head0 reads dTind, head1 reads dRind
	hd := E / H
	v := mat(E, E)
	set(v, 0, dTind, 1)
	set(v, hd, dRind, 1)
	o := mat(E, E)
	set(o, dTsig, 0, S)
	set(o, dRsig, hd, S)

	outW := mat(nV, E)
	tc := id["<tool_call>"]
	eos := id["<|im_end|>"]
	set(outW, tc, dTsig, 1)
	set(outW, tc, dRsig, -5)
	set(outW, tc, fTCE, -100)
	set(outW, tc, fTC, -100)
	set(outW, tc, fNN, -100) // a tool call may only start right after "\n"
	set(outW, '\n', fTC, 1)
	set(outW, eos, fK, 1)
	set(outW, eos, fTCE, 1)
	set(outW, 'O', fNL, 1)
	set(outW, 'K', fO, 1)
	set(outW, 'x', fQ, 1)
	set(outW, '"', fX, 1)
	// base preferences for grammar-constrained choices, carried by the
	// "not a newline" feature so they stay strong at any context length
	pref := func(t int, v float32) { set(outW, t, fNN, v) }
	pref('"', 0.3)
	pref(id["</tool_call>"], 0.5) // close a call rather than chain another with ','
	for _, c := range "}]" {
		pref(int(c), 0.2)
	}
	for _, c := range "{[,:" {
		pref(int(c), 0.1)
	}
	pref('1', 0.05)
	pref(' ', -0.1)
	for c := 0; c < 32; c++ {
		if c != '\n' {
			pref(c, -1)
		}
	}
	set(outW, '{', fNL, 0.5) // after "<tool_call>\n" open the JSON object (masked 'O' loses)
	// sharpen everything so default sampling (temp 0.8, top-k/p) is effectively greedy
	for i := range outW {
		outW[i] *= 300
	}

	e, f, nv := uint64(E), uint64(F), uint64(nV)
	ts := []tensor{
		{"token_embd.weight", []uint64{e, nv}, emb},
		{"output_norm.weight", []uint64{e}, ones(E)},
		{"output.weight", []uint64{e, nv}, outW},
		{"blk.0.attn_norm.weight", []uint64{e}, ones(E)},
		{"blk.0.attn_q.weight", []uint64{e, e}, zeros(E * E)},
		{"blk.0.attn_k.weight", []uint64{e, e}, zeros(E * E)},
		{"blk.0.attn_v.weight", []uint64{e, e}, v},
		{"blk.0.attn_output.weight", []uint64{e, e}, o},
		{"blk.0.ffn_norm.weight", []uint64{e}, ones(E)},
		{"blk.0.ffn_gate.weight", []uint64{e, f}, zeros(E * F)},
		{"blk.0.ffn_up.weight", []uint64{e, f}, zeros(E * F)},
		{"blk.0.ffn_down.weight", []uint64{f, e}, zeros(E * F)},
	}

	buf.WriteString("GGUF")
	w(uint32(3))
	w(uint64(len(ts)))
	w(uint64(len(kvs)))
	for _, k := range kvs {
		ws(k.key)
		w(k.typ)
		switch x := k.val.(type) {
		case string:
			ws(x)
		case uint32, float32:
			w(x)
		case bool:
			if x {
				w(uint8(1))
			} else {
				w(uint8(0))
			}
		case []string:
			w(uint32(tStr))
			w(uint64(len(x)))
			for _, s := range x {
				ws(s)
			}
		case []int32:
			w(uint32(tI32))
			w(uint64(len(x)))
			for _, s := range x {
				w(s)
			}
		}
	}
	const align = 32
	off := uint64(0)
	for _, t := range ts {
		ws(t.name)
		w(uint32(len(t.dims)))
		for _, d := range t.dims {
			w(d)
		}
		w(uint32(0)) // GGML_TYPE_F32
		w(off)
		off += uint64(len(t.data) * 4)
		off = (off + align - 1) / align * align
	}
	for buf.Len()%align != 0 {
		buf.WriteByte(0)
	}
	for _, t := range ts {
		for _, x := range t.data {
			w(math.Float32bits(x))
		}
		for buf.Len()%align != 0 {
			buf.WriteByte(0)
		}
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s: %d bytes, vocab %d, %d tensors", *out, buf.Len(), nV, len(ts))
}
