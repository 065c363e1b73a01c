package skillkit

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// fieldsInput has one field of each kind Fielder supports, tagged as its
// JSONFields list says.
type fieldsInput struct {
	S string  `json:"s"`
	P *string `json:"p"`
	N int     `json:"n"`
	B bool    `json:"b"`
}

func (in *fieldsInput) JSONFields() []Field {
	return []Field{StringField("s", &in.S), StringPtrField("p", &in.P), IntField("n", &in.N), BoolField("b", &in.B)}
}

func ptr(s string) *string { return &s }

// TestEscapedStringAllocatesItsLength: a string with an escape is unescaped
// into a buffer of its own length, not of the rest of the input (a 7-byte
// path before a 10 MiB content cost 10 MiB).
func TestEscapedStringAllocatesItsLength(t *testing.T) {
	content := strings.Repeat("x", 4<<20)
	in := []byte(`{"s":"a\\b.txt","p":"` + content + `"}`)
	var v fieldsInput
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if !decodeFields(in, v.JSONFields()) {
		t.Fatal("refused")
	}
	runtime.ReadMemStats(&after)
	if v.S != `a\b.txt` || v.P == nil || len(*v.P) != len(content) {
		t.Fatalf("decoded %q and %d bytes", v.S, len(*v.P))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("decoding allocated %d bytes, want far less than the %d-byte input", got, len(in))
	}
}

func TestDecodeFields(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 300)
	for _, tt := range []struct {
		in   string
		want *fieldsInput // nil: left to encoding/json
	}{
		{`{}`, &fieldsInput{}},
		{" \t\r\n{ \n}\n ", &fieldsInput{}},
		{`{"s":"x","p":"y","n":-12,"b":true}`, &fieldsInput{S: "x", P: ptr("y"), N: -12, B: true}},
		{`{ "b" : false , "n" : 0 , "p" : "" , "s" : "" }`, &fieldsInput{P: ptr("")}},
		{`{"n":-0}`, &fieldsInput{}},
		{`{"n":123456789}`, &fieldsInput{N: 123456789}},
		{`{"s":null,"p":null,"n":null,"b":null}`, &fieldsInput{}},
		{`{"s":"` + long + `"}`, &fieldsInput{S: long}},
		// escapes and unicode
		{`{"s":"a\"b\\c\/d\be\ff\ng\rh\ti"}`, &fieldsInput{S: "a\"b\\c/d\be\ff\ng\rh\ti"}},
		{`{"s":"\u00e9\u20AC\u0000\ud83d\ude00"}`, &fieldsInput{S: "é€\x00😀"}},
		{`{"s":"é€😀 \ufffd ` + "\uFFFD" + `"}`, &fieldsInput{S: "é€😀 \uFFFD \uFFFD"}},
		{`{"s":"` + long + `\n` + long + `"}`, &fieldsInput{S: long + "\n" + long}},
		{`{"s":"<&>\u2028"}`, &fieldsInput{S: "<&>\u2028"}},
		// left to encoding/json: it accepts some, refuses the rest
		{``, nil}, {` `, nil}, {`[]`, nil}, {`null`, nil}, {`"s"`, nil}, {`{`, nil}, {`{"s"}`, nil},
		{`{"s":}`, nil}, {`{,}`, nil}, {`{"s":"x",}`, nil}, {`{"s":"x"}x`, nil}, {`{"s":"x"}}`, nil},
		{`{}{}`, nil}, {"\xef\xbb\xbf{}", nil}, {`{'s':"x"}`, nil},
		{`{"x":1}`, nil},                     // unknown key
		{`{"S":"x"}`, nil},                   // another case
		{`{"\u0073":"x"}`, nil},              // an escaped key
		{`{"s":"x","s":"y"}`, nil},           // repeated
		{`{"s":1}`, nil}, {`{"n":"1"}`, nil}, // wrong types
		{`{"b":1}`, nil}, {`{"b":tru}`, nil}, //
		{`{"b":truex}`, nil}, {`{"b":nul}`, nil}, //
		{`{"n":1.0}`, nil}, {`{"n":1e1}`, nil}, {`{"n":01}`, nil}, {`{"n":-}`, nil}, {`{"n":--1}`, nil},
		{`{"n":+1}`, nil}, {`{"n":9223372036854775808}`, nil}, {`{"n":1234567890123456789}`, nil},
		{`{"s":"\q"}`, nil}, {`{"s":"\u12"}`, nil}, {`{"s":"\u12g4"}`, nil}, {`{"s":"\`, nil},
		{`{"s":"\ud800"}`, nil}, {`{"s":"\udc00\ud800"}`, nil}, {`{"s":"\ud83dx"}`, nil},
		{`{"s":"\ud83d\u0041"}`, nil}, {`{"s":"\ud83d\ud83d"}`, nil},
		{"{\"s\":\"a\x01\"}", nil}, {"{\"s\":\"a\xff\"}", nil}, {"{\"s\":\"\xed\xa0\x80\"}", nil},
		{"{\"s\":\"a\x7f\"}", &fieldsInput{S: "a\x7f"}},
		{`{"s":"unterminated`, nil},
	} {
		var got fieldsInput
		ok := decodeFields([]byte(tt.in), got.JSONFields())
		if ok != (tt.want != nil) {
			t.Errorf("decodeFields(%q) = %v", tt.in, ok)
			continue
		}
		if !ok {
			if got != (fieldsInput{}) {
				t.Errorf("decodeFields(%q) refused but wrote %+v", tt.in, got)
			}
			continue
		}
		if !reflect.DeepEqual(&got, tt.want) {
			t.Errorf("decodeFields(%q) = %+v, want %+v", tt.in, got, *tt.want)
		}
		var std fieldsInput
		if err := json.Unmarshal([]byte(tt.in), &std); err != nil || !reflect.DeepEqual(got, std) {
			t.Errorf("decodeFields(%q) = %+v; encoding/json: %+v, %v", tt.in, got, std, err)
		}
	}
}

func TestDecodeFieldsIntRange(t *testing.T) {
	var n int
	for _, s := range []string{"2147483647", "-2147483648", "999999999999999999", "-999999999999999999"} {
		var want int
		err := json.Unmarshal([]byte(s), &want)
		ok := decodeFields([]byte(`{"n":`+s+`}`), []Field{IntField("n", &n)})
		if ok && (err != nil || n != want) || !ok && err == nil && len(s) < 19 {
			t.Errorf("%s: decodeFields %v %d; encoding/json %v %d", s, ok, n, err, want)
		}
	}
}

func TestDecodeFieldsKeepsValuesOnRefusal(t *testing.T) {
	in := fieldsInput{S: "before", N: 7}
	if decodeFields([]byte(`{"s":"after","x":1}`), in.JSONFields()) {
		t.Fatal("unknown key accepted")
	}
	if in.S != "before" || in.N != 7 {
		t.Errorf("a refused input wrote %+v", in)
	}
}

func TestDecodeStringMap(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{}`, true}, {`{"Content-Type":"text/html","X":""}`, true}, {`{"a\u00e9":"b\n","a":"1","a":"2"}`, true},
		{`{"a":null}`, false}, {`{"a":1}`, false}, {`[]`, false}, {`{"a":"b"`, false},
	} {
		got, ok := decodeStringMap([]byte(tt.in))
		if ok != tt.ok {
			t.Errorf("decodeStringMap(%q) ok = %v", tt.in, ok)
			continue
		}
		if !ok {
			continue
		}
		var want map[string]string
		if err := json.Unmarshal([]byte(tt.in), &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeStringMap(%q) = %v; encoding/json: %v, %v", tt.in, got, want, err)
		}
	}
}

// FuzzDecodeFields: whatever decodeFields accepts, encoding/json accepts with
// the same value.
func FuzzDecodeFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"s":"x","p":"y","n":-12,"b":true}`, `{"s":"a\"b\\\u00e9\ud83d\ude00"}`,
		`{"n":0}`, `{"s":null}`, `{"s":"x","s":"y"}`, `{"S":"x"}`, " {\"b\" :false}\n", `{"n":1e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got fieldsInput
		if !decodeFields(data, got.JSONFields()) {
			return
		}
		var std fieldsInput
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("decodeFields accepted %q, encoding/json: %v", data, err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("decodeFields(%q) = %+v, encoding/json %+v", data, got, std)
		}
	})
}

// FuzzDecodeStringMap: the same for HTTPGet's headers.
func FuzzDecodeStringMap(f *testing.F) {
	for _, s := range []string{`{}`, `{"Content-Type":"text/html"}`, `{"a\n":"\u00e9","a\n":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeStringMap(data)
		if !ok {
			return
		}
		var std map[string]string
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("decodeStringMap accepted %q, encoding/json: %v", data, err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("decodeStringMap(%q) = %v, encoding/json %v", data, got, std)
		}
	})
}
