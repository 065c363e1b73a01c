package skills_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/secrets"
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
	// A network grant links http_request: the approval says which methods
	// and how large a body its requests may have, not "GET" alone.
	for _, want := range []string{"send HTTP requests to api.github.com", "send requests of the methods GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, with a body of up to 1 MiB"} {
		if !slices.Contains(without.Touches, want) {
			t.Errorf("touches %q, want %q among them", without.Touches, want)
		}
	}
	if len(without.Grant.Credentials) != 0 {
		t.Errorf("not granted, yet shown: %+v", without.Grant.Credentials)
	}
	if with.Fingerprint() == without.Fingerprint() {
		t.Error("granting a credential does not change the skill's fingerprint")
	}
}

// TestCredentialParamsLink: a header or query parameter the manifest
// accepts for a credential is one the fetcher accepts too, so that a
// skill.toml that installs also links; and the headers the fetcher
// refuses are refused at install already.
func TestCredentialParamsLink(t *testing.T) {
	hosts := allow.Intersect([]string{"api.github.com"}, []string{"api.github.com"})
	store, err := secrets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ as, name string }{
		{"header", "X-Api-Key"}, {"header", "Authorization"}, {"header", "PRIVATE-TOKEN"},
		{"header", "Host"}, {"header", "content-length"}, {"header", "Transfer-Encoding"}, {"header", "Connection"},
		{"header", "Keep-Alive"}, {"header", "Upgrade"}, {"header", "TE"}, {"header", "Trailer"},
		{"header", "Proxy-Authorization"}, {"header", "Proxy-Connection"}, {"header", "Proxy-X"}, {"header", "Expect"},
		{"header", "Accept-Encoding"}, {"header", "Cookie"}, {"header", "Content-Type"},
		{"query", "api_key"}, {"query", "key[]"}, {"query", "a&b"}, {"query", "a=b"}, {"query", "a b"}, {"query", "a%20"},
	} {
		manifestOK := runtime.ParamProblem(c.as, c.name) == ""
		_, err := buddyhttp.New(buddyhttp.Policy{Domains: hosts,
			Credentials: []buddyhttp.Credential{{Name: "github", Hosts: hosts, As: c.as, Param: c.name}}},
			buddyhttp.WithSecrets(store))
		if manifestOK && err != nil {
			t.Errorf("%s %q: skill.toml accepts it, the fetcher refuses it: %v", c.as, c.name, err)
		}
	}
}
