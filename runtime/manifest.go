package runtime

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/base/rules"
	"github.com/buddy-run/buddy/internal/base/tomlx"
	"github.com/buddy-run/buddy/internal/secrets"
)

// Permission is what a skill's effects are, for the approval gate.
type Permission string

// The permission levels (docs/CONFIG.md, "skill.toml" and "Approval").
const (
	ReadOnly Permission = "read_only"
	Mutating Permission = "mutating"
	Network  Permission = "network"
)

// Manifest defaults and bounds (docs/CONFIG.md, "skill.toml").
const (
	DefaultFuel       = 1_000_000_000
	DefaultMemoryMB   = 16
	DefaultTimeout    = 5 * time.Second
	DefaultEntrypoint = "run"

	// The bounds are shared with buddy.toml (internal/rules).
	MaxFuel     = rules.MaxFuel
	MinMemoryMB = rules.MinMemoryMB
	MaxMemoryMB = rules.MaxMemoryMB
	MaxTimeout  = rules.MaxTimeout
)

// Manifest is a parsed, validated skill.toml.
type Manifest struct {
	Name        string
	Version     string
	Description string
	Author      string
	Permission  Permission
	Entrypoint  string
	// InputSchema is the JSON Schema of the input, as the LLM sees it.
	InputSchema  map[string]any
	Capabilities Capabilities
	// Credentials are the secrets the skill asks buddy to send for it
	// ([credentials.NAME]), sorted by name. Nothing here is granted by
	// itself: buddy.toml's [skills.NAME] credentials = [...] grants them.
	Credentials []Credential
	Resources   Resources
}

// Credential is one [credentials.NAME] section of skill.toml: a secret of
// buddy's store (named NAME) that the HTTP host functions add to the
// skill's requests to Hosts, the way As says. The skill never sees it.
type Credential struct {
	Name string `json:"name"`
	// Hosts are allowlist entries (package allow, as a manifest writes
	// them), each within capabilities.network.
	Hosts []string `json:"hosts"`
	// As is how it is sent: CredentialBearer, CredentialBasic,
	// CredentialHeader or CredentialQuery.
	As string `json:"as"`
	// Param is the header (as = "header") or query parameter (as =
	// "query") it is sent in; "" otherwise.
	Param string `json:"param,omitempty"`
}

// How a credential is sent (Credential.As).
const (
	CredentialBearer = "bearer" // Authorization: Bearer VALUE
	CredentialBasic  = "basic"  // Authorization: Basic base64(VALUE), VALUE being "user:password"
	CredentialHeader = "header" // Param: VALUE
	CredentialQuery  = "query"  // ?Param=VALUE
)

// Capabilities is what a skill declares it may ask for. The operator's grants
// (buddy.toml) are intersected with this; nothing here is granted by itself.
type Capabilities struct {
	FilesRead  bool     `json:"files_read"`
	FilesWrite bool     `json:"files_write"`
	Network    []string `json:"network"` // domain patterns: "example.com", "*.example.com"
	Env        []string `json:"env"`     // environment variable names
	Memory     bool     `json:"memory"`  // its own key-value and memory namespace
	// Schedule asks for the schedule host function (granted to the
	// built-in schedule skill only).
	Schedule bool `json:"schedule,omitempty"`
}

// Resources are the per-call limits a skill asks for.
type Resources struct {
	Fuel     uint64
	MemoryMB int
	Timeout  time.Duration
}

// DeclaresInput reports whether m declares an input schema of its own: the
// default, any JSON object, counts as none. A skill that declares none takes
// raw bytes too (Extism plugins do).
func (m *Manifest) DeclaresInput() bool {
	if m.InputSchema == nil || len(m.InputSchema) == 0 {
		return false
	}
	if len(m.InputSchema) == 1 {
		if t, ok := m.InputSchema["type"].(string); ok && t == "object" {
			return false
		}
	}
	return true
}

// DefaultManifest is what applies to a module run without a skill.toml: the
// defaults above and no capabilities.
func DefaultManifest(name string) *Manifest {
	return &Manifest{
		Name:        name,
		Version:     "0.0.0",
		Permission:  ReadOnly,
		Entrypoint:  DefaultEntrypoint,
		InputSchema: map[string]any{"type": "object"},
		Resources:   Resources{Fuel: DefaultFuel, MemoryMB: DefaultMemoryMB, Timeout: DefaultTimeout},
	}
}

// manifestFile mirrors skill.toml. Pointers tell "absent" from "zero".
type manifestFile struct {
	Skill struct {
		Name        string         `toml:"name"`
		Version     string         `toml:"version"`
		Description string         `toml:"description"`
		Author      string         `toml:"author"`
		Permission  string         `toml:"permission"`
		Entrypoint  *string        `toml:"entrypoint"`
		InputSchema map[string]any `toml:"input_schema"`
	} `toml:"skill"`
	Capabilities struct {
		FilesRead  bool     `toml:"files_read"`
		FilesWrite bool     `toml:"files_write"`
		Network    []string `toml:"network"`
		Env        []string `toml:"env"`
		Memory     bool     `toml:"memory"`
		Schedule   bool     `toml:"schedule"`
	} `toml:"capabilities"`
	Credentials map[string]credentialFile `toml:"credentials"`
	Resources   struct {
		Fuel     *int64  `toml:"fuel"`
		MemoryMB *int64  `toml:"memory_mb"`
		Timeout  *string `toml:"timeout"`
	} `toml:"resources"`
}

type credentialFile struct {
	Hosts []string `toml:"hosts"`
	As    *string  `toml:"as"`
	Name  *string  `toml:"name"`
}

var (
	exportRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.$-]{0,127}$`)
	// semverRE is the regular expression of semver.org 2.0.0.
	semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

// ValidName reports whether s is a valid skill name: [a-z][a-z0-9_]{0,63}
// (internal/rules).
func ValidName(s string) bool { return rules.ValidSkillName(s) }

// MaxManifestBytes caps a skill.toml file (a real one, input schema
// included, is a few KiB).
const MaxManifestBytes = 1 << 20

// LoadManifest reads and parses a skill.toml file: a regular file of at most
// MaxManifestBytes of UTF-8 (ReadManifestFile).
func LoadManifest(path string) (*Manifest, error) {
	data, err := ReadManifestFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ReadManifestFile reads a skill.toml file with bounds: a FIFO, a device or
// a directory is refused (invalid_input), a file over MaxManifestBytes is
// too_large, and text that is not UTF-8 is invalid_input, never rewritten.
func ReadManifestFile(path string) ([]byte, error) {
	data, err := osfile.ReadBounded(path, MaxManifestBytes)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errs.Wrap(errs.ErrNotFound, "manifest "+path, err)
		}
		return nil, errs.Wrap(errs.ErrConfig, "reading manifest "+path, err)
	}
	if err := osfile.CheckUTF8("manifest "+path, data); err != nil {
		return nil, err
	}
	return data, nil
}

// ParseManifest parses and validates skill.toml. Every unknown key and invalid
// value is reported with its key path and line; the error wraps ErrConfig.
func ParseManifest(data []byte) (*Manifest, error) {
	var f manifestFile
	idx, err := tomlx.Decode(data, &f)
	if err != nil {
		return nil, err
	}
	v := tomlx.NewValidator(idx)
	fail := v.Fail

	m := DefaultManifest(f.Skill.Name)
	m.Version = f.Skill.Version
	m.Description = strings.TrimSpace(f.Skill.Description)
	m.Author = f.Skill.Author

	switch {
	case f.Skill.Name == "":
		fail("skill.name", "required")
	case !rules.ValidSkillName(f.Skill.Name):
		fail("skill.name", "%q must match [a-z][a-z0-9_]{0,63}", f.Skill.Name)
	}
	switch {
	case f.Skill.Version == "":
		fail("skill.version", "required")
	case !semverRE.MatchString(f.Skill.Version):
		fail("skill.version", "%q is not a semantic version (like 1.2.3)", f.Skill.Version)
	}
	switch {
	case m.Description == "":
		fail("skill.description", "required: it is what the LLM sees")
	case len(m.Description) > 1024:
		fail("skill.description", "longer than 1024 bytes")
	}
	if len(m.Author) > 256 {
		fail("skill.author", "longer than 256 bytes")
	}
	switch p := Permission(f.Skill.Permission); p {
	case ReadOnly, Mutating, Network:
		m.Permission = p
	case "":
		fail("skill.permission", "required: read_only, mutating or network")
	default:
		fail("skill.permission", "%q must be read_only, mutating or network", f.Skill.Permission)
	}
	if f.Skill.Entrypoint != nil {
		if !exportRE.MatchString(*f.Skill.Entrypoint) {
			fail("skill.entrypoint", "%q is not a valid export name", *f.Skill.Entrypoint)
		} else {
			m.Entrypoint = *f.Skill.Entrypoint
		}
	}
	if f.Skill.InputSchema != nil {
		if at, err := checkSchema(f.Skill.InputSchema); err != nil {
			fail("skill.input_schema"+at, "%v", err)
		} else {
			m.InputSchema = f.Skill.InputSchema
		}
	}

	c := &f.Capabilities
	m.Capabilities = Capabilities{FilesRead: c.FilesRead, FilesWrite: c.FilesWrite, Memory: c.Memory, Schedule: c.Schedule}
	for i, d := range c.Network {
		e, err := allow.Parse(d, allow.Manifest)
		if err != nil {
			fail(fmt.Sprintf("capabilities.network[%d]", i), "%v", err)
			continue
		}
		m.Capabilities.Network = append(m.Capabilities.Network, e.String())
	}
	for i, e := range c.Env {
		if !rules.ValidEnvName(e) {
			fail(fmt.Sprintf("capabilities.env[%d]", i), "%q is not an environment variable name", e)
			continue
		}
		m.Capabilities.Env = append(m.Capabilities.Env, e)
	}
	m.Capabilities.Network = dedupe(m.Capabilities.Network)
	m.Capabilities.Env = dedupe(m.Capabilities.Env)
	// The approval gate decides on the permission level, so the level must
	// cover what the capabilities allow.
	if m.Capabilities.FilesWrite && m.Permission == ReadOnly {
		fail("capabilities.files_write", "a read_only skill may not write files: declare permission = \"mutating\"")
	}
	if len(m.Capabilities.Network) > 0 && m.Permission != Network && m.Permission != "" {
		fail("capabilities.network", "a skill that reaches the network must declare permission = \"network\"")
	}
	m.Credentials = parseCredentials(f.Credentials, m.Capabilities.Network, fail)

	r := &f.Resources
	if fuel := v.Positive(r.Fuel, "resources.fuel", MaxFuel); fuel > 0 {
		m.Resources.Fuel = uint64(fuel)
	}
	if r.MemoryMB != nil {
		if *r.MemoryMB < MinMemoryMB || *r.MemoryMB > MaxMemoryMB {
			fail("resources.memory_mb", "must be between %d and %d", MinMemoryMB, MaxMemoryMB)
		} else {
			m.Resources.MemoryMB = int(*r.MemoryMB)
		}
	}
	if d := v.Duration(r.Timeout, "resources.timeout", MaxTimeout); d > 0 {
		m.Resources.Timeout = d
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// MaxCredentials caps the [credentials.NAME] sections of one skill.toml.
const MaxCredentials = 16

// parseCredentials validates [credentials.NAME] sections against the
// network the skill declares.
func parseCredentials(in map[string]credentialFile, network []string, fail func(string, string, ...any)) []Credential {
	if len(in) == 0 {
		return nil
	}
	names := make([]string, 0, len(in))
	for n := range in {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > MaxCredentials {
		fail("credentials", "%d credentials; at most %d", len(names), MaxCredentials)
		return nil
	}
	var declared []allow.Entry
	for _, d := range network {
		if e, err := allow.Parse(d, allow.Manifest); err == nil {
			declared = append(declared, e)
		}
	}
	var out []Credential
	for _, name := range names {
		cf := in[name]
		at := func(key string) string { return "credentials." + name + "." + key }
		if !secrets.ValidName(name) {
			fail("credentials."+name, "%q is not a secret name: %s", name, secrets.NameRule)
			continue
		}
		c := Credential{Name: name, As: CredentialBearer}
		ok := true
		if len(cf.Hosts) == 0 {
			fail(at("hosts"), "required: the hosts the credential may be sent to")
			ok = false
		}
		for i, h := range cf.Hosts {
			e, err := allow.Parse(h, allow.Manifest)
			switch {
			case err != nil:
				fail(fmt.Sprintf("%s[%d]", at("hosts"), i), "%v", err)
				ok = false
				continue
			case e.Any():
				fail(fmt.Sprintf("%s[%d]", at("hosts"), i), "\"*\" is not a host: name where the credential may be sent")
				ok = false
				continue
			}
			within := false
			for _, d := range declared {
				within = within || allow.Within(e, d)
			}
			if !within {
				fail(fmt.Sprintf("%s[%d]", at("hosts"), i), "%s is not among capabilities.network: a credential is sent only where the skill may connect", e.String())
				ok = false
				continue
			}
			c.Hosts = append(c.Hosts, e.String())
		}
		if cf.As != nil {
			c.As = *cf.As
		}
		switch c.As {
		case CredentialBearer, CredentialBasic:
			if cf.Name != nil {
				fail(at("name"), "only for as = \"header\" or \"query\"")
				ok = false
			}
		case CredentialHeader, CredentialQuery:
			if cf.Name == nil || *cf.Name == "" {
				fail(at("name"), "required for as = %q: the %s to send it in", c.As, map[string]string{CredentialHeader: "header", CredentialQuery: "query parameter"}[c.As])
				ok = false
				break
			}
			c.Param = *cf.Name
			if why := ParamProblem(c.As, c.Param); why != "" {
				fail(at("name"), "%q %s", c.Param, why)
				ok = false
			}
		default:
			fail(at("as"), "%q must be \"bearer\", \"basic\", \"header\" or \"query\"", c.As)
			ok = false
		}
		if ok {
			c.Hosts = dedupe(c.Hosts)
			out = append(out, c)
		}
	}
	return out
}

// reservedHeaders are headers a credential may not be sent in: they frame
// the request or the connection, decide how the answer is decoded, or
// describe the body (and so do every Proxy-* header). hostfns/http refuses
// the framing ones too, so that a manifest accepted here always links.
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true, "keep-alive": true,
	"upgrade": true, "te": true, "trailer": true, "proxy-authorization": true, "proxy-connection": true,
	"expect": true, "accept-encoding": true, "content-type": true, "content-encoding": true, "cookie": true,
}

// ParamProblem says why name cannot carry a credential sent as as
// (CredentialHeader: an HTTP header name; CredentialQuery: a query
// parameter), "" when it can.
func ParamProblem(as, name string) string {
	if len(name) == 0 || len(name) > 128 {
		return "must be 1 to 128 characters"
	}
	switch as {
	case CredentialHeader:
		for _, c := range []byte(name) {
			if !tokenChar(c) {
				return "is not an HTTP header name"
			}
		}
		if lower := strings.ToLower(name); reservedHeaders[lower] || strings.HasPrefix(lower, "proxy-") {
			return "is a header buddy sets itself"
		}
	case CredentialQuery:
		if !queryParamRE.MatchString(name) {
			return "is not a plain query parameter name (letters, digits, _ - . ~ [ ])"
		}
	}
	return ""
}

var queryParamRE = regexp.MustCompile(`^[A-Za-z0-9_.~\[\]-]+$`)

// tokenChar reports whether c may appear in an HTTP token (RFC 9110).
func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// checkSchema accepts a JSON Schema for a tool input: an object schema made
// only of values JSON can carry. TOML dates and times cannot (encoding/json
// would quietly turn them into strings), nor can NaN or infinities. On error it
// returns where, relative to the schema (".type", ".properties.when.default").
func checkSchema(s map[string]any) (string, error) {
	t, ok := s["type"]
	if !ok {
		return "", fmt.Errorf(`needs type = "object" (tool inputs are JSON objects)`)
	}
	if t != "object" {
		return ".type", fmt.Errorf(`must be "object" (tool inputs are JSON objects)`)
	}
	if p, ok := s["properties"]; ok {
		if _, ok := p.(map[string]any); !ok {
			return ".properties", fmt.Errorf("must be a table")
		}
	}
	return checkJSON(s, "")
}

// checkJSON finds the first value under v that has no JSON form.
func checkJSON(v any, at string) (string, error) {
	switch v := v.(type) {
	case nil, string, bool, int64:
		return "", nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return at, fmt.Errorf("%v is not a JSON number", v)
		}
		return "", nil
	case []any:
		for i, e := range v {
			if p, err := checkJSON(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return p, err
			}
		}
		return "", nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, err := checkJSON(v[k], at+"."+k); err != nil {
				return p, err
			}
		}
		return "", nil
	}
	if _, ok := v.(time.Time); ok || strings.HasPrefix(fmt.Sprintf("%T", v), "toml.Local") {
		return at, fmt.Errorf("a TOML date or time (%v) is not valid in a JSON Schema; quote it as a string", v)
	}
	return at, fmt.Errorf("a %T value has no JSON form", v)
}

func dedupe(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	seen := map[string]bool{}
	out := s[:0:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// MaxPages is the wasm page cap of the skill's memory limit.
func (r Resources) MaxPages() uint32 { return uint32(r.MemoryMB) * 16 }
