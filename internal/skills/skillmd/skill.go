// Package skillmd holds buddy's SKILL.md skills: folders of Markdown
// with YAML frontmatter (the Agent Skills format), beside the WebAssembly
// skills. They never run code: an instruction skill is text handed to the
// model on demand, a template skill renders text/template with the caller's
// parameters, a composite skill returns a plan of tool calls that the model
// then makes one by one through the approval gate, and a script skill is kept
// for compatibility but refuses to run (buddy runs no shell).
//
//	st := skillmd.NewStore(cfg.Instructions.SkillsDir)
//	_ = skillmd.EnsureDefaults(st.Dir())            // the embedded skills, never overwriting the user's
//	skills, problems := st.ListActive(ctx)          // one bad SKILL.md does not stop the others
//	cat := skillmd.NewCatalog(skills, skillmd.CatalogOptions{Sessions: sess})
//	all := catalog.NewUnion(registry, cat)          // WebAssembly skills win name clashes
//
// A skill that declares `permissions` in its frontmatter binds the
// conversation that loaded it: every later tool call must fit the union of
// the active skills' declarations, on top of buddy.toml's grants (Sessions,
// permissions.go).
package skillmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
	"gopkg.in/yaml.v3"
)

// The skill types.
const (
	TypeInstruction = "instruction"
	TypeTemplate    = "template"
	TypeComposite   = "composite"
	TypeScript      = "script"
)

// ValidTypes lists the skill types, in the order error messages name them.
var ValidTypes = []string{TypeComposite, TypeScript, TypeTemplate, TypeInstruction}

// StatusActive is the status of a skill that is loaded; any other status
// ("draft", "disabled") keeps a skill on disk but out of the catalog.
const StatusActive = "active"

// Limits.
const (
	// MaxFileBytes caps a SKILL.md.
	MaxFileBytes = 512 << 10
	// MaxDescriptionBytes caps a description (Agent Skills asks for 1,024
	// characters; real ones run longer).
	MaxDescriptionBytes = 16 << 10
	// MaxSteps caps a composite skill's plan.
	MaxSteps = 100
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidName reports whether s may name a SKILL.md skill: lowercase letters,
// digits, '-' and '_', at most 64, starting with a letter or digit
// ("doc-coauthoring").
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Step is one tool call of a composite skill's plan.
type Step struct {
	Tool   string         `json:"tool" yaml:"tool"`
	Params map[string]any `json:"params,omitempty" yaml:"params,omitempty"`
}

// Skill is one parsed SKILL.md. It is a value: the catalog keeps its own.
type Skill struct {
	Name        string
	Description string
	Type        string
	Status      string
	// Parameters describe a template skill's input: either a JSON Schema
	// object ("type: object") or a map of parameter name to description.
	Parameters   map[string]any
	Source       string   // where it was imported from; "" when made here
	AllowedTools []string // allowed_tools, or the Agent Skills allowed-tools
	License      string
	Metadata     map[string]any
	// Permissions narrow what a conversation may do while the skill is
	// active; nil declares nothing (no restriction).
	Permissions *Permissions

	Content  string // the Markdown body (an instruction skill's content)
	Template string // a template skill's text/template
	Steps    []Step // a composite skill's plan
	Script   string // a script skill's shell text (never run)

	// Dir is the skill's folder; Path its SKILL.md ("" before it is saved).
	Dir, Path string
}

// DescriptionOrDefault is the description, or "Reference guide for NAME".
func (s *Skill) DescriptionOrDefault() string {
	if strings.TrimSpace(s.Description) != "" {
		return s.Description
	}
	return "Reference guide for " + s.Name
}

// FileError is a problem in one SKILL.md, with the line it is on (0 when it
// concerns the whole file). It wraps errs.ErrInvalidInput.
type FileError struct {
	Path string
	Line int
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap makes a FileError an invalid-input error.
func (e *FileError) Unwrap() error { return errs.ErrInvalidInput }

// frontmatter mirrors the YAML between the --- lines. Unknown keys are
// ignored (real skill folders carry others); permissions are read strictly.
type frontmatter struct {
	Name          string         `yaml:"name"`
	Description   string         `yaml:"description"`
	Type          string         `yaml:"type"`
	Status        string         `yaml:"status"`
	Parameters    map[string]any `yaml:"parameters"`
	Source        string         `yaml:"source"`
	AllowedTools  []string       `yaml:"allowed_tools"`
	AgentAllowed  yaml.Node      `yaml:"allowed-tools"`
	License       string         `yaml:"license"`
	Metadata      map[string]any `yaml:"metadata"`
	Permissions   yaml.Node      `yaml:"permissions"`
	TemplateText  string         `yaml:"template"`
	Steps         []Step         `yaml:"steps"`
	ScriptText    string         `yaml:"script"`
	Compatibility string         `yaml:"compatibility"`
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// Parse reads a SKILL.md. path names the file in errors; a frontmatter
// without a name takes the name of the folder path is in.
func Parse(path string, data []byte) (*Skill, error) {
	fail := func(line int, format string, args ...any) error {
		return &FileError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileBytes {
		return nil, fail(0, "larger than %d bytes", MaxFileBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		// A SKILL.md is UTF-8 text: what is not could not be saved back,
		// shown, or handed to a model as it is.
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return nil, fail(1+bytes.Count(data[:off], []byte("\n")), "not valid UTF-8 (invalid byte 0x%02x at offset %d)", data[off], off)
	}
	text := lfLines(string(data))
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t\n") != "---" {
		return nil, fail(1, "no frontmatter: a SKILL.md starts with a line \"---\", then YAML, then a closing \"---\"")
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t\n") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, fail(1, "the frontmatter opened on line 1 is never closed by a line \"---\"")
	}
	yamlText := strings.Join(lines[1:end], "")
	body := strings.Join(lines[end+1:], "")
	bodyLine := end + 2 // the body's first line, 1-based

	var root yaml.Node
	if err := yaml.Unmarshal([]byte(yamlText), &root); err != nil {
		return nil, yamlError(path, err)
	}
	if len(root.Content) == 0 {
		return nil, fail(2, "the frontmatter is empty: it needs at least a name and a description")
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, fail(doc.Line+1, "the frontmatter must be a YAML mapping (key: value lines)")
	}
	var fm frontmatter
	if err := doc.Decode(&fm); err != nil {
		return nil, yamlError(path, err)
	}
	at := func(key string) int {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == key {
				return doc.Content[i].Line + 1
			}
		}
		return 2
	}
	s := &Skill{
		Name: strings.TrimSpace(fm.Name), Description: strings.TrimSpace(fm.Description),
		Type: strings.TrimSpace(fm.Type), Status: strings.TrimSpace(fm.Status),
		Parameters: fm.Parameters, Source: fm.Source, AllowedTools: fm.AllowedTools,
		License: fm.License, Metadata: fm.Metadata,
	}
	if s.Name == "" {
		s.Name = filepath.Base(filepath.Dir(path)) // Agent Skills: the folder's name
	}
	if s.Type == "" {
		s.Type = TypeInstruction
	}
	if s.Status == "" {
		s.Status = StatusActive
	}
	if fm.AgentAllowed.Kind != 0 {
		tools, err := agentAllowedTools(&fm.AgentAllowed)
		if err != nil {
			return nil, fail(at("allowed-tools"), "%v", err)
		}
		s.AllowedTools = append(s.AllowedTools, tools...)
	}
	if fm.Permissions.Kind != 0 {
		p, err := parsePermissions(&fm.Permissions)
		if err != nil {
			var pe *permError
			if errors.As(err, &pe) {
				return nil, fail(pe.line+1, "permissions: %s", pe.msg)
			}
			return nil, fail(at("permissions"), "permissions: %v", err)
		}
		s.Permissions = p
	}
	// A skill's definition is the one its type reads: the frontmatter's, else
	// the body's.
	switch s.Type {
	case TypeInstruction:
		s.Content = strings.TrimLeft(body, "\n")
	case TypeTemplate:
		if s.Template = fm.TemplateText; s.Template == "" {
			s.Template, _ = fenced(body, "template")
		}
	case TypeComposite:
		if fm.Steps != nil {
			steps, err := jsonSteps(fm.Steps)
			if err != nil {
				return nil, fail(at("steps"), "%v", err)
			}
			s.Steps = steps
		} else {
			if js, line := fenced(body, "json"); js != "" {
				var def struct {
					Steps []Step `json:"steps"`
				}
				dec := json.NewDecoder(strings.NewReader(js))
				dec.UseNumber()
				if err := dec.Decode(&def); err != nil {
					return nil, fail(bodyLine+line, "the ```json block is not {\"steps\": [{\"tool\": ..., \"params\": {...}}, ...]}: %v", err)
				}
				s.Steps = def.Steps
			}
		}
	case TypeScript:
		if s.Script = fm.ScriptText; s.Script == "" {
			if s.Script, _ = fenced(body, "sh"); s.Script == "" {
				s.Script, _ = fenced(body, "bash")
			}
		}
	}
	if err := s.Validate(); err != nil {
		line := 2
		var ve *validationError
		if errors.As(err, &ve) && ve.key != "" {
			line = at(ve.key)
		}
		return nil, fail(line, "%v", err)
	}
	return s, nil
}

// jsonSteps returns steps read from YAML with their parameters as the
// ```json block gives them (numbers as json.Number): a plan is JSON, so a
// parameter JSON cannot hold (NaN, a map with keys that are not strings) is
// refused here rather than when the plan is made.
func jsonSteps(steps []Step) ([]Step, error) {
	out := make([]Step, len(steps))
	for i, st := range steps {
		out[i].Tool = st.Tool
		if st.Params == nil {
			continue
		}
		b, err := json.Marshal(st.Params)
		if err != nil {
			return nil, fmt.Errorf("the params of step %d are not JSON: %v", i+1, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&out[i].Params); err != nil {
			return nil, fmt.Errorf("the params of step %d are not JSON: %v", i+1, err)
		}
	}
	return out, nil
}

// crlf is a line end with any carriage returns before it.
var crlf = regexp.MustCompile(`\r+\n`)

// lfLines turns CRLF line ends into LF, with any carriage returns before
// them (a file converted twice), so that the text it returns has none left.
func lfLines(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return crlf.ReplaceAllLiteralString(s, "\n")
}

// yamlError turns a YAML error into a FileError whose line counts from the
// top of the file (the frontmatter starts on line 2).
func yamlError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		line = n + 1
		msg = lineRE.ReplaceAllStringFunc(msg, func(s string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
			return "line " + strconv.Itoa(n+1)
		})
		msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	return &FileError{Path: path, Line: line, Msg: "invalid YAML in the frontmatter: " + msg}
}

// agentAllowedTools reads the Agent Skills allowed-tools: a space-separated
// string or a list.
func agentAllowedTools(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return strings.Fields(n.Value), nil
	case yaml.SequenceNode:
		var out []string
		if err := n.Decode(&out); err != nil {
			return nil, fmt.Errorf("allowed-tools must be a string or a list of strings")
		}
		return out, nil
	}
	return nil, fmt.Errorf("allowed-tools must be a string or a list of strings")
}

// fenced returns the first ```lang block of body and the line (0-based, in
// body) of its opening fence.
func fenced(body, lang string) (string, int) {
	lines := strings.Split(body, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") || strings.TrimSpace(strings.TrimPrefix(l, "```")) != lang {
			continue
		}
		var b strings.Builder
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return b.String(), i
			}
			b.WriteString(lines[j])
			b.WriteByte('\n')
		}
		return b.String(), i // an unclosed fence runs to the end
	}
	return "", 0
}

// validationError names the frontmatter key a problem is about.
type validationError struct {
	key string
	msg string
}

func (e *validationError) Error() string { return e.msg }

func invalid(key, format string, args ...any) error {
	return &validationError{key: key, msg: fmt.Sprintf(format, args...)}
}

// Validate checks a skill as the store does on create: a valid
// name and type, and the definition its type needs.
func (s *Skill) Validate() error {
	if !ValidName(s.Name) {
		return invalid("name", "name %q must be 1-64 lowercase letters, digits, '-' or '_' (like doc-coauthoring)", s.Name)
	}
	if len(s.Description) > MaxDescriptionBytes {
		return invalid("description", "description is %d bytes; at most %d", len(s.Description), MaxDescriptionBytes)
	}
	switch s.Type {
	case TypeInstruction:
	case TypeTemplate:
		if strings.TrimSpace(s.Template) == "" {
			return invalid("type", "a template skill needs a template: a ```template block in the body or template: in the frontmatter")
		}
		if _, err := parseTemplate(s.Name, s.Template, nil); err != nil {
			return invalid("template", "%v", err)
		}
	case TypeComposite:
		if len(s.Steps) == 0 {
			return invalid("type", "a composite skill needs a steps array: a ```json {\"steps\": [...]} block in the body or steps: in the frontmatter")
		}
		if len(s.Steps) > MaxSteps {
			return invalid("steps", "%d steps; at most %d", len(s.Steps), MaxSteps)
		}
		for i, st := range s.Steps {
			if strings.TrimSpace(st.Tool) == "" {
				return invalid("steps", "step %d names no tool", i+1)
			}
		}
	case TypeScript:
		if strings.TrimSpace(s.Script) == "" {
			return invalid("type", "a script skill needs a script: a ```sh block in the body or script: in the frontmatter")
		}
		if p := dangerous(s.Script); p != "" {
			return invalid("script", "the script matches a dangerous pattern (%s)", p)
		}
	default:
		return invalid("type", "type %q is not one of %s", s.Type, strings.Join(ValidTypes, ", "))
	}
	if s.Permissions != nil {
		if err := s.Permissions.validate(); err != nil {
			return invalid("permissions", "permissions: %v", err)
		}
	}
	return nil
}

// dangerousPatterns are a defence in depth for scripts. buddy never
// runs a script; the check keeps such text out of the store all the same.
var dangerousPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"recursive force delete of /", regexp.MustCompile(`rm\s+(-[a-zA-Z]*r[a-zA-Z]*f|-[a-zA-Z]*f[a-zA-Z]*r|-r\s+-f|-f\s+-r)[a-zA-Z]*\s+/(\s|$|\*)`)},
	{"fork bomb", regexp.MustCompile(`:\(\)\s*\{\s*:\|:&\s*\};:`)},
	{"pipe to shell", regexp.MustCompile(`(curl|wget)[^|]*\|\s*(ba|z)?sh`)},
	{"raw device write", regexp.MustCompile(`>\s*/dev/sd`)},
	{"filesystem formatting", regexp.MustCompile(`mkfs\.`)},
	{"raw disk copy", regexp.MustCompile(`dd\s+if=`)},
}

func dangerous(script string) string {
	for _, p := range dangerousPatterns {
		if p.re.MatchString(script) {
			return p.name
		}
	}
	return ""
}

// rendered mirrors the frontmatter Render writes. Its strings and maps are
// written so that yaml.v3 reads them back the same (yamlString, yamlNode).
type rendered struct {
	Name         string               `yaml:"name"`
	Description  yamlString           `yaml:"description,omitempty"`
	Type         string               `yaml:"type"`
	Status       yamlString           `yaml:"status"`
	Parameters   *yaml.Node           `yaml:"parameters,omitempty"`
	Source       yamlString           `yaml:"source,omitempty"`
	AllowedTools []yamlString         `yaml:"allowed_tools,omitempty"`
	License      yamlString           `yaml:"license,omitempty"`
	Metadata     *yaml.Node           `yaml:"metadata,omitempty"`
	Permissions  *renderedPermissions `yaml:"permissions,omitempty"`
	Template     yamlString           `yaml:"template,omitempty"`
	Script       yamlString           `yaml:"script,omitempty"`
}

// renderedPermissions mirrors Permissions.
type renderedPermissions struct {
	FS struct {
		Read  []yamlString `yaml:"read,omitempty"`
		Write []yamlString `yaml:"write,omitempty"`
	} `yaml:"fs,omitempty"`
	Network struct {
		Allow []yamlString `yaml:"allow,omitempty"`
	} `yaml:"network,omitempty"`
	Env      []yamlString `yaml:"env,omitempty"`
	Exec     []yamlString `yaml:"exec,omitempty"`
	Services *yaml.Node   `yaml:"services,omitempty"`
}

// yamlString is a string yaml.v3 writes so that it reads back the same:
// double-quoted if it holds a tab or a line break (yaml.v3 writes those as
// literal blocks, which drop a leading newline, or which a leading tab makes
// unreadable).
type yamlString string

// MarshalYAML implements yaml.Marshaler.
func (s yamlString) MarshalYAML() (any, error) {
	if breaks(string(s)) {
		return quoted(string(s)), nil
	}
	return string(s), nil
}

// breaks reports whether s holds a tab or what YAML reads as a line break.
func breaks(s string) bool { return strings.ContainsAny(s, "\t\n\r\u0085\u2028\u2029") }

func quoted(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: s}
}

func yamlStrings(list []string) []yamlString {
	var out []yamlString
	for _, s := range list {
		out = append(out, yamlString(s))
	}
	return out
}

// yamlMap is m as a node (nil if m is empty), for Render.
func yamlMap(m map[string]any) (*yaml.Node, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return yamlNode(m)
}

// yamlNode is v, as decoded from YAML, as a node yaml.v3 writes so that it
// reads back the same: strings (map keys too) as yamlString does, floats so
// that they read back as floats (yaml.v3 writes 1.0 as 1, an int), map keys
// sorted.
func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case string:
		if breaks(v) {
			return quoted(v), nil
		}
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		switch {
		case math.IsInf(v, 1):
			s = ".inf"
		case math.IsInf(v, -1):
			s = "-.inf"
		case math.IsNaN(v):
			s = ".nan"
		case !strings.ContainsAny(s, ".e"):
			s += ".0"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			en, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, en)
		}
		return n, nil
	case map[string]any:
		m := make(map[any]any, len(v))
		for k, e := range v {
			m[k] = e
		}
		return yamlNode(m)
	case map[any]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for k, e := range v {
			kn, err := yamlNode(k)
			if err != nil {
				return nil, err
			}
			en, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, kn, en)
		}
		pairs := make([][2]*yaml.Node, 0, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			pairs = append(pairs, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
		}
		slices.SortFunc(pairs, func(a, b [2]*yaml.Node) int {
			if c := strings.Compare(a[0].Tag, b[0].Tag); c != 0 {
				return c
			}
			return strings.Compare(a[0].Value, b[0].Value)
		})
		n.Content = n.Content[:0]
		for _, p := range pairs {
			n.Content = append(n.Content, p[0], p[1])
		}
		return n, nil
	}
	var n yaml.Node // a string without breaks, an int, a bool, null, a time
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return &n, nil
}

// Render writes s as a SKILL.md: frontmatter, then the definition in the
// body (an instruction's content as plain Markdown, the others in fenced
// blocks). A template or script that a fenced block cannot hold as it is
// (one with no final newline, a line that would close the block, a carriage
// return) goes in the frontmatter instead. Parse reads back the same skill
// (FuzzParseSkillMD).
func Render(s *Skill) ([]byte, error) {
	r := rendered{
		Name: s.Name, Description: yamlString(s.Description), Type: s.Type, Status: yamlString(s.Status),
		Source: yamlString(s.Source), AllowedTools: yamlStrings(s.AllowedTools), License: yamlString(s.License),
	}
	var err error
	if r.Parameters, err = yamlMap(s.Parameters); err != nil {
		return nil, fmt.Errorf("rendering the parameters of %s: %w", s.Name, err)
	}
	if r.Metadata, err = yamlMap(s.Metadata); err != nil {
		return nil, fmt.Errorf("rendering the metadata of %s: %w", s.Name, err)
	}
	if p := s.Permissions; p != nil {
		r.Permissions = &renderedPermissions{Env: yamlStrings(p.Env), Exec: yamlStrings(p.Exec)}
		r.Permissions.FS.Read, r.Permissions.FS.Write = yamlStrings(p.FS.Read), yamlStrings(p.FS.Write)
		r.Permissions.Network.Allow = yamlStrings(p.Network.Allow)
		if r.Permissions.Services, err = yamlMap(p.Services); err != nil {
			return nil, fmt.Errorf("rendering the permissions of %s: %w", s.Name, err)
		}
	}
	if s.Type == TypeTemplate && !fenceable(s.Template) {
		r.Template = yamlString(s.Template)
	}
	if s.Type == TypeScript && !fenceable(s.Script) {
		r.Script = yamlString(s.Script)
	}
	fm, err := yaml.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("rendering the frontmatter of %s: %w", s.Name, err)
	}
	var b bytes.Buffer
	b.WriteString("---\n")
	b.Write(fm)
	b.WriteString("---\n")
	switch s.Type {
	case TypeTemplate:
		if r.Template == "" {
			fmt.Fprintf(&b, "\n```template\n%s```\n", s.Template)
		}
	case TypeComposite:
		js, err := json.MarshalIndent(map[string]any{"steps": s.Steps}, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("rendering the steps of %s: %w", s.Name, err)
		}
		fmt.Fprintf(&b, "\n```json\n%s\n```\n", js)
	case TypeScript:
		if r.Script == "" {
			fmt.Fprintf(&b, "\n```sh\n%s```\n", s.Script)
		}
	default:
		b.WriteString(s.Content)
	}
	return b.Bytes(), nil
}

// fenceable reports whether fenced reads text back from a fenced block of it.
func fenceable(text string) bool {
	if !strings.HasSuffix(text, "\n") || strings.Contains(text, "\r") {
		return false
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == "```" {
			return false
		}
	}
	return true
}

// BuildInstructionSkill makes an instruction skill.
func BuildInstructionSkill(name, description, content, source string) *Skill {
	return &Skill{Name: name, Description: description, Type: TypeInstruction, Status: StatusActive, Content: content, Source: source}
}

// BuildFromSteps makes a composite skill from tool steps.
func BuildFromSteps(name, description string, steps []Step) *Skill {
	return &Skill{Name: name, Description: description, Type: TypeComposite, Status: StatusActive, Steps: steps}
}

// BuildScript makes a script skill (stored, never run).
func BuildScript(name, description, script string) *Skill {
	return &Skill{Name: name, Description: description, Type: TypeScript, Status: StatusActive, Script: script}
}
