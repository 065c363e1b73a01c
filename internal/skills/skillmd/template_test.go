package skillmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// shortLimits sets the render deadline and work budget for one test.
func shortLimits(t *testing.T, timeout time.Duration, work int) {
	t.Helper()
	oldTimeout, oldWork := templateTimeout, templateWork
	templateTimeout, templateWork = timeout, work
	t.Cleanup(func() { templateTimeout, templateWork = oldTimeout, oldWork })
}

// decode returns v as a template call's parameters arrive: JSON, decoded.
func decode(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostileParams are the parameter families of the hostile templates, within
// MaxTemplateParams together: a list of 10^5 items, a map of 10^3 keys, two
// big strings that differ in their last byte, and data nested 60 deep.
func hostileParams(t testing.TB) map[string]any {
	t.Helper()
	a := make([]int, 100_000)
	m := make(map[string]int, 1000)
	for i := range 1000 {
		m[fmt.Sprintf("k%05d", i)] = i
	}
	big := strings.Repeat("<ab>\"&", 2000)
	var deep any = "leaf"
	for range 60 {
		deep = []any{"x", deep}
	}
	p := decode(t, map[string]any{"a": a, "m": m, "big": big, "big2": big[:len(big)-1] + "!", "deep": deep})
	if err := checkParams(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderOrHang renders, failing the test if the render has not stopped after
// a minute (a hang guard, far past any deadline a test sets).
func renderOrHang(t *testing.T, ctx context.Context, s *Skill, p map[string]any) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := RenderTemplate(ctx, s, p)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(time.Minute):
		t.Fatalf("%s: the render did not stop", s.Name)
		return "", nil
	}
}

// checkFreed checks that no render is left running: every slot is free at
// once, four fresh renders all succeed, and the goroutines are back to
// before (in a bounded wait, as the runtime winds down a test's own).
func checkFreed(t *testing.T, goroutines int) {
	t.Helper()
	for i := range cap(templateSlots) {
		select {
		case templateSlots <- struct{}{}:
		default:
			t.Fatalf("slot %d of %d is still held after the call returned", i+1, cap(templateSlots))
		}
	}
	for range cap(templateSlots) {
		<-templateSlots
	}
	var wg sync.WaitGroup
	errc := make(chan error, cap(templateSlots))
	for i := range cap(templateSlots) {
		wg.Go(func() {
			out, err := RenderTemplate(t.Context(), &Skill{Name: "fresh", Template: "{{.n}}"}, map[string]any{"n": float64(i)})
			if err == nil && out != fmt.Sprint(i) {
				err = fmt.Errorf("fresh render %d = %q", i, out)
			}
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("fresh render: %v", err)
		}
	}
	for i := 0; runtime.NumGoroutine() > goroutines; i++ {
		if i == 5000 {
			t.Fatalf("%d goroutines, %d before the render", runtime.NumGoroutine(), goroutines)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTemplateRenderStops: whatever the template and its parameters, a
// render stops at its deadline or when it reaches a cap, and the call returns
// only then, its slot free and no goroutine left behind.
func TestTemplateRenderStops(t *testing.T) {
	shortLimits(t, 250*time.Millisecond, MaxTemplateWork)
	p := hostileParams(t)
	wide := "{{$s := printf \"" + strings.Repeat("%1000000d", 20) + "\" 1}}"
	tests := []struct{ name, text string }{
		{"nested ranges writing nothing", `{{range .a}}{{range $.a}}{{end}}{{end}}`},
		{"nested ranges assigning", `{{$x := 0}}{{range .a}}{{range $.a}}{{$x = .}}{{end}}{{end}}`},
		{"nested ranges declaring", `{{range $i, $e := .a}}{{range $j, $f := $.a}}{{$y := $f}}{{end}}{{end}}`},
		{"continue", `{{range .a}}{{range $.a}}{{continue}}{{end}}{{end}}`},
		{"break never taken", `{{range .a}}{{range $.a}}{{if false}}{{break}}{{end}}{{end}}{{end}}`},
		{"break out of the inner range", `{{range .a}}{{range $.a}}{{break}}{{end}}{{range $.a}}{{end}}{{end}}`},
		{"else branches", `{{range .a}}{{range $.none}}{{else}}{{$e := 1}}{{end}}{{range $.a}}{{end}}{{end}}`},
		{"cheap built-ins", `{{range .a}}{{range $.a}}{{$l := len $.a}}{{$i := index $.a 0}}{{$s := slice $.a 1}}{{$n := not .}}{{$o := or . 1}}{{$c := and $.m $.big}}{{end}}{{end}}`},
		{"if and with over huge values", `{{range .a}}{{range $.a}}{{with $.m}}{{end}}{{if $.big}}{{end}}{{with $.a}}{{end}}{{end}}{{end}}`},
		{"map in map", `{{range $k, $v := .m}}{{range $k2, $v2 := $.m}}{{end}}{{end}}`},
		{"map sorted on every iteration", `{{range .a}}{{range $k, $v := $.m}}{{break}}{{end}}{{end}}`},
		{"deep data", `{{range .a}}{{range $.a}}{{$s := print $.deep}}{{end}}{{end}}`},
		{"deep data through dot", `{{range .a}}{{with $.deep}}{{range .}}{{$x := print .}}{{end}}{{end}}{{end}}`},
		{"printf width", `{{range .a}}{{$s := printf "%1000000d" 1}}{{end}}`},
		{"printf widths in one call", wide},
		{"printf width from an argument", `{{range .a}}{{$s := printf "%*d" 1000000 1}}{{end}}`},
		{"printf precision", `{{range .a}}{{$s := printf "%.1000000f" 1e308}}{{end}}`},
		{"printf width on every element", `{{range .a}}{{$s := printf "%1000v" $.a}}{{end}}`},
		{"printf hex of a big string", `{{range .a}}{{$s := printf "% x" $.big}}{{end}}`},
		{"printf reusing an argument", `{{range .a}}{{$s := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $.big}}{{end}}`},
		{"print", `{{range .a}}{{$s := print $.m $.big}}{{end}}`},
		{"println", `{{range .a}}{{$s := println $.a}}{{end}}`},
		{"html", `{{range .a}}{{$s := html $.big}}{{end}}`},
		{"js", `{{range .a}}{{$s := js $.m}}{{end}}`},
		{"urlquery", `{{range .a}}{{$s := urlquery $.big $.big}}{{end}}`},
		{"doubling a string", `{{$s := "xx"}}{{range .a}}{{$s = printf "%s%s" $s $s}}{{end}}`},
		{"eq on big strings", `{{range .a}}{{range $.a}}{{if eq $.big $.big2 $.big2 $.big2}}{{end}}{{end}}{{end}}`},
		{"ne on big strings", `{{range .a}}{{range $.a}}{{if ne $.big $.big2}}{{end}}{{end}}{{end}}`},
		{"lt on big strings", `{{range .a}}{{range $.a}}{{if lt $.big $.big2}}{{end}}{{end}}{{end}}`},
		{"ge in a pipeline", `{{range .a}}{{range $.a}}{{$.big | ge $.big2}}{{end}}{{end}}`},
		{"printing a big value", `{{range .a}}{{$.m}}{{end}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			s := &Skill{Name: "hostile", Type: TypeTemplate, Status: StatusActive, Template: tt.text}
			if err := s.Validate(); err != nil {
				t.Fatalf("the template is refused at load: %v", err)
			}
			_, err := renderOrHang(t, t.Context(), s, p)
			if !errors.Is(err, errs.ErrTimeout) && !errors.Is(err, errs.ErrTooLarge) {
				t.Fatalf("render = %v, want a timeout or too large", err)
			}
			checkFreed(t, goroutines)
		})
	}
}

// TestTemplateCanceled: a render stops when its caller goes away, long
// before its deadline.
func TestTemplateCanceled(t *testing.T) {
	shortLimits(t, time.Hour, MaxTemplateWork)
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop := time.AfterFunc(20*time.Millisecond, cancel)
	defer stop.Stop()
	s := &Skill{Name: "hostile", Template: `{{range .a}}{{range $.a}}{{end}}{{end}}`}
	if _, err := renderOrHang(t, ctx, s, hostileParams(t)); !errors.Is(err, errs.ErrCanceled) {
		t.Fatalf("render = %v, want canceled", err)
	}
	checkFreed(t, goroutines)
}

// TestTemplateWorkBudget: the work budget stops a render that stays within
// its deadline, before the allocation it would make.
func TestTemplateWorkBudget(t *testing.T) {
	shortLimits(t, time.Hour, 1<<20)
	tests := []struct {
		name, text string
		params     map[string]any
	}{
		{"printf width", `{{$s := printf "%2000000s" "x"}}`, nil},
		{"printf precision", `{{$s := printf "%.2000000f" 1.0}}`, nil},
		{"print of a big string", `{{$s := print .s .s .s .s .s .s}}`, map[string]any{"s": strings.Repeat("x", 200<<10)}},
		{"html grows", `{{$s := html .s}}`, map[string]any{"s": strings.Repeat("\"", 200<<10)}},
		{"doubling", `{{$s := "x"}}{{range .a}}{{$s = print $s $s}}{{end}}`, map[string]any{"a": make([]any, 64)}},
		{"eq", `{{range .a}}{{if eq $.s $.s}}{{end}}{{end}}`, map[string]any{"s": strings.Repeat("x", 100<<10), "a": make([]any, 11)}},
		{"sorting a map", `{{range .a}}{{range $.m}}{{end}}{{end}}`, map[string]any{"m": map[string]any{"a": 1.0, "b": 2.0}, "a": make([]any, 10_000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderOrHang(t, t.Context(), &Skill{Name: "work", Template: tt.text}, tt.params)
			if !errors.Is(err, errs.ErrTooLarge) || !strings.Contains(err.Error(), "would make, escape, compare or sort") {
				t.Fatalf("render = %v, want the work budget", err)
			}
		})
	}
}

// TestTemplateParams: parameters are JSON values, at most MaxTemplateParams
// bytes and maxParamDepth deep.
func TestTemplateParams(t *testing.T) {
	s := &Skill{Name: "p", Template: "{{len .a}}"}
	var deep any = "x"
	for range maxParamDepth + 1 {
		deep = []any{deep}
	}
	tests := []struct {
		name   string
		params map[string]any
		want   error
	}{
		{"a million items", decode(t, map[string]any{"a": make([]int, 1_000_000)}), errs.ErrTooLarge},
		{"a big string", map[string]any{"a": strings.Repeat("x", MaxTemplateParams)}, errs.ErrTooLarge},
		{"too deep", map[string]any{"a": deep}, errs.ErrInvalidInput},
		{"a channel", map[string]any{"a": make(chan int)}, errs.ErrInvalidInput},
		{"a function", map[string]any{"a": func() string { return "" }}, errs.ErrInvalidInput},
		{"a Go slice", map[string]any{"a": []string{"x"}}, errs.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := RenderTemplate(t.Context(), s, tt.params); !errors.Is(err, tt.want) {
				t.Errorf("render = %v, want %v", err, tt.want)
			}
		})
	}
	ok := decode(t, map[string]any{"a": make([]int, 60_000), "n": nil, "b": true, "s": "x", "m": map[string]any{"k": []any{1.5}}})
	if out, err := RenderTemplate(t.Context(), s, ok); err != nil || out != "60000" {
		t.Errorf("render = %q, %v", out, err)
	}
}

// TestTemplateOwnFunctions: a template cannot call the functions buddy
// inserts.
func TestTemplateOwnFunctions(t *testing.T) {
	for _, text := range []string{`{{_buddy_tick}}`, `{{if _buddy_sort .a}}{{end}}`, `{{with (print (_buddy_tick))}}{{end}}`, `{{range .a}}{{.x | _buddy_tick}}{{end}}`} {
		if _, err := parseTemplate("t", text, nil); err == nil || !strings.Contains(err.Error(), "not defined") {
			t.Errorf("%s: parse = %v, want not defined", text, err)
		}
	}
}

// TestTemplateMatchesTextTemplate: a render writes what text/template with its
// built-ins writes, and fails where it fails, with the same message; the
// comparisons, reimplemented to charge their work, most of all.
func TestTemplateMatchesTextTemplate(t *testing.T) {
	p := decode(t, map[string]any{
		"f": 1.0, "g": 2.5, "neg": -1.0, "s": "a", "t": "b", "e": "", "yes": true, "no": false, "null": nil,
		"a": []any{1.0, "x", nil, []any{2.0}}, "m": map[string]any{"k": 1.0, "j": "v", "n": nil}, "none": []any{},
		"text": "<a href=\"x\">&'=é\u2028\x01</a>",
	})
	operands := []string{".f", ".g", ".neg", "1", "-1", "1.0", "97", ".s", ".t", ".e", `"a"`, ".yes", "false", ".null",
		".missing", ".a", ".m", "(index .s 0)", "(len .a)", "1i", "'a'", "nil", "(index .a 2)", "(slice .a 1)"}
	var texts []string
	for _, x := range operands {
		for _, y := range operands {
			if x == "nil" && y == "nil" {
				continue
			}
			for _, f := range []string{"eq", "ne", "lt", "le", "gt", "ge"} {
				texts = append(texts, fmt.Sprintf("{{%s %s %s}}", f, x, y), fmt.Sprintf("{{%s | %s %s}}", y, f, x))
			}
			texts = append(texts, fmt.Sprintf("{{eq %s %s %s .f}}", x, y, y))
		}
	}
	texts = append(texts, "{{eq .f}}", "{{lt .f}}", "{{ne .f .f .f}}",
		`{{printf "%v|%5.2f|%-4s|%q|%x|% X|%#v|%+q|%08.3e|%[2]v %[1]v|%*d|%.*f|%d|%!|%z" .a .g .s .text .text .text .m .text .neg 3 7 2 .g .s}}`,
		`{{printf "%d %d" 1}}{{printf "%d" 1 2 "x"}}{{printf "%" 1}}{{printf "%5." 1}}{{printf "%[3]d" 1}}{{printf "%[x]d %[1" 1}}`,
		`{{printf "%*d|%-*d|%.*s" 1000001 1 -4 2 -1 "abc"}}`, `{{printf "%T %T %p" .a .m 1}}`,
		`{{print .a .m .f "x" 1 .null}}{{println .a .s}}{{print}}`,
		`{{html .text}}{{js .text}}{{urlquery .text}}{{html .a .m 1}}{{js}}{{.text | urlquery}}{{html .null}}`,
		`{{range $i, $e := .a}}{{$i}}={{$e}};{{else}}none{{end}}{{range .none}}x{{else}}empty{{end}}`,
		`{{range $k, $v := .m}}{{$k}}={{$v}};{{end}}{{range .m}}{{.}}{{end}}{{range .missing}}x{{else}}no{{end}}`,
		`{{range .a}}{{if eq . "x"}}{{continue}}{{end}}{{if not .}}{{break}}{{end}}[{{.}}]{{end}}`,
		`{{with .m}}{{.k}}{{else with .a}}a{{else}}none{{end}}{{with $x := .s}}{{$x}}{{end}}`,
		`{{range .a}}{{range $.a}}{{break}}{{end}}{{end}}{{range .f}}{{end}}`, `{{range .s}}{{end}}`,
		`{{range .a}}{{.x}}{{end}}`, `{{range .m.k.j}}{{end}}`, `{{range $.a}}{{range .}}{{.}}{{end}}{{end}}`,
		`{{range $i, $e := .}}{{$i}}{{end}}`, `{{if and .yes (or .no .s)}}{{len .a}}{{index .m "k"}}{{slice .s 0 1}}{{end}}`,
		`{{call .f}}`, `{{index .a 9}}`, `{{.a.b}}`, `{{not}}`)
	for _, text := range texts {
		plain, err := template.New("t").Option("missingkey=zero").Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		var want strings.Builder
		wantErr := plain.Execute(&want, p)
		got, err := RenderTemplate(t.Context(), &Skill{Name: "t", Template: text}, p)
		switch {
		case wantErr == nil && err != nil:
			t.Errorf("%s: %v, want %q", text, err, want.String())
		case wantErr == nil && got != want.String():
			t.Errorf("%s = %q, want %q", text, got, want.String())
		case wantErr != nil && (err == nil || !strings.HasSuffix(err.Error(), wantErr.Error())):
			t.Errorf("%s: %q, %v; want the error %v", text, got, err, wantErr)
		}
	}
}

// FuzzPrintfSize: what printf is charged bounds what fmt.Sprintf makes.
func FuzzPrintfSize(f *testing.F) {
	f.Add("%v|%5.2f|%-4s|%q|%x|% X|%#v|%+q|%08.3e|%[2]v %[1]v|%*d|%.*f|%d|%!|%z", int64(3), 1e308, "é\x01\"<", true)
	f.Add("%[3]*.[2]*[1]f", int64(-7), -0.5, "", false)
	f.Add("%9.9v %#U %c %b %o %T %p %", int64(-1<<63), 1e-300, "\u2028", true)
	f.Fuzz(func(t *testing.T, format string, n int64, x float64, s string, b bool) {
		if len(format) > 64 {
			return
		}
		n %= 2000 // a width or precision fmt allows, and a test can format
		args := []any{int(n), x, s, b, []any{x, s, nil, map[string]any{s: []any{b, n}}}, nil, uint8(n), complex(x, x)}
		for _, a := range [][]any{args, args[:1], args[2:4], nil} {
			if got, bound := len(fmt.Sprintf(format, a...)), printfSize(format, a, math.MaxInt); got > bound {
				t.Fatalf("Sprintf(%q, %#v) is %d bytes; charged %d", format, a, got, bound)
			}
			if got, bound := len(fmt.Sprint(a...)), sprintSize(a, math.MaxInt); got > bound {
				t.Fatalf("Sprint(%#v) is %d bytes; charged %d", a, got, bound)
			}
			for _, esc := range []struct {
				f    func(...any) string
				grow int
			}{{template.HTMLEscaper, 5}, {template.JSEscaper, 6}, {template.URLQueryEscaper, 3}} {
				if got, bound := len(esc.f(a...)), sprintSize(a, math.MaxInt)*esc.grow; got > bound {
					t.Fatalf("escaping %#v is %d bytes; charged %d", a, got, bound)
				}
			}
		}
	})
}
