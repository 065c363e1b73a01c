package secrets_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/secrets"
)

const token = "ghp_R3alLooking&Token<42>/with+chars="

func redactor(t testing.TB) *secrets.Redactor {
	t.Helper()
	return secrets.NewRedactor(map[string][]byte{"github": []byte(token), "openai": []byte("sk-proj-abcdefgh12345678")})
}

// encodings are the forms an attacker would try first.
func encodings(v string) map[string]string {
	out := map[string]string{
		"raw":           v,
		"base64":        base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(v)),
		"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(v)),
		"hex":           hex.EncodeToString([]byte(v)),
		"HEX":           strings.ToUpper(hex.EncodeToString([]byte(v))),
		"query escaped": url.QueryEscape(v),
		"path escaped":  url.PathEscape(v),
		"go quoted":     strconv.Quote(v),
	}
	j, _ := json.Marshal(v)
	out["json"] = string(j)
	var pct strings.Builder
	for _, c := range []byte(v) {
		fmt.Fprintf(&pct, "%%%02X", c)
	}
	out["percent every byte"] = pct.String()
	for k := 1; k <= 2; k++ { // another alignment: the secret after k bytes
		out[fmt.Sprintf("base64 after %d bytes", k)] = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", k) + v))
		out[fmt.Sprintf("base64url after %d bytes", k)] = base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("x", k) + "Bearer " + v))
	}
	out["basic auth"] = base64.StdEncoding.EncodeToString([]byte("user:" + v))
	return out
}

func TestRedactorFindsEveryEncoding(t *testing.T) {
	r := redactor(t)
	for name, enc := range encodings(token) {
		t.Run(name, func(t *testing.T) {
			text := "before " + enc + " after"
			if got := r.Find([]byte(text)); len(got) != 1 || got[0] != "github" {
				t.Errorf("Find(%q) = %v, want [github]", text, got)
			}
			red := r.Redact(text)
			if !strings.Contains(red, "[secret:github]") || strings.Contains(red, enc) {
				t.Errorf("Redact(%q) = %q", text, red)
			}
			if !strings.HasPrefix(red, "before ") || !strings.HasSuffix(red, " after") {
				t.Errorf("Redact(%q) = %q: the text around is lost", text, red)
			}
		})
	}
}

func TestRedactorLeavesOtherTextAlone(t *testing.T) {
	r := redactor(t)
	for _, s := range []string{"", "short", "ghp_R3alLooking&Token<42>/with+chars", "hp_R3alLooking&Token<42>/with+chars=",
		strings.Repeat("a", 10000), "sk-proj-abcdefgh1234567", "SK-PROJ-ABCDEFGH12345678"} {
		if got := r.Redact(s); got != s {
			t.Errorf("Redact(%q) = %q", s, got)
		}
		if f := r.Find([]byte(s)); f != nil {
			t.Errorf("Find(%q) = %v", s, f)
		}
	}
	var nilR *secrets.Redactor
	if nilR.Redact(token) != token || nilR.Find([]byte(token)) != nil || !nilR.Empty() {
		t.Error("the nil Redactor must match nothing")
	}
}

func TestRedactorManyAndAdjacent(t *testing.T) {
	r := redactor(t)
	text := token + token + "sk-proj-abcdefgh12345678" + "|" + token
	want := "[secret:github][secret:github][secret:openai]|[secret:github]"
	if got := r.Redact(text); got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	if got := r.Find([]byte(text)); strings.Join(got, ",") != "github,openai" {
		t.Errorf("Find = %v", got)
	}
}

func TestRedactorShortValuesAreNotMatched(t *testing.T) {
	r := secrets.NewRedactor(map[string][]byte{"tiny": []byte("abc")})
	if !r.Empty() || r.Redact("abcabc") != "abcabc" {
		t.Error("a value under MinValueBytes must not be matched")
	}
}

// TestStreamAcrossPieces: a secret split over the pieces of one streamed
// answer is replaced, whatever the split.
func TestStreamAcrossPieces(t *testing.T) {
	r := redactor(t)
	text := "the key is " + token + ", and héllo wörld " + base64.StdEncoding.EncodeToString([]byte(token)) + " end"
	want := r.Redact(text)
	for size := 1; size <= len(text); size++ {
		s := r.Stream()
		var out strings.Builder
		for i := 0; i < len(text); i += size {
			out.WriteString(s.Write(text[i:min(i+size, len(text))]))
		}
		out.WriteString(s.Flush())
		if out.String() != want {
			t.Fatalf("pieces of %d bytes: %q, want %q", size, out.String(), want)
		}
	}
}

func TestStreamKeepsRunesWhole(t *testing.T) {
	r := redactor(t)
	s := r.Stream()
	var shown []string
	for _, p := range []string{strings.Repeat("é", 200), "ü", strings.Repeat("日本", 100)} {
		if out := s.Write(p); out != "" {
			shown = append(shown, out)
		}
	}
	shown = append(shown, s.Flush())
	for _, x := range shown {
		if !strings.HasPrefix(x, "é") && !strings.HasPrefix(x, "ü") && !strings.HasPrefix(x, "日") && !strings.HasPrefix(x, "本") {
			t.Errorf("a piece starts inside a rune: %q", x[:min(8, len(x))])
		}
	}
}

func TestWriterRedactsRecords(t *testing.T) {
	var buf bytes.Buffer
	w := redactor(t).Writer(&buf)
	n, err := fmt.Fprintf(w, "level=INFO msg=%q\n", "key "+token)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	if strings.Contains(buf.String(), "ghp_") || !strings.Contains(buf.String(), "[secret:github]") {
		t.Errorf("log line %q", buf.String())
	}
}

// FuzzRedact: whatever surrounds a secret, or whichever form it takes,
// redaction leaves none of it; a stream cut anywhere gives what the whole
// text gives.
func FuzzRedact(f *testing.F) {
	f.Add([]byte("hello"), []byte("world"), uint8(0), uint16(3))
	f.Add([]byte(token[:10]), []byte(token[5:]), uint8(3), uint16(1))
	f.Add([]byte{0xe6, 0x97}, []byte("\xa5本"), uint8(5), uint16(7))
	r := redactor(f)
	f.Fuzz(func(t *testing.T, before, after []byte, form uint8, split uint16) {
		encs := []string{token, base64.StdEncoding.EncodeToString([]byte(token)), hex.EncodeToString([]byte(token)),
			url.QueryEscape(token), base64.RawURLEncoding.EncodeToString([]byte("a" + token))}
		enc := encs[int(form)%len(encs)]
		text := string(before) + enc + string(after)
		red := r.Redact(text)
		if strings.Contains(red, token) {
			t.Fatalf("the secret survives in %q", red)
		}
		if !strings.Contains(red, "[secret:github]") {
			t.Fatalf("no marker in %q (from %q)", red, text)
		}
		// Redacting twice changes nothing more.
		if again := r.Redact(red); again != red {
			t.Fatalf("redacting again: %q → %q", red, again)
		}
		// A stream split at two points gives the same.
		a := int(split) % (len(text) + 1)
		b := a + (len(text)-a)/2
		s := r.Stream()
		got := s.Write(text[:a]) + s.Write(text[a:b]) + s.Write(text[b:]) + s.Flush()
		if got != red {
			t.Fatalf("stream split at %d, %d: %q, want %q", a, b, got, red)
		}
	})
}
