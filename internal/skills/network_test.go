package skills_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

// loopbackResolver answers 127.0.0.1 for every name.
type loopbackResolver struct{}

func (loopbackResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
}

// TestGrantedNetworkPrivateAddresses runs the whole path of a network grant:
// skill.toml parsed by runtime.ParseManifest, buddy.toml by config.Parse, the
// grant by EffectiveGrants, and a fetch by hostfns/http to a loopback server
// under a name that resolves to 127.0.0.1. Loopback is reached only when the
// operator wrote the host exactly.
func TestGrantedNetworkPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached")
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	tests := []struct {
		name     string
		declared string // TOML array
		granted  string // TOML array
		host     string
		reached  bool
	}{
		{"declared exact under an operator wildcard", `["api.x.test"]`, `["*.x.test"]`, "api.x.test", false},
		{"declared exact with port under an operator wildcard", `["api.x.test:` + port + `"]`, `["*.x.test"]`, "api.x.test", false},
		{"declared exact under a special-use wildcard", `["db.internal"]`, `["*.internal"]`, "db.internal", false},
		{"declared * under an operator wildcard", `["*"]`, `["*.x.test"]`, "api.x.test", false},
		{"operator wrote the host exactly", `["api.x.test"]`, `["api.x.test"]`, "api.x.test", true},
		{"operator wrote the host and a wildcard", `["api.x.test"]`, `["*.x.test", "api.x.test"]`, "api.x.test", true},
		{"declared wildcard over the operator's exact host", `["*.x.test"]`, `["api.x.test"]`, "api.x.test", true},
		{"operator's exact host, another host under the wildcard", `["*"]`, `["*.x.test", "api.x.test"]`, "other.x.test", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := runtime.ParseManifest([]byte(fmt.Sprintf(`[skill]
name = "probe"
version = "1.0.0"
description = "probe"
permission = "network"
[capabilities]
network = %s
`, tc.declared)))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse([]byte("[skills.probe]\nallowed_domains = " + tc.granted + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			g := skills.EffectiveGrants("probe", m, cfg.Skills["probe"], cfg.Limits)
			if len(g.Domains) == 0 {
				t.Fatalf("no domains granted")
			}
			f, err := buddyhttp.New(buddyhttp.Policy{Domains: g.Domains}, buddyhttp.WithResolver(loopbackResolver{}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.CloseIdleConnections)
			resp, err := f.Get(t.Context(), "http://"+tc.host+":"+port+"/")
			if tc.reached {
				if err != nil || string(resp.Body) != "reached" {
					t.Fatalf("Get under %v = %v, %v; want the page", g.Domains, resp, err)
				}
				return
			}
			if !errors.Is(err, errs.ErrForbidden) {
				t.Fatalf("Get under %v = %v, %v; want forbidden", g.Domains, resp, err)
			}
		})
	}
}
