package config

import (
	"fmt"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
)

// TestAllowedDomainsUseTheOneGrammar: buddy.toml accepts exactly the entries
// package allow accepts from an operator, spelled as it spells them, so that
// config validation, the intersection and the fetcher cannot disagree
// (special-use wildcards included).
func TestAllowedDomainsUseTheOneGrammar(t *testing.T) {
	for _, d := range []string{
		"*.test", "*.internal", "*.local", "*.example", "*.invalid", "*.lan", "*.home", "*.corp",
		"*.home.arpa", "*.localhost", "*.app.localhost", "localhost", "*.com", "*.co.uk", "*.github.io",
		"*", "127.0.0.1", "127.1", "0x7f.1", "[::1]:8080", "::ffff:10.0.0.1", "0.0.0.0", "API.X.Test.:443",
		"my_host.example.com", "https://example.com", "*.x.test:8080", "10.0.0.1.",
	} {
		t.Run(d, func(t *testing.T) {
			e, perr := allow.Parse(d, allow.Operator)
			c, cerr := Parse([]byte(fmt.Sprintf("[skills.fetch_url]\nallowed_domains = [%q]\n", d)))
			if (perr == nil) != (cerr == nil) {
				t.Fatalf("allow.Parse = %v, config.Parse = %v: they disagree", perr, cerr)
			}
			if perr != nil {
				return
			}
			if got := c.Skills["fetch_url"].AllowedDomains; len(got) != 1 || got[0] != e.String() {
				t.Errorf("config kept %q, want %q", got, e.String())
			}
		})
	}
}
