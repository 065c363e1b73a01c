//go:build unix

package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuiltinsAtTheirSizeCaps: each built-in handles the largest input its
// default caps allow (10 MiB files, 5 MiB bodies) within its own fuel, memory
// and time budgets — with text that needs JSON escaping on every line.
func TestBuiltinsAtTheirSizeCaps(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	dir := filepath.Join(s.dir, "files")
	line := "a line with \"quotes\", a tab\tand <html> & unicode é\n"
	text := strings.Repeat(line, 10<<20/len(line)+1)[:10<<20] // exactly 10 MiB
	write(t, filepath.Join(dir, "big.txt"), text)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(text[:5<<20])) // exactly 5 MiB
	}))
	defer srv.Close()
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%q]
[skills.write_file]
allowed_directories = [%q]
[skills.fetch_url]
allowed_domains = [%q]
`, dir, dir, strings.TrimPrefix(srv.URL, "http://")))

	t.Run("read_file 10 MiB", func(t *testing.T) {
		r := s.run(t, "skill", "run", "read_file", "--config", cfg, "--input", `{"path":"big.txt"}`)
		var out struct{ Content string }
		if err := json.Unmarshal([]byte(r.ok(t)), &out); err != nil {
			t.Fatal(err)
		}
		if out.Content != text {
			t.Errorf("content differs: %d bytes, want %d", len(out.Content), len(text))
		}
	})
	t.Run("write_file 10 MiB", func(t *testing.T) {
		in, _ := json.Marshal(map[string]string{"path": "copy.txt", "content": text})
		input := write(t, filepath.Join(s.dir, "input.json"), string(in))
		r := s.run(t, "skill", "run", "write_file", "--yes", "--config", cfg, "--input", "@"+input)
		if got := r.ok(t); got != fmt.Sprintf(`{"bytes_written":%d}`, len(text)) {
			t.Errorf("output %q", got)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "copy.txt")); !bytes.Equal(b, []byte(text)) {
			t.Errorf("written file differs (%d bytes)", len(b))
		}
	})
	t.Run("fetch_url 5 MiB", func(t *testing.T) {
		r := s.run(t, "skill", "run", "fetch_url", "--yes", "--config", cfg, "--input", fmt.Sprintf(`{"url":%q}`, srv.URL+"/big"))
		var out struct {
			Status int
			Body   string
		}
		if err := json.Unmarshal([]byte(r.ok(t)), &out); err != nil {
			t.Fatal(err)
		}
		if out.Status != 200 || out.Body != text[:5<<20] {
			t.Errorf("status %d, body %d bytes", out.Status, len(out.Body))
		}
	})
}
