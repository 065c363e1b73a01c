// Command fetch_url is buddy's built-in skill that GETs a URL on a domain the
// operator allowed: {url} → {status, body}.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	URL string `json:"url"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("url", &in.URL)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.URL == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "url is required")
		}
		resp, err := skillkit.HTTPGet(in.URL)
		if err != nil {
			return nil, err
		}
		// {status, content_type, body}, written directly (invalid UTF-8 in the
		// body becomes U+FFFD).
		var o skillkit.Object
		o.Grow(len(resp.Body) + len(resp.Body)/8 + 64)
		o.Int("status", int64(resp.Status))
		if ct := resp.Headers["Content-Type"]; ct != "" {
			o.String("content_type", ct)
		}
		o.Bytes("body", resp.Body)
		return o.JSON(), nil
	})
}

func main() {}
