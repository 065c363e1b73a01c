// Command fetch_url is buddy's built-in skill that GETs a URL on a domain the
// operator allowed: {url} → {status, body}.
package main

import (
	"strings"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	URL string `json:"url"`
}

type output struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        string `json:"body"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.URL == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "url is required")
		}
		resp, err := skillkit.HTTPGet(in.URL)
		if err != nil {
			return nil, err
		}
		return output{
			Status:      resp.Status,
			ContentType: resp.Headers["Content-Type"],
			Body:        strings.ToValidUTF8(string(resp.Body), "\uFFFD"),
		}, nil
	})
}

func main() {}
