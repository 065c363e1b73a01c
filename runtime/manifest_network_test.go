package runtime

import (
	"fmt"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
)

// TestManifestNetworkUsesTheOneGrammar: a manifest accepts exactly the
// entries package allow accepts from a skill, spelled as it spells them.
func TestManifestNetworkUsesTheOneGrammar(t *testing.T) {
	for _, d := range []string{
		"*.test", "*.internal", "*.local", "*.example", "*.home.arpa", "*.localhost", "*.app.localhost",
		"localhost", "*.com", "*.co.uk", "*.github.io", "*", "127.0.0.1", "127.1", "[::1]:8080",
		"::ffff:10.0.0.1", "0.0.0.0", "API.X.Test.:443", "https://example.com", "*.x.test:8080",
	} {
		t.Run(d, func(t *testing.T) {
			e, perr := allow.Parse(d, allow.Manifest)
			m, merr := ParseManifest([]byte(fmt.Sprintf("[skill]\nname = \"n\"\nversion = \"1.0.0\"\ndescription = \"d\"\npermission = \"network\"\n[capabilities]\nnetwork = [%q]\n", d)))
			if (perr == nil) != (merr == nil) {
				t.Fatalf("allow.Parse = %v, ParseManifest = %v: they disagree", perr, merr)
			}
			if perr != nil {
				return
			}
			if got := m.Capabilities.Network; len(got) != 1 || got[0] != e.String() {
				t.Errorf("manifest kept %q, want %q", got, e.String())
			}
		})
	}
}
