package skillmd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/testkit/cputime"
)

// makeSkills writes n SKILL.md skills of realistic size (a 600-character
// description, a page of Markdown; every tenth declares permissions).
func makeSkills(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	body := ""
	for i := 0; i < 40; i++ {
		body += "- Step with some guidance text for the model to follow carefully.\n"
	}
	desc := ""
	for len(desc) < 600 {
		desc += "Guides the assistant through a task in detail. "
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("skill-%04d", i)
		perms := ""
		if i%10 == 0 {
			perms = "permissions:\n  fs:\n    read: [\"$WORK_DIR/**/*.md\"]\n  network:\n    allow: [\"api.example.com:443\"]\n"
		}
		text := fmt.Sprintf("---\nname: %s\ndescription: %q\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n%s---\n# %s\n%s", name, desc, perms, name, body)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// BenchmarkLoad1000 loads 1,000 SKILL.md skills, as buddy does at start
// (docs/BENCHMARKS.md; target ≤ 100 ms).
func BenchmarkLoad1000(b *testing.B) {
	dir := makeSkills(b, 1000)
	st := NewStore(dir)
	cpu0, ok0 := cputime.Process()
	n := 0
	for b.Loop() {
		skills, problems := st.ListActive(b.Context())
		if len(skills) != 1000 || len(problems) != 0 {
			b.Fatalf("%d skills, %v", len(skills), problems)
		}
		n++
	}
	// CPU time (all threads) per load: what the load costs on an idle
	// machine, whatever else shares the cores while it is measured.
	if cpu1, ok1 := cputime.Process(); ok0 && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(n)/1e6, "cpu-ms/op")
	}
}

// TestLoad1000Budget keeps the start-up cost in sight: 1,000 skills load in
// well under a second even on a loaded CI machine (the 100 ms target is
// measured by BenchmarkLoad1000).
func TestLoad1000Budget(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := makeSkills(t, 1000)
	start := time.Now()
	skills, problems := NewStore(dir).ListActive(t.Context())
	took := time.Since(start)
	if len(skills) != 1000 || len(problems) != 0 {
		t.Fatalf("%d skills, %v", len(skills), problems)
	}
	limit := time.Second
	if raceEnabled {
		limit = 15 * time.Second // the race detector slows parsing about tenfold
	}
	if took > limit {
		t.Errorf("loading 1,000 skills took %s", took)
	}
}
