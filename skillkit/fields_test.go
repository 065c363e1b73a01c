package skillkit

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// fieldsInput has one field of each kind Fielder supports, tagged as its
// JSONFields list says.
type fieldsInput struct {
	S string   `json:"s"`
	P *string  `json:"p"`
	N int      `json:"n"`
	B bool     `json:"b"`
	L []string `json:"l"`
}

func (in *fieldsInput) JSONFields() []Field {
	return []Field{StringField("s", &in.S), StringPtrField("p", &in.P), IntField("n", &in.N), BoolField("b", &in.B),
		StringsField("l", &in.L)}
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
	if err := decodeFields(in, v.JSONFields()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if v.S != `a\b.txt` || v.P == nil || len(*v.P) != len(content) {
		t.Fatalf("decoded %q and %d bytes", v.S, len(*v.P))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("decoding allocated %d bytes, want far less than the %d-byte input", got, len(in))
	}
}

// fieldsCases are inputs for decodeFields; want is the value when it is
// accepted (nil: refused). Every case is also checked against encoding/json.
var fieldsCases = func() []struct {
	in   string
	want *fieldsInput
} {
	long := strings.Repeat("0123456789abcdef", 300)
	return []struct {
		in   string
		want *fieldsInput
	}{
		{`{}`, &fieldsInput{}},
		{" \t\r\n{ \n}\n ", &fieldsInput{}},
		{`{"s":"x","p":"y","n":-12,"b":true,"l":["a",null,"c"]}`, &fieldsInput{S: "x", P: ptr("y"), N: -12, B: true, L: []string{"a", "", "c"}}},
		{`{ "b" : false , "n" : 0 , "p" : "" , "s" : "" , "l" : [ ] }`, &fieldsInput{P: ptr(""), L: []string{}}},
		{`{"n":-0}`, &fieldsInput{}},
		{`{"n":123456789}`, &fieldsInput{N: 123456789}},
		{`{"s":null,"p":null,"n":null,"b":null,"l":null}`, &fieldsInput{}},
		{`{"s":"` + long + `"}`, &fieldsInput{S: long}},
		{`null`, &fieldsInput{}},
		// escapes and unicode
		{`{"s":"a\"b\\c\/d\be\ff\ng\rh\ti"}`, &fieldsInput{S: "a\"b\\c/d\be\ff\ng\rh\ti"}},
		{`{"s":"\u00e9\u20AC\u0000\ud83d\ude00"}`, &fieldsInput{S: "é€\x00😀"}},
		{`{"s":"é€😀 \ufffd ` + "\uFFFD" + `"}`, &fieldsInput{S: "é€😀 \uFFFD \uFFFD"}},
		{`{"s":"` + long + `\n` + long + `"}`, &fieldsInput{S: long + "\n" + long}},
		{`{"s":"<&>\u2028"}`, &fieldsInput{S: "<&>\u2028"}},
		{"{\"s\":\"a\x7f\"}", &fieldsInput{S: "a\x7f"}},
		// as encoding/json: lone surrogates and invalid UTF-8 become U+FFFD
		{`{"s":"\ud800"}`, &fieldsInput{S: "\uFFFD"}},
		{`{"s":"\udc00\ud800"}`, &fieldsInput{S: "\uFFFD\uFFFD"}},
		{`{"s":"\ud83dx"}`, &fieldsInput{S: "\uFFFDx"}},
		{`{"s":"\ud83d\u0041"}`, &fieldsInput{S: "\uFFFDA"}},
		{`{"s":"\ud83d\ud83d\ude00"}`, &fieldsInput{S: "\uFFFD😀"}},
		{"{\"s\":\"a\xff\"}", &fieldsInput{S: "a\uFFFD"}},
		{"{\"s\":\"\xed\xa0\x80\"}", &fieldsInput{S: "\uFFFD\uFFFD\uFFFD"}},
		{"{\"s\":\"\xe2\x82\"}", &fieldsInput{S: "\uFFFD\uFFFD"}},
		// keys as encoding/json matches them
		{`{"x":1,"y":{"a":[1,{"b":null}],"c":"}"},"s":"x"}`, &fieldsInput{S: "x"}}, // unknown keys
		{`{"S":"x"}`, &fieldsInput{S: "x"}},                                        // another case
		{`{"\u0073":"x"}`, &fieldsInput{S: "x"}},                                   // an escaped key
		{`{"s":"x","s":"y"}`, &fieldsInput{S: "y"}},                                // repeated: the last
		{`{"s":"x","s":null}`, &fieldsInput{S: "x"}},
		{`{"p":"x","p":null}`, &fieldsInput{}},
		{"{\"\u212a\":true}", &fieldsInput{}},        // the Kelvin sign folds to k: no field k
		{"{\"\u017f\":\"x\"}", &fieldsInput{S: "x"}}, // the long s folds to s
		// refused, by both
		{``, nil}, {` `, nil}, {`[]`, nil}, {`"s"`, nil}, {`1`, nil}, {`true`, nil}, {`{`, nil}, {`{"s"}`, nil},
		{`{"s":}`, nil}, {`{,}`, nil}, {`{"s":"x",}`, nil}, {`{"s":"x"}x`, nil}, {`{"s":"x"}}`, nil},
		{`{}{}`, nil}, {"\xef\xbb\xbf{}", nil}, {`{'s':"x"}`, nil},
		{`{"s":1}`, nil}, {`{"n":"1"}`, nil}, // wrong types
		{`{"b":1}`, nil}, {`{"b":tru}`, nil}, {`{"l":"a"}`, nil}, {`{"l":[1]}`, nil}, {`{"s":{}}`, nil},
		{`{"b":truex}`, nil}, {`{"b":nul}`, nil}, {`{"x":[1,]}`, nil}, {`{"x":[1 2]}`, nil},
		{`{"n":1.0}`, nil}, {`{"n":1e1}`, nil}, {`{"n":01}`, nil}, {`{"n":-}`, nil}, {`{"n":--1}`, nil},
		{`{"n":+1}`, nil}, {`{"n":9223372036854775808}`, nil}, {`{"n":1.}`, nil}, {`{"n":1e}`, nil},
		{`{"n":.5}`, nil}, {`{"x":1.5e+}`, nil},
		{`{"s":"\q"}`, nil}, {`{"s":"\u12"}`, nil}, {`{"s":"\u12g4"}`, nil}, {`{"s":"\`, nil},
		{"{\"s\":\"a\x01\"}", nil}, {"{\"s\":\"a\x1f\"}", nil},
		{`{"s":"unterminated`, nil},
		{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), nil}, // too deep
	}
}()

func TestDecodeFields(t *testing.T) {
	for _, tt := range fieldsCases {
		var got fieldsInput
		err := decodeFields([]byte(tt.in), got.JSONFields())
		if (err == nil) != (tt.want != nil) {
			t.Errorf("decodeFields(%q) = %v", trunc(tt.in), err)
			continue
		}
		var std fieldsInput
		stdErr := json.Unmarshal([]byte(tt.in), &std)
		if (err == nil) != (stdErr == nil) {
			t.Errorf("decodeFields(%q) = %v; encoding/json %v", trunc(tt.in), err, stdErr)
		}
		if err != nil {
			if got.S != "" || got.P != nil || got.N != 0 || got.B || got.L != nil {
				t.Errorf("decodeFields(%q) refused but wrote %+v", trunc(tt.in), got)
			}
			if KindOf(err) != KindInvalidInput || !strings.HasPrefix(err.Error(), "invalid_input: input is not valid JSON: ") {
				t.Errorf("decodeFields(%q): %v, want an invalid_input error", trunc(tt.in), err)
			}
			continue
		}
		if !reflect.DeepEqual(&got, tt.want) {
			t.Errorf("decodeFields(%q) = %+v, want %+v", trunc(tt.in), got, *tt.want)
		}
		if !reflect.DeepEqual(got, std) {
			t.Errorf("decodeFields(%q) = %+v; encoding/json: %+v", trunc(tt.in), got, std)
		}
	}
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestDecodeFieldsIntRange(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-7", "10", "2147483647", "-2147483648", "2147483648", "-2147483649", "999999999999999999", "-999999999999999999",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808"} {
		var n int
		var n64 int64
		var want int
		var want64 int64
		err := decodeFields([]byte(`{"n":`+s+`}`), []Field{IntField("n", &n)})
		stdErr := json.Unmarshal([]byte(s), &want)
		if (err == nil) != (stdErr == nil) || n != want {
			t.Errorf("int %s: decodeFields %v %d; encoding/json %v %d", s, err, n, stdErr, want)
		}
		err = decodeFields([]byte(`{"n":`+s+`}`), []Field{Int64Field("n", &n64)})
		stdErr = json.Unmarshal([]byte(s), &want64)
		if (err == nil) != (stdErr == nil) || n64 != want64 {
			t.Errorf("int64 %s: decodeFields %v %d; encoding/json %v %d", s, err, n64, stdErr, want64)
		}
	}
}

func TestDecodeFieldsKeepsValuesOnRefusal(t *testing.T) {
	in := fieldsInput{S: "before", N: 7}
	if err := decodeFields([]byte(`{"s":"after","n":"x"}`), in.JSONFields()); err == nil {
		t.Fatal("a string for an int accepted")
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
		{`{"a":null}`, true}, {`null`, true}, {"{\"a\":\"\xff\"}", true},
		{`{"a":1}`, false}, {`[]`, false}, {`{"a":"b"`, false},
	} {
		got, err := decodeStringMap([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("decodeStringMap(%q) = %v", tt.in, err)
			continue
		}
		var want map[string]string
		stdErr := json.Unmarshal([]byte(tt.in), &want)
		if (stdErr == nil) != tt.ok {
			t.Errorf("encoding/json of %q: %v", tt.in, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("decodeStringMap(%q) = %v; encoding/json: %v", tt.in, got, want)
		}
	}
}

// FuzzDecodeFields: decodeFields accepts exactly what encoding/json accepts
// into the same struct, with the same value.
func FuzzDecodeFields(f *testing.F) {
	for _, c := range fieldsCases {
		if len(c.in) < 1000 {
			f.Add([]byte(c.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, std fieldsInput
		err := decodeFields(data, got.JSONFields())
		stdErr := json.Unmarshal(data, &std)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("decodeFields(%q) = %v; encoding/json: %v", data, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, std) {
			t.Fatalf("decodeFields(%q) = %+v, encoding/json %+v", data, got, std)
		}
	})
}

// FuzzDecodeStringMap: the same for HTTPGet's headers.
func FuzzDecodeStringMap(f *testing.F) {
	for _, s := range []string{`{}`, `{"Content-Type":"text/html"}`, `{"a\n":"\u00e9","a\n":"x"}`, `{"a":null}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeStringMap(data)
		var std map[string]string
		stdErr := json.Unmarshal(data, &std)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("decodeStringMap(%q) = %v; encoding/json: %v", data, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, std) {
			t.Fatalf("decodeStringMap(%q) = %v, encoding/json %v", data, got, std)
		}
	})
}

// parseInt is strconv.ParseInt for JSON integers, at 32 bits (TinyGo's int
// on wasm) as at 64.
func TestParseInt(t *testing.T) {
	for _, bits := range []int{32, 64} {
		for _, s := range []string{"0", "-0", "1", "-1", "2147483647", "-2147483648", "2147483648", "-2147483649",
			"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
			"18446744073709551616", "99999999999999999999999", "1.5", "1e3", "-1.0"} {
			want, err := strconv.ParseInt(s, 10, bits)
			got, ok := parseInt(s, bits)
			if ok != (err == nil) || ok && got != want {
				t.Errorf("parseInt(%q, %d) = %d, %v; strconv: %d, %v", s, bits, got, ok, want, err)
			}
		}
	}
}

// TestDecodePlain: the inputs decodePlain takes are decoded as the general
// decoder decodes them; those it leaves, it leaves untouched; and the
// commonest input shapes are its.
func TestDecodePlain(t *testing.T) {
	for _, tt := range []struct {
		in   string
		take bool
	}{
		{`{"s":"notes/today.txt"}`, true},
		{` { "s" : "a" , "p" : "b" } `, true},
		{"{\n\t\"s\":\"a\",\r\n\"s\":\"b\"}", true}, // the last wins
		{`{}`, true},
		{`{"s":""}`, true},
		{`{"p":"x y ~ \u007f"}`, false}, // an escape
		{"{\"p\":\"x\x7f\"}", true},     // DEL is plain in JSON
		{`{"s":"é"}`, false},            // non-ASCII: the general way checks UTF-8
		{"{\"s\":\"a\tb\"}", false},     // a control character
		{`{"S":"a"}`, false},            // a key that matches by case only
		{`{"x":"a"}`, false},            // an unknown key
		{`{"n":"1"}`, false},            // a string for an int
		{`{"p":null}`, false},
		{`{"s":"a",}`, false},
		{`{"s":"a"} x`, false},
		{`{"s":"a"`, false},
		{`{"s" "a"}`, false},
		{`["s"]`, false},
		{`{"s":"a","p":"b","s":"c","p":"d","s":"e","p":"f","s":"g","p":"h"}`, true},
		{`{"s":"a","p":"b","s":"c","p":"d","s":"e","p":"f","s":"g","p":"h","s":"i"}`, false}, // over maxPlainPairs
		{`{"s":"` + strings.Repeat("x", maxPlainInput-8) + `"}`, true},
		{`{"s":"` + strings.Repeat("x", maxPlainInput) + `"}`, false}, // over maxPlainInput
	} {
		var plain, general fieldsInput
		plain.S, plain.N = "before", 7 // what a refusal must leave
		general.S, general.N = "before", 7
		took := decodePlain([]byte(tt.in), plain.JSONFields())
		if took != tt.take {
			t.Errorf("decodePlain(%q) took it: %v, want %v", trunc(tt.in), took, tt.take)
		}
		if !took {
			if plain.S != "before" || plain.P != nil || plain.N != 7 {
				t.Errorf("decodePlain(%q) left it but wrote %+v", trunc(tt.in), plain)
			}
			continue
		}
		if err := decodeGeneral([]byte(tt.in), general.JSONFields()); err != nil {
			t.Fatalf("decodePlain took %q, the general decoder refuses it: %v", trunc(tt.in), err)
		}
		if !reflect.DeepEqual(plain, general) {
			t.Errorf("decodePlain(%q) = %+v, the general decoder %+v", trunc(tt.in), plain, general)
		}
	}
}

// FuzzDecodePlain: whatever decodePlain takes, the general decoder decodes
// to the same values; whatever it leaves, it does not touch.
func FuzzDecodePlain(f *testing.F) {
	for _, s := range []string{`{"s":"a"}`, ` {"s" : "a" , "p":"b"}`, `{"s":"a\"}`, `{}`, `{"p":null}`, `{"S":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var plain, general fieldsInput
		plain.N, general.N = 7, 7
		if !decodePlain(data, plain.JSONFields()) {
			if plain.S != "" || plain.P != nil || plain.N != 7 {
				t.Fatalf("decodePlain(%q) left it but wrote %+v", data, plain)
			}
			return
		}
		if err := decodeGeneral(data, general.JSONFields()); err != nil {
			t.Fatalf("decodePlain took %q, the general decoder refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(plain, general) {
			t.Fatalf("decodePlain(%q) = %+v, the general decoder %+v", data, plain, general)
		}
	})
}
