package skills_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

// TestEffectiveGrants is the table of the rules in docs/CONFIG.md ("Effective
// grants"): a skill gets the intersection of what its manifest declares and
// what its [skills.NAME] section grants, nothing more.
func TestEffectiveGrants(t *testing.T) {
	lim := config.Limits{
		MaxReadBytes: 10 << 20, MaxWriteBytes: 20 << 20, MaxFetchBytes: 5 << 20,
		FetchTimeout: 10 * time.Second,
	}
	// caps are the grants every row gets unless it says otherwise.
	caps := hostfns.Grants{
		MaxReadBytes: lim.MaxReadBytes, MaxWriteBytes: lim.MaxWriteBytes, MaxFetchBytes: lim.MaxFetchBytes,
		FetchTimeout: lim.FetchTimeout,
	}
	// op: entries as the operator wrote them (exact ones reach private
	// addresses); derived: entries that reach public addresses only.
	op := func(s ...string) []allow.Entry { return entries(t, allow.Operator, s...) }
	derived := func(s ...string) []allow.Entry { return entries(t, allow.Manifest, s...) }
	with := func(edit func(*hostfns.Grants)) hostfns.Grants {
		g := caps
		edit(&g)
		return g
	}
	everyDir := config.Skill{
		AllowedDirectories: []string{"/srv/a"},
		ReadDirectories:    []string{"/srv/r"},
		WriteDirectories:   []string{"/srv/w"},
	}
	tests := []struct {
		name  string
		skill string // "" = "word_count"
		caps  runtime.Capabilities
		sec   config.Skill
		lim   *config.Limits // nil = lim
		want  hostfns.Grants
	}{
		// Files.
		{
			name: "files_read=false: no directory whatever the operator lists",
			caps: runtime.Capabilities{},
			sec:  everyDir,
			want: caps,
		},
		{
			name: "files_read=false, files_write=false, memory and network declared: still no directory",
			caps: runtime.Capabilities{Memory: true, Network: []string{"example.com"}},
			sec:  everyDir,
			want: caps,
		},
		{
			name: "files_read + allowed_directories",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  config.Skill{AllowedDirectories: []string{"/srv/a", "/srv/b"}},
			want: with(func(g *hostfns.Grants) { g.Read = []string{"/srv/a", "/srv/b"} }),
		},
		{
			name: "files_read: read_directories add to allowed_directories, write_directories do not",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  everyDir,
			want: with(func(g *hostfns.Grants) { g.Read = []string{"/srv/a", "/srv/r"} }),
		},
		{
			name: "files_read with only write_directories: nothing to read",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  config.Skill{WriteDirectories: []string{"/srv/w"}},
			want: caps,
		},
		{
			name: "files_read with only read_directories",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  config.Skill{ReadDirectories: []string{"/srv/r"}},
			want: with(func(g *hostfns.Grants) { g.Read = []string{"/srv/r"} }),
		},
		{
			name: "files_write: write_directories add to allowed_directories, read_directories do not",
			caps: runtime.Capabilities{FilesWrite: true},
			sec:  everyDir,
			want: with(func(g *hostfns.Grants) { g.Write = []string{"/srv/a", "/srv/w"} }),
		},
		{
			name: "files_write with only read_directories: nothing to write",
			caps: runtime.Capabilities{FilesWrite: true},
			sec:  config.Skill{ReadDirectories: []string{"/srv/r"}},
			want: caps,
		},
		{
			name: "declaring both: allowed_directories for both",
			caps: runtime.Capabilities{FilesRead: true, FilesWrite: true},
			sec:  config.Skill{AllowedDirectories: []string{"/srv/a"}},
			want: with(func(g *hostfns.Grants) { g.Read, g.Write = []string{"/srv/a"}, []string{"/srv/a"} }),
		},
		{
			name: "declaring both: each list where it belongs",
			caps: runtime.Capabilities{FilesRead: true, FilesWrite: true},
			sec:  everyDir,
			want: with(func(g *hostfns.Grants) {
				g.Read, g.Write = []string{"/srv/a", "/srv/r"}, []string{"/srv/a", "/srv/w"}
			}),
		},
		{
			name: "a directory in two lists appears once",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  config.Skill{AllowedDirectories: []string{"/srv/a", "/srv/a"}, ReadDirectories: []string{"/srv/a", "/srv/r"}},
			want: with(func(g *hostfns.Grants) { g.Read = []string{"/srv/a", "/srv/r"} }),
		},
		// Network.
		{
			name: "network *.github.com ∩ operator api.github.com, example.com",
			caps: runtime.Capabilities{Network: []string{"*.github.com"}},
			sec:  config.Skill{AllowedDomains: []string{"api.github.com", "example.com"}},
			want: with(func(g *hostfns.Grants) { g.Domains = op("api.github.com") }),
		},
		{
			name: "network * (fetch_url): exactly the operator's list",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{AllowedDomains: []string{"example.com", "api.github.com", "*.wikipedia.org", "127.0.0.1"}},
			want: with(func(g *hostfns.Grants) {
				g.Domains = op("*.wikipedia.org", "127.0.0.1", "api.github.com", "example.com")
			}),
		},
		{
			name: "network * with no allowed_domains: none",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{},
			want: caps,
		},
		{
			name: "network declared nothing: none even if the operator lists domains",
			caps: runtime.Capabilities{},
			sec:  config.Skill{AllowedDomains: []string{"api.github.com", "example.com"}},
			want: caps,
		},
		{
			name: "network exact ∩ a broader operator wildcard: the exact host, public addresses only",
			caps: runtime.Capabilities{Network: []string{"api.github.com"}},
			sec:  config.Skill{AllowedDomains: []string{"*.github.com"}},
			want: with(func(g *hostfns.Grants) { g.Domains = derived("api.github.com") }),
		},
		{
			name: "network exact ∩ the operator's exact entry and wildcard: the exact entry's meaning",
			caps: runtime.Capabilities{Network: []string{"a.x.test"}},
			sec:  config.Skill{AllowedDomains: []string{"a.x.test", "*.x.test"}},
			want: with(func(g *hostfns.Grants) { g.Domains = op("a.x.test") }),
		},
		{
			name: "network * ∩ the operator's wildcard and exact entry: both, each with its meaning",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{AllowedDomains: []string{"a.x.test", "*.x.test"}},
			want: with(func(g *hostfns.Grants) { g.Domains = op("*.x.test", "a.x.test") }),
		},
		{
			name: "network wildcard ∩ the operator's exact entry: the operator's entry",
			caps: runtime.Capabilities{Network: []string{"*.x.test"}},
			sec:  config.Skill{AllowedDomains: []string{"a.x.test"}},
			want: with(func(g *hostfns.Grants) { g.Domains = op("a.x.test") }),
		},
		{
			name: "network localhost ∩ *.test: none",
			caps: runtime.Capabilities{Network: []string{"localhost"}},
			sec:  config.Skill{AllowedDomains: []string{"*.test"}},
			want: caps,
		},
		{
			name: "network disjoint: none",
			caps: runtime.Capabilities{Network: []string{"*.github.com"}},
			sec:  config.Skill{AllowedDomains: []string{"github.com", "example.com"}},
			want: caps,
		},
		{
			name: "network ports: the port both allow",
			caps: runtime.Capabilities{Network: []string{"api.github.com:443"}},
			sec:  config.Skill{AllowedDomains: []string{"*.github.com"}},
			want: with(func(g *hostfns.Grants) { g.Domains = derived("api.github.com:443") }),
		},
		// Environment.
		{
			name: "env: names in both lists",
			caps: runtime.Capabilities{Env: []string{"HOME", "LANG", "TZ"}},
			sec:  config.Skill{Env: []string{"LANG", "SECRET_TOKEN", "TZ"}},
			want: with(func(g *hostfns.Grants) { g.Env = []string{"LANG", "TZ"} }),
		},
		{
			name: "env granted but not declared: none",
			caps: runtime.Capabilities{},
			sec:  config.Skill{Env: []string{"LANG"}},
			want: caps,
		},
		{
			name: "env declared but not granted: none",
			caps: runtime.Capabilities{Env: []string{"LANG"}},
			sec:  config.Skill{},
			want: caps,
		},
		// Memory.
		{
			name: "memory declared and granted: the skill's own namespace",
			caps: runtime.Capabilities{Memory: true},
			sec:  config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "skill:word_count" }),
		},
		{
			name: "memory declared, not granted: none",
			caps: runtime.Capabilities{Memory: true},
			sec:  config.Skill{},
			want: caps,
		},
		{
			name: "memory granted, not declared: none",
			caps: runtime.Capabilities{},
			sec:  config.Skill{Memory: true},
			want: caps,
		},
		{name: "memory built-in memory_read shares the memory namespace", skill: "memory_read",
			caps: runtime.Capabilities{Memory: true}, sec: config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "memory" })},
		{name: "memory built-in memory_write shares the memory namespace", skill: "memory_write",
			caps: runtime.Capabilities{Memory: true}, sec: config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "memory" })},
		{name: "memory built-in remember shares the memory namespace", skill: "remember",
			caps: runtime.Capabilities{Memory: true}, sec: config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "memory" })},
		{name: "memory built-in recall shares the memory namespace", skill: "recall",
			caps: runtime.Capabilities{Memory: true}, sec: config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "memory" })},
		{name: "a skill called memory_reader is not a memory built-in", skill: "memory_reader",
			caps: runtime.Capabilities{Memory: true}, sec: config.Skill{Memory: true},
			want: with(func(g *hostfns.Grants) { g.Namespace = "skill:memory_reader" })},
		// Caps and deadlines.
		{
			name: "max_bytes overrides the three caps of [limits]",
			caps: runtime.Capabilities{FilesRead: true},
			sec:  config.Skill{AllowedDirectories: []string{"/srv/a"}, MaxBytes: 4096},
			want: with(func(g *hostfns.Grants) {
				g.Read = []string{"/srv/a"}
				g.MaxReadBytes, g.MaxWriteBytes, g.MaxFetchBytes = 4096, 4096, 4096
			}),
		},
		{
			name: "fetch timeout: limits.fetch_timeout when the section sets none",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{AllowedDomains: []string{"example.com"}},
			want: with(func(g *hostfns.Grants) { g.Domains = op("example.com") }),
		},
		{
			name: "fetch timeout: the section's timeout when shorter",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{AllowedDomains: []string{"example.com"}, Timeout: 3 * time.Second},
			want: with(func(g *hostfns.Grants) { g.Domains, g.FetchTimeout = op("example.com"), 3*time.Second }),
		},
		{
			name: "fetch timeout: limits.fetch_timeout when the section's is longer",
			caps: runtime.Capabilities{Network: []string{"*"}},
			sec:  config.Skill{AllowedDomains: []string{"example.com"}, Timeout: time.Minute},
			want: with(func(g *hostfns.Grants) { g.Domains = op("example.com") }),
		},
		{
			name: "fetch timeout: the section's when [limits] has none",
			caps: runtime.Capabilities{},
			sec:  config.Skill{Timeout: 3 * time.Second},
			lim:  &config.Limits{},
			want: hostfns.Grants{FetchTimeout: 3 * time.Second},
		},
		{
			name: "nothing declared, nothing granted: the zero grant with the caps",
			caps: runtime.Capabilities{},
			sec:  config.Skill{},
			lim:  &config.Limits{},
			want: hostfns.Grants{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.skill
			if name == "" {
				name = "word_count"
			}
			m := runtime.DefaultManifest(name)
			m.Capabilities = tt.caps
			l := lim
			if tt.lim != nil {
				l = *tt.lim
			}
			got := skills.EffectiveGrants(name, m, tt.sec, l)
			if !reflect.DeepEqual(normalize(got), normalize(tt.want)) {
				t.Errorf("EffectiveGrants =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// normalize makes empty lists nil, so that a table need not care.
func normalize(g hostfns.Grants) hostfns.Grants {
	for _, l := range []*[]string{&g.Read, &g.Write, &g.Env} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if len(g.Domains) == 0 {
		g.Domains = nil
	}
	return g
}

// entries parses allowlist entries written by src.
func entries(t *testing.T, src allow.Source, list ...string) []allow.Entry {
	t.Helper()
	var out []allow.Entry
	for _, s := range list {
		e, err := allow.Parse(s, src)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestEffectiveManifest(t *testing.T) {
	lim := config.Limits{MaxFuel: 10_000_000_000, MaxMemoryMB: 256, MaxTimeout: 5 * time.Minute}
	res := func(fuel uint64, mb int, timeout time.Duration) runtime.Resources {
		return runtime.Resources{Fuel: fuel, MemoryMB: mb, Timeout: timeout}
	}
	tests := []struct {
		name string
		in   runtime.Resources
		sec  config.Skill
		lim  config.Limits
		want runtime.Resources
	}{
		{"within the limits: as declared", res(1e9, 16, 5*time.Second), config.Skill{}, lim, res(1e9, 16, 5*time.Second)},
		{"fuel capped by max_fuel", res(5e10, 16, 5*time.Second), config.Skill{}, lim, res(1e10, 16, 5*time.Second)},
		{"memory capped by max_memory_mb", res(1e9, 1024, 5*time.Second), config.Skill{}, lim, res(1e9, 256, 5*time.Second)},
		{"timeout capped by max_timeout", res(1e9, 16, time.Hour), config.Skill{}, lim, res(1e9, 16, 5*time.Minute)},
		{"every resource capped", res(1e12, 4096, time.Hour), config.Skill{}, lim, res(1e10, 256, 5*time.Minute)},
		{"section fuel overrides, down", res(1e9, 16, 5*time.Second), config.Skill{Fuel: 1e6}, lim, res(1e6, 16, 5*time.Second)},
		{"section fuel overrides, up", res(1e9, 16, 5*time.Second), config.Skill{Fuel: 5e9}, lim, res(5e9, 16, 5*time.Second)},
		{"section fuel is capped too", res(1e9, 16, 5*time.Second), config.Skill{Fuel: 1e12}, lim, res(1e10, 16, 5*time.Second)},
		{"section timeout overrides, down", res(1e9, 16, 5*time.Second), config.Skill{Timeout: time.Second}, lim, res(1e9, 16, time.Second)},
		{"section timeout overrides, up", res(1e9, 16, 5*time.Second), config.Skill{Timeout: time.Minute}, lim, res(1e9, 16, time.Minute)},
		{"section timeout is capped too", res(1e9, 16, 5*time.Second), config.Skill{Timeout: time.Hour}, lim, res(1e9, 16, 5*time.Minute)},
		{"no [limits]: no caps", res(1e12, 4096, time.Hour), config.Skill{}, config.Limits{}, res(1e12, 4096, time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := runtime.DefaultManifest("word_count")
			m.Resources = tt.in
			m.Capabilities = runtime.Capabilities{FilesRead: true, Network: []string{"example.com"}}
			got := skills.EffectiveManifest(m, tt.sec, tt.lim)
			if got.Resources != tt.want {
				t.Errorf("resources = %+v, want %+v", got.Resources, tt.want)
			}
			if m.Resources != tt.in {
				t.Errorf("the manifest itself was changed: %+v", m.Resources)
			}
			if got.Name != m.Name || got.Permission != m.Permission || got.Entrypoint != m.Entrypoint ||
				!reflect.DeepEqual(got.Capabilities, m.Capabilities) {
				t.Errorf("EffectiveManifest changed more than the resources: %+v", got)
			}
		})
	}
}

func TestEffectiveApproval(t *testing.T) {
	tests := []struct {
		perm       runtime.Permission
		configured string
		want       string
	}{
		{runtime.ReadOnly, "", config.ApprovalTrust},
		{runtime.Mutating, "", config.ApprovalAlways},
		{runtime.Network, "", config.ApprovalAlways},
		{runtime.ReadOnly, config.ApprovalAlways, config.ApprovalAlways},
		{runtime.ReadOnly, config.ApprovalOnce, config.ApprovalOnce},
		{runtime.Mutating, config.ApprovalTrust, config.ApprovalTrust},
		{runtime.Mutating, config.ApprovalOnce, config.ApprovalOnce},
		{runtime.Network, config.ApprovalTrust, config.ApprovalTrust},
		{runtime.Network, config.ApprovalOnce, config.ApprovalOnce},
	}
	for _, tt := range tests {
		if got := skills.EffectiveApproval(tt.perm, tt.configured); string(got) != tt.want {
			t.Errorf("EffectiveApproval(%s, %q) = %q, want %q", tt.perm, tt.configured, got, tt.want)
		}
	}
}

// TestBuiltinSection: [skills.memory] enables the four memory skills; a
// section of their own overrides approval and limits; the approval of
// [skills.memory] is for the mutating two.
func TestBuiltinSection(t *testing.T) {
	cfg := &config.Config{Skills: map[string]config.Skill{
		"memory":     {Approval: config.ApprovalOnce, Timeout: 2 * time.Second, MaxBytes: 100},
		"remember":   {Approval: config.ApprovalTrust, Fuel: 42},
		"recall":     {Approval: config.ApprovalAlways},
		"read_file":  {AllowedDirectories: []string{"/srv/a"}},
		"word_count": {Memory: true},
	}}
	tests := []struct {
		name string
		perm runtime.Permission
		ok   bool
		want config.Skill
	}{
		{"read_file", runtime.ReadOnly, true, config.Skill{AllowedDirectories: []string{"/srv/a"}}},
		{"write_file", runtime.Mutating, false, config.Skill{}},
		{"fetch_url", runtime.Network, false, config.Skill{}},
		{"memory_write", runtime.Mutating, true, config.Skill{Memory: true, Approval: config.ApprovalOnce, Timeout: 2 * time.Second, MaxBytes: 100}},
		{"memory_read", runtime.ReadOnly, true, config.Skill{Memory: true, Timeout: 2 * time.Second, MaxBytes: 100}},
		{"remember", runtime.Mutating, true, config.Skill{Memory: true, Approval: config.ApprovalTrust, Timeout: 2 * time.Second, MaxBytes: 100, Fuel: 42}},
		{"recall", runtime.ReadOnly, true, config.Skill{Memory: true, Approval: config.ApprovalAlways, Timeout: 2 * time.Second, MaxBytes: 100}},
	}
	for _, tt := range tests {
		got, ok := skills.BuiltinSection(cfg, tt.name, tt.perm)
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("BuiltinSection(%s) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	// Without [skills.memory], a memory skill's own section enables it alone.
	only := &config.Config{Skills: map[string]config.Skill{"recall": {}}}
	if got, ok := skills.BuiltinSection(only, "recall", runtime.ReadOnly); !ok || !got.Memory {
		t.Errorf("[skills.recall] alone: %+v, %v; want enabled with memory", got, ok)
	}
	if _, ok := skills.BuiltinSection(only, "remember", runtime.Mutating); ok {
		t.Errorf("[skills.recall] alone enabled remember")
	}
}
