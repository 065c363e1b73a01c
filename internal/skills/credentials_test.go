package skills_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

const ghManifest = `[skill]
name = "gh"
version = "1.0.0"
description = "GitHub"
permission = "network"
[capabilities]
network = ["api.github.com", "*.example.com"]
[credentials.github]
hosts = ["api.github.com"]
[credentials.example]
hosts = ["*.example.com"]
as = "header"
name = "X-Key"
`

// TestEffectiveCredentials: a credential is granted when the manifest
// declares it and the section lists it, for the hosts both allow.
func TestEffectiveCredentials(t *testing.T) {
	m, err := runtime.ParseManifest([]byte(ghManifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, section string
		want          map[string][]string // credential → hosts
	}{
		{"granted", "allowed_domains = [\"api.github.com\"]\ncredentials = [\"github\"]\n", map[string][]string{"github": {"api.github.com"}}},
		{"not listed", "allowed_domains = [\"api.github.com\"]\n", nil},
		{"listed, not declared", "allowed_domains = [\"api.github.com\"]\ncredentials = [\"openai\"]\n", nil},
		{"listed, its host not allowed", "allowed_domains = [\"api.example.com\"]\ncredentials = [\"github\"]\n", nil},
		{"narrowed by the operator", "allowed_domains = [\"api.example.com\", \"api.github.com\"]\ncredentials = [\"github\", \"example\"]\n",
			map[string][]string{"github": {"api.github.com"}, "example": {"api.example.com"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := parseConfig(t, "[skills.gh]\n"+c.section)
			g := skills.EffectiveGrants("gh", m, cfg.Skills["gh"], cfg.Limits)
			got := map[string][]string{}
			for _, cr := range g.Credentials {
				got[cr.Name] = allow.Strings(cr.Hosts)
				for _, h := range cr.Hosts {
					if !slices.ContainsFunc(g.Domains, func(d allow.Entry) bool { return allow.Within(h, d) }) {
						t.Errorf("credential host %s is not within the network grant %v", h, allow.Strings(g.Domains))
					}
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("credentials %v, want %v", got, c.want)
			}
			for n, hosts := range c.want {
				if !slices.Equal(got[n], hosts) {
					t.Errorf("%s → %v, want %v", n, got[n], hosts)
				}
			}
		})
	}
}

// TestCredentialsShown: the catalog shows which credentials a skill may
// use, and a change of them is a change of the skill (an approval of it
// does not carry over).
func TestCredentialsShown(t *testing.T) {
	rt := newRuntime(t)
	m, err := runtime.ParseManifest([]byte(ghManifest))
	if err != nil {
		t.Fatal(err)
	}
	wasm := fixture(t, "echo.wasm")
	info := func(section string) catalog.Info {
		reg := newRegistry(t, rt, parseConfig(t, "[skills.gh]\nallowed_domains = [\"api.github.com\"]\n"+section), nil)
		if err := reg.AddModule(t.Context(), m, wasm); err != nil {
			t.Fatal(err)
		}
		i, err := reg.Lookup(t.Context(), "gh")
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	with, without := info("credentials = [\"github\"]\n"), info("")
	if len(with.Grant.Credentials) != 1 || with.Grant.Credentials[0].Name != "github" || !slices.Equal(with.Grant.Credentials[0].Hosts, []string{"api.github.com"}) {
		t.Errorf("grant credentials %+v", with.Grant.Credentials)
	}
	if !slices.ContainsFunc(with.Touches, func(s string) bool { return strings.Contains(s, "credential github (bearer) to api.github.com") }) {
		t.Errorf("touches %q", with.Touches)
	}
	if len(without.Grant.Credentials) != 0 {
		t.Errorf("not granted, yet shown: %+v", without.Grant.Credentials)
	}
	if with.Fingerprint() == without.Fingerprint() {
		t.Error("granting a credential does not change the skill's fingerprint")
	}
}
