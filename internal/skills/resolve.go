package skills

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/buddy-run/buddy/hostfns"
	buddyfs "github.com/buddy-run/buddy/hostfns/fs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// The registry says what a call would touch.
var _ catalog.Resolver = (*Registry)(nil)

// Resolve implements catalog.Resolver: for read_file and write_file the file
// (canonical path, whether it exists, its size, create or overwrite, a diff
// summary), for fetch_url the URL (scheme, host, port, the addresses the host
// resolves to now, each allowed or refused), computed by the linked host
// functions' own resolvers without side effect; for any other skill, the
// capabilities its grant gives it. Arguments that do not parse give the
// capabilities too (the call itself will fail on them).
func (r *Registry) Resolve(ctx context.Context, c catalog.Call) ([]catalog.Target, error) {
	s, err := r.acquire(ctx, c.Skill)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	return r.resolve(ctx, s, c)
}

// resolve is Resolve for a skill already held.
func (r *Registry) resolve(ctx context.Context, s *Skill, c catalog.Call) ([]catalog.Target, error) {
	caps := capabilityTargets(s.Grants)
	if !s.Builtin || c.Raw {
		return caps, nil
	}
	var args struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		URL     string  `json:"url"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return caps, nil
	}
	switch {
	case s.Name == "read_file" && args.Path != "",
		s.Name == "write_file" && args.Path != "" && args.Content != nil,
		s.Name == "fetch_url" && args.URL != "":
	default:
		// Another skill, or arguments the skill itself refuses first
		// (invalid_input) before any host function runs.
		return caps, nil
	}
	if _, err := r.load(ctx, s); err != nil {
		return nil, err
	}
	s.mu.Lock()
	host := s.host
	s.mu.Unlock()
	if host == nil {
		return caps, nil
	}
	switch s.Name {
	case "read_file":
		t, ok, err := host.InspectRead(ctx, args.Path)
		if err != nil || !ok {
			return caps, err
		}
		return []catalog.Target{fileTarget(t, "read")}, nil
	case "write_file":
		var data []byte
		if args.Content != nil {
			data = []byte(*args.Content)
		}
		t, ok, err := host.InspectWrite(ctx, args.Path, data)
		if err != nil || !ok {
			return caps, err
		}
		action := "overwrite"
		if t.Create {
			action = "create"
		}
		return []catalog.Target{fileTarget(t, action)}, nil
	default: // fetch_url
		t, ok, err := host.InspectURL(ctx, args.URL)
		if err != nil || !ok {
			return caps, err
		}
		out := catalog.Target{Kind: catalog.TargetURL, Method: "GET", URL: t.URL, Scheme: t.Scheme, Host: t.Host, Port: int(t.Port),
			Unresolved: t.Unresolved, Refused: t.Refused}
		for _, a := range t.Addresses {
			out.Addresses = append(out.Addresses, catalog.TargetAddress{IP: a.IP.String(), Allowed: a.Refused == "", Reason: a.Refused})
		}
		return []catalog.Target{out}, nil
	}
}

func fileTarget(t buddyfs.Target, action string) catalog.Target {
	out := catalog.Target{Kind: catalog.TargetFile, Path: t.Path, Dir: t.Dir, Action: action, Exists: t.Exists,
		Size: t.Size, Refused: t.Refused}
	if t.Write {
		out.Bytes = t.Bytes
	}
	if t.Diffed {
		out.Diff = fmt.Sprintf("+%d -%d lines", t.Added, t.Removed)
	}
	return out
}

// capabilityTargets lists a grant as targets.
func capabilityTargets(g hostfns.Grants) []catalog.Target {
	var out []catalog.Target
	for _, t := range Touches(g) {
		out = append(out, catalog.Target{Kind: catalog.TargetCapability, Capability: t})
	}
	return out
}

// usage converts what the host functions recorded.
func usage(u *hostfns.Usage) catalog.Usage {
	r := u.Report()
	return catalog.Usage{BytesRead: r.BytesRead, BytesWritten: r.BytesWritten, Paths: r.Paths, Hosts: r.Hosts, Addresses: r.Addresses,
		Credentials: r.Credentials}
}
