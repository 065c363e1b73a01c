package tomlx

import (
	"errors"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

type doc struct {
	Top    int64    `toml:"top"`
	Name   string   `toml:"name"`
	List   []string `toml:"list"`
	Server struct {
		Listen string `toml:"listen"`
		Port   int64  `toml:"port"`
		TLS    struct {
			Cert string `toml:"cert"`
		} `toml:"tls"`
	} `toml:"server"`
	Skills map[string]struct {
		Dirs []string `toml:"dirs"`
		Fuel *int64   `toml:"fuel"`
		On   bool     `toml:"on"`
	} `toml:"skills"`
	Items []struct {
		X int64 `toml:"x"`
	} `toml:"items"`
	Any map[string]any `toml:"any"`
}

// fieldErrors returns the field errors in err, checking that each (and err
// itself) is a config error.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("errors.Is(%v, errs.ErrConfig) = false", err)
	}
	var out []*FieldError
	switch e := err.(type) {
	case *FieldError:
		out = []*FieldError{e}
	case Errors:
		out = e
	default:
		t.Fatalf("error %T %v is neither *FieldError nor Errors", err, err)
	}
	for _, fe := range out {
		if !errors.Is(fe, errs.ErrConfig) {
			t.Errorf("field error %v is not a config error", fe)
		}
		if strings.Contains(fe.Msg, "toml: ") {
			t.Errorf("field error %q keeps go-toml's prefix", fe.Msg)
		}
	}
	return out
}

type want struct {
	path string
	line int
	msg  string // a part of the message
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []want
	}{
		{
			name: "unknown keys all reported",
			doc: `top = 1
bogus = 2
[server]
listen = "x"
extra = true
[server.tls]
key = "k"
[skills.read_file]
dirs = []
dirz = ["typo"]
[wasm]
x = 1
`,
			want: []want{
				{"bogus", 2, "unknown key"},
				{"server.extra", 5, "unknown key"},
				{"server.tls.key", 7, "unknown key"},
				{"skills.read_file.dirz", 10, "unknown key"},
				{"wasm", 11, "unknown key"},
			},
		},
		{
			name: "unknown dotted key",
			doc:  "top = 1\nserver.listen = \"x\"\nserver.bogus = 1\n",
			want: []want{{"server.bogus", 3, "unknown key"}},
		},
		{
			name: "unknown key in inline table",
			doc:  "\nserver = {listen = \"x\", nope = 1}\n",
			want: []want{{"server.nope", 2, "unknown key"}},
		},
		{
			name: "unknown key in nested inline table",
			doc:  "[server]\nlisten = \"x\"\ntls = {cert = \"c\", key = {a = 1}}\n",
			want: []want{{"server.tls.key", 3, "unknown key"}},
		},
		{
			name: "unknown key in inline table named like a known key",
			doc:  "[server]\nlisten = \"x\"\ntls = {cert = \"c\", listen = 1}\n",
			want: []want{{"server.tls.listen", 3, "unknown key"}},
		},
		{
			name: "unknown key in inline table in array",
			doc:  "items = [\n  {x = 1},\n  {x = 2, zz = 3},\n]\n",
			want: []want{{"items.zz", 3, "unknown key"}},
		},
		{
			name: "unknown key in inline table in map",
			doc:  "skills = {read_file = {dirs = [], fuell = 1}}\n",
			want: []want{{"skills.read_file.fuell", 1, "unknown key"}},
		},
		{
			name: "unknown key in array of tables",
			doc:  "[[items]]\nx = 1\n[[items]]\ny = 2\n",
			want: []want{{"items.y", 4, "unknown key"}},
		},
		{
			name: "string for integer",
			doc:  "\n\ntop = \"one\"\n",
			want: []want{{"top", 3, "expected an integer, got a string"}},
		},
		{
			name: "integer for string in table",
			doc:  "[server]\n\nlisten = 8080\n",
			want: []want{{"server.listen", 3, "expected a string, got an integer"}},
		},
		{
			name: "integer in string array",
			doc:  "list = [\"a\",\n  2]\n",
			want: []want{{"list", 2, "expected a string, got an integer"}},
		},
		{
			name: "string for array",
			doc:  "list = \"a\"\n",
			want: []want{{"list", 1, "expected an array, got a string"}},
		},
		{
			name: "integer for table",
			doc:  "top = 1\nserver = 5\n",
			want: []want{{"server", 2, "expected a table, got an integer"}},
		},
		{
			name: "integer for map entry",
			doc:  "[skills]\nread_file = 5\n",
			want: []want{{"skills.read_file", 2, "expected a table, got an integer"}},
		},
		{
			name: "string for pointer field in map",
			doc:  "[skills.read_file]\nfuel = \"lots\"\n",
			want: []want{{"skills.read_file.fuel", 2, "expected an integer, got a string"}},
		},
		{
			name: "datetime for string",
			doc:  "name = 1979-05-27T07:32:00Z\n",
			want: []want{{"name", 1, "expected a string, got a datetime"}},
		},
		{
			name: "float for integer",
			doc:  "top = 1e9\n",
			want: []want{{"top", 1, "expected an integer, got a float"}},
		},
		{
			name: "boolean for string",
			doc:  "[server.tls]\ncert = true\n",
			want: []want{{"server.tls.cert", 2, "expected a string, got a boolean"}},
		},
		{
			name: "integer overflow",
			doc:  "\ntop = 99999999999999999999\n",
			want: []want{{"top", 2, "too large"}},
		},
		{
			name: "duplicate key",
			doc:  "top = 1\n\ntop = 2\n",
			want: []want{{"top", 3, "already defined"}},
		},
		{
			name: "syntax error: missing value",
			doc:  "top = 1\nname =\n",
			want: []want{{"", 2, "unexpected"}},
		},
		{
			name: "syntax error: unterminated string",
			doc:  "top = 1\n\n\nname = \"abc\n",
			want: []want{{"", 4, ""}},
		},
		{
			name: "syntax error: bad table header",
			doc:  "top = 1\n[server\n",
			want: []want{{"", 2, ""}},
		},
		{
			name: "syntax error: bare word",
			doc:  "\n\n\nthis is not toml\n",
			want: []want{{"", 4, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			_, err := Decode([]byte(tt.doc), &d)
			if err == nil {
				t.Fatalf("Decode accepted %q", tt.doc)
			}
			got := fieldErrors(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors (%v), want %d", len(got), err, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Path != w.path || g.Line != w.line || !strings.Contains(g.Msg, w.msg) {
					t.Errorf("error %d = {%q, line %d, %q}, want {%q, line %d, containing %q}", i, g.Path, g.Line, g.Msg, w.path, w.line, w.msg)
				}
				if w.line > 0 && !strings.Contains(g.Error(), "(line ") {
					t.Errorf("error %q does not show its line", g.Error())
				}
				if w.path != "" && !strings.Contains(err.Error(), w.path) {
					t.Errorf("error %q does not name %q", err.Error(), w.path)
				}
			}
		})
	}
}

func TestDecodeOK(t *testing.T) {
	var d doc
	idx, err := Decode([]byte("top = 7\n[server]\nlisten = \"127.0.0.1:1\"\n[skills.a]\n[skills.b]\nfuel = 3\n"), &d)
	if err != nil {
		t.Fatal(err)
	}
	if d.Top != 7 || d.Server.Listen != "127.0.0.1:1" || *d.Skills["b"].Fuel != 3 {
		t.Errorf("decoded %+v", d)
	}
	if _, ok := d.Skills["a"]; !ok {
		t.Errorf("an empty [skills.a] table is not in the map: %v", d.Skills)
	}
	if idx.Line([]string{"skills", "b", "fuel"}) != 6 {
		t.Errorf("line of skills.b.fuel = %d, want 6", idx.Line([]string{"skills", "b", "fuel"}))
	}
}

func TestIndexLine(t *testing.T) {
	const src = `top = 1
name = "n"

[server]
listen = "x"
tls.cert = "c"

[server.tls]

[a.b]
c = 1

[x]
y.z.w = 2
t = {p = 1, q = {r = 2}}
arr = [{k = 1}, {k = 2, m = 3}]
"quoted key" = 4
list = [
  "a",
  "b",
]

[[items]]
x = 1
[[items]]
x = 2
`
	var idx = index([]byte(src))
	tests := []struct {
		path string
		want int
	}{
		{"top", 1},
		{"name", 2},
		{"server", 4},
		{"server.listen", 5},
		{"server.tls", 6}, // first defined by the dotted key, before its header
		{"server.tls.cert", 6},
		{"a", 10}, // implicit table of the [a.b] header
		{"a.b", 10},
		{"a.b.c", 11},
		{"x", 13},
		{"x.y", 14}, // implicit tables of a dotted key
		{"x.y.z", 14},
		{"x.y.z.w", 14},
		{"x.t", 15},
		{"x.t.p", 15},
		{"x.t.q.r", 15},
		{"x.arr", 16},
		{"x.arr[1].m", 16},
		{"x.quoted key", 17},
		{"x.list", 18},
		{"x.list[1]", 18}, // array elements are located at their key
		{"items", 23},
		{"items.x", 24},
		{"items[1].x", 24},
		{"server.listen.nothing", 5}, // falls back to the nearest known ancestor
		{"server.nope", 4},
		{"nowhere", 0},
		{"nowhere.deep", 0},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			path := splitPath(tt.path)
			if got := idx.Line(path); got != tt.want {
				t.Errorf("Line(%q) = %d, want %d", path, got, tt.want)
			}
		})
	}
	t.Run("nil index", func(t *testing.T) {
		var x *Index
		if got := x.Line([]string{"top"}); got != 0 {
			t.Errorf("nil Index Line = %d", got)
		}
	})
	t.Run("unparsable document", func(t *testing.T) {
		x := index([]byte("top = 1\n[oops\n"))
		if got := x.Line([]string{"nowhere"}); got != 0 {
			t.Errorf("Line = %d", got)
		}
	})
}

// splitPath splits a dotted path, keeping the one quoted key of the test intact.
func splitPath(p string) []string {
	if strings.HasSuffix(p, "quoted key") {
		return []string{"x", "quoted key"}
	}
	return strings.Split(p, ".")
}

func TestErrorf(t *testing.T) {
	var d doc
	idx, err := Decode([]byte("[skills.read_file]\n\ndirs = [\"/a\", \"/b\",\n \"/c\"]\n"), &d)
	if err != nil {
		t.Fatal(err)
	}
	fe := idx.Errorf([]string{"skills", "read_file", "dirs[2]"}, "directory %s does not exist", "/c")
	if got, want := fe.Error(), "skills.read_file.dirs[2] (line 3): directory /c does not exist"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fe, errs.ErrConfig) {
		t.Error("not a config error")
	}
}

func TestFieldErrorText(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{Path: "resources.fuel", Line: 12, Msg: "must be > 0"}, "resources.fuel (line 12): must be > 0"},
		{FieldError{Path: "resources.fuel", Msg: "must be > 0"}, "resources.fuel: must be > 0"},
		{FieldError{Line: 3, Msg: "bad"}, "(line 3): bad"},
		{FieldError{Msg: "bad"}, "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.e.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	if err := Join(nil); err != nil {
		t.Errorf("Join(nil) = %v", err)
	}
	a := &FieldError{Path: "a", Line: 1, Msg: "x"}
	b := &FieldError{Path: "b", Line: 2, Msg: "y"}
	if err := Join([]*FieldError{a}); err != a {
		t.Errorf("Join of one = %v, want the error itself", err)
	}
	err := Join([]*FieldError{a, b})
	if got, want := err.Error(), "a (line 1): x; b (line 2): y"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	if !errors.Is(err, errs.ErrConfig) {
		t.Error("joined errors are not config errors")
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe != a {
		t.Errorf("errors.As found %v", fe)
	}
}

func TestJoinOrder(t *testing.T) {
	in := []*FieldError{
		{Path: "c", Line: 9, Msg: "x"},
		{Path: "nowhere", Msg: "x"},
		{Path: "a", Line: 2, Msg: "x"},
		{Path: "b", Line: 9, Msg: "y"},
		{Path: "d", Line: 1, Msg: "x"},
	}
	err := Join(in)
	var got []string
	for _, fe := range err.(Errors) {
		got = append(got, fe.Path)
	}
	if want := "d a c b nowhere"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
	if in[0].Path != "c" {
		t.Error("Join reordered its argument")
	}
}

func TestCleanTypeError(t *testing.T) {
	tests := []struct{ in, want string }{
		{"toml: cannot decode TOML string into struct field main.T.Top of type int64", "expected an integer, got a string"},
		{"toml: cannot decode TOML integer into struct field struct { A string \"toml:\\\"a of type b\\\"\" }.A of type string", "expected a string, got an integer"},
		{"toml: cannot decode TOML inline table into struct field x.Y of type []string", "expected an array, got an inline table"},
		{"toml: cannot decode TOML integer into struct { X int }", "expected a table, got an integer"},
		{"toml: cannot decode TOML local date into struct field x.Y of type *string", "expected a string, got a local date"},
		{"toml: cannot decode TOML array into struct field x.Y of type map[string]int", "expected a table, got an array"},
		{"toml: cannot decode TOML string into struct field x.Y of type bool", "expected a boolean, got a string"},
		{"toml: cannot decode TOML string into struct field x.Y of type float64", "expected a float, got a string"},
		{"toml: cannot decode TOML string into struct field x.Y of type chan int", "expected a value of Go type chan int, got a string"},
		{"toml: key top is already defined", "key top is already defined"},
		{"cannot decode TOML string", "cannot decode TOML string"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := cleanTypeError(tt.in); got != tt.want {
				t.Errorf("cleanTypeError(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("top = 1\n[server]\nlisten = \"x\"\n")
	f.Add("a.b.c = 1\nt = {x = [1, {y = 2}]}\n[[items]]\nx = 1\n")
	f.Add("[skills.read_file]\ndirs = [\"/a\"]\nfuel = 3\n")
	f.Add("top = \"x\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		var d doc
		idx, err := Decode([]byte(src), &d)
		if err != nil {
			fieldErrors(t, err)
		}
		if idx == nil {
			t.Fatal("nil index")
		}
		for _, fe := range idxLines(idx) {
			if fe < 0 || fe > strings.Count(src, "\n")+1 {
				t.Fatalf("line %d outside the document", fe)
			}
		}
	})
}

func idxLines(x *Index) []int {
	var out []int
	for _, l := range x.lines {
		out = append(out, l)
	}
	return out
}
