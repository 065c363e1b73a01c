//go:build !tinygo.wasm && !wasm

package skillkit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fake installs a test host answering host calls with fn.
func fake(t *testing.T, input string, fn func(name string, args ...[]byte) []byte) *TestHost {
	t.Helper()
	h := &TestHost{Input: []byte(input), Call: fn}
	SetTestHost(h)
	t.Cleanup(func() { SetTestHost(nil) })
	return h
}

func TestDecodeStatuses(t *testing.T) {
	cases := []struct {
		block    []byte
		wantKind Kind
		wantOut  string
	}{
		{append([]byte{0}, "payload"...), "", "payload"},
		{append([]byte{1}, "no"...), KindForbidden, ""},
		{append([]byte{2}, "gone"...), KindNotFound, ""},
		{append([]byte{3}, "big"...), KindTooLarge, ""},
		{append([]byte{4}, "bad"...), KindInvalidInput, ""},
		{append([]byte{5}, "down"...), KindUnavailable, ""},
		{append([]byte{6}, "nope"...), KindDenied, ""},
		{append([]byte{7}, "slow"...), KindTimeout, ""},
		{append([]byte{8}, "bug"...), KindInternal, ""},
		{append([]byte{200}, "unknown status"...), KindInternal, ""},
		{nil, KindInternal, ""},
	}
	for _, c := range cases {
		out, err := decode("fn", c.block)
		if c.wantKind == "" {
			if err != nil || string(out) != c.wantOut {
				t.Errorf("decode(%q) = %q, %v", c.block, out, err)
			}
			continue
		}
		if KindOf(err) != c.wantKind {
			t.Errorf("decode(%q): kind %q, want %q (err %v)", c.block, KindOf(err), c.wantKind, err)
		}
	}
}

func TestErrorsMatchByKind(t *testing.T) {
	err := fmtErr()
	if !errors.Is(err, ErrForbidden) || errors.Is(err, ErrNotFound) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	if got := err.Error(); got != "forbidden: read \"../x\": no" {
		t.Errorf("Error() = %q: buddy reads the kind from this prefix", got)
	}
}

func fmtErr() error { return Errorf(KindForbidden, "read %q: no", "../x") }

func TestReadFileAndWriteFile(t *testing.T) {
	files := map[string][]byte{"a.txt": []byte("hello")}
	fake(t, "", func(name string, args ...[]byte) []byte {
		switch name {
		case "fs_read":
			if b, ok := files[string(args[0])]; ok {
				return Result("", b)
			}
			return Result(KindNotFound, []byte("no such file"))
		case "fs_write":
			files[string(args[0])] = args[1]
			return Result("", binary.LittleEndian.AppendUint64(nil, uint64(len(args[1]))))
		}
		return Result(KindInternal, nil)
	})
	b, err := ReadFile("a.txt")
	if err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile("b.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadFile(missing) = %v, want not found", err)
	}
	n, err := WriteFile("c.txt", []byte("xyz"))
	if err != nil || n != 3 || string(files["c.txt"]) != "xyz" {
		t.Fatalf("WriteFile = %d, %v", n, err)
	}
}

func TestHTTPGetParsesTheResult(t *testing.T) {
	hdr := []byte(`{"Content-Type":"text/plain"}`)
	payload := binary.LittleEndian.AppendUint16(nil, 201)
	payload = binary.LittleEndian.AppendUint32(payload, uint32(len(hdr)))
	payload = append(append(payload, hdr...), "body!"...)
	fake(t, "", func(name string, args ...[]byte) []byte {
		if name != "http_get" || string(args[0]) != "https://example.com/" {
			return Result(KindForbidden, []byte("not allowed"))
		}
		return Result("", payload)
	})
	r, err := HTTPGet("https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 201 || r.Headers["Content-Type"] != "text/plain" || string(r.Body) != "body!" {
		t.Errorf("response = %+v", r)
	}
	if _, err := HTTPGet("https://evil.test/"); !errors.Is(err, ErrForbidden) {
		t.Errorf("refused URL: %v", err)
	}
}

func TestHTTPGetRefusesMalformedResults(t *testing.T) {
	for _, payload := range [][]byte{{}, {1, 0, 0}, {200, 0, 10, 0, 0, 0, '{'}} {
		fake(t, "", func(string, ...[]byte) []byte { return Result("", payload) })
		if _, err := HTTPGet("https://x/"); !errors.Is(err, ErrInternal) {
			t.Errorf("payload %v: err %v, want internal", payload, err)
		}
	}
}

func TestMemories(t *testing.T) {
	fake(t, "", func(name string, args ...[]byte) []byte {
		switch name {
		case "memory_remember":
			var req struct {
				Text string   `json:"text"`
				Tags []string `json:"tags"`
			}
			if json.Unmarshal(args[0], &req) != nil || req.Text == "" {
				return Result(KindInvalidInput, []byte("bad request"))
			}
			return Result("", []byte(`{"id":42}`))
		case "memory_recall":
			return Result("", []byte(`{"memories":[{"id":42,"text":"dentist tuesday","tags":["health"],"created_at":"2026-11-22T10:00:00Z"}]}`))
		}
		return Result(KindInternal, nil)
	})
	id, err := Remember("dentist tuesday", []string{"health"})
	if err != nil || id != 42 {
		t.Fatalf("Remember = %d, %v", id, err)
	}
	ms, err := Recall("dentist", 5)
	if err != nil || len(ms) != 1 || ms[0].Text != "dentist tuesday" || ms[0].CreatedAt.Year() != 2026 {
		t.Fatalf("Recall = %+v, %v", ms, err)
	}
}

func TestHandle(t *testing.T) {
	type in struct {
		Name string `json:"name"`
	}
	run := func(input string) *TestHost {
		h := fake(t, input, nil)
		Handle(func(i in) (any, error) {
			if i.Name == "" {
				return nil, Errorf(KindInvalidInput, "name is required")
			}
			return map[string]string{"greeting": "hi " + i.Name}, nil
		})
		return h
	}
	if h := run(`{"name":"Ada"}`); string(h.Output) != `{"greeting":"hi Ada"}` || h.Error != "" {
		t.Errorf("ok: output %q error %q", h.Output, h.Error)
	}
	if h := run(`{}`); h.Error != "invalid_input: name is required" {
		t.Errorf("missing name: error %q", h.Error)
	}
	if h := run(`not json`); !strings.HasPrefix(h.Error, "invalid_input: input is not valid JSON") {
		t.Errorf("bad json: error %q", h.Error)
	}
	if h := run(``); h.Error != "invalid_input: name is required" {
		t.Errorf("empty input is {}: error %q", h.Error)
	}
}

func TestOutsideBuddyEverythingIsUnavailable(t *testing.T) {
	SetTestHost(nil)
	if _, err := ReadFile("x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ReadFile outside buddy = %v, want unavailable", err)
	}
}

// AppendJSONString agrees with encoding/json on every input.
func TestAppendJSONString(t *testing.T) {
	inputs := []string{"", "plain", `quo"te`, `back\slash`, "new\nline\r\t", "\x00\x01\x1f", "<a>&b",
		"é ü 中文 😀", "\u2028\u2029", "bad \xff utf8 \xc3", strings.Repeat("0123456789abcdef", 300)}
	for _, in := range inputs {
		want, _ := json.Marshal(in)
		if got := AppendJSONString(nil, in); string(got) != string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestObjectAndRawJSON(t *testing.T) {
	var o Object
	o.String("content", "hi \"you\"")
	o.Int("n", -3)
	o.Bool("ok", true)
	o.Raw("list", []byte(`[1,2]`))
	if got := string(o.JSON()); got != `{"content":"hi \"you\"","n":-3,"ok":true,"list":[1,2]}` {
		t.Errorf("object %s", got)
	}
	var empty Object
	if got := string(empty.JSON()); got != "{}" {
		t.Errorf("empty object %s", got)
	}
	h := fake(t, `{}`, nil)
	Handle(func(struct{}) (any, error) { return RawJSON(`{"raw":true}`), nil })
	if string(h.Output) != `{"raw":true}` {
		t.Errorf("RawJSON output %q", h.Output)
	}
}

func TestHandleDecodesFieldersAsEncodingJSONDoes(t *testing.T) {
	for _, in := range []string{``, `{"s":"x","n":3}`, `{"S":"case","b":true}`, `{"s":1}`, `{"s":"a","s":null}`, `[`} {
		h := fake(t, in, nil)
		var got fieldsInput
		code := Handle(func(v fieldsInput) (any, error) { got = v; return RawJSON(`{}`), nil })
		var std fieldsInput // encoding/json ignores JSONFields
		src := in
		if src == "" {
			src = "{}"
		}
		stdErr := json.Unmarshal([]byte(src), &std)
		if (code != 0) != (stdErr != nil) {
			t.Errorf("Handle(%q) = %d (%q), encoding/json %v", in, code, h.Error, stdErr)
			continue
		}
		if stdErr != nil {
			if want := "invalid_input: input is not valid JSON: " + stdErr.Error(); h.Error != want {
				t.Errorf("Handle(%q) error %q, want %q", in, h.Error, want)
			}
			continue
		}
		if !reflect.DeepEqual(got, std) {
			t.Errorf("Handle(%q) decoded %+v, encoding/json %+v", in, got, std)
		}
	}
}

func TestHTTPRequest(t *testing.T) {
	payload := binary.LittleEndian.AppendUint16(nil, 201)
	payload = binary.LittleEndian.AppendUint32(payload, 2)
	payload = append(append(payload, "{}"...), "created"...)
	var gotReq, gotBody []byte
	fake(t, "", func(name string, args ...[]byte) []byte {
		if name != "http_request" || len(args) != 2 {
			return Result(KindInternal, []byte("wrong call"))
		}
		gotReq, gotBody = args[0], args[1]
		return Result("", payload)
	})
	r, err := HTTPRequest(Request{Method: "POST", URL: "https://api.example.com/x", Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 201 || string(r.Body) != "created" {
		t.Errorf("response %+v", r)
	}
	if string(gotReq) != `{"method":"POST","url":"https://api.example.com/x","headers":{"Content-Type":"application/json"}}` || string(gotBody) != `{"a":1}` {
		t.Errorf("sent %s + %s", gotReq, gotBody)
	}
	fake(t, "", func(string, ...[]byte) []byte {
		return Result(KindForbidden, []byte(`the request carries the secret "github", which is not granted for evil.test`))
	})
	if _, err := HTTPRequest(Request{URL: "https://evil.test/"}); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "github") {
		t.Errorf("refused: %v", err)
	}
}
