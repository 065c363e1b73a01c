package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/testkit/cputime"
)

// vocabulary is the word list of the benchmark corpus, most frequent first: the
// generator draws words with a Zipf distribution, so the first ones (mostly
// stop words) are in nearly every memory and the last ones in a few hundred.
var vocabulary = strings.Fields(`
the to and a of i is in for on my that it with at be have this you was are
about from will need by not we me do call after before remember next week
tomorrow today meeting email project team dentist appointment doctor mom dad
sister brother friend birthday party dinner lunch breakfast coffee tea grocery
milk eggs bread cheese butter apples bananas rice pasta chicken fish salad soup
cake wine beer water gym run walk swim yoga bike train bus car flight hotel
trip vacation holiday beach mountain city london paris berlin tokyo york office
home kitchen garden garage bedroom bathroom window door roof plumber electrician
landlord rent bill invoice tax bank loan budget salary bonus receipt refund
password wifi router laptop phone tablet printer monitor keyboard charger cable
backup server database deploy release bug ticket review budget deadline report
slides presentation client contract proposal invoice manager colleague intern
interview hiring onboarding training course book novel author chapter movie
series episode podcast music concert ticket guitar piano lesson school teacher
homework exam grade university library museum gallery theater park zoo
vet dog cat puppy kitten bird fish aquarium plant flower tree seeds fertilizer
lawn mower paint ladder hammer drill screws nails shelf desk chair sofa lamp
carpet curtain blanket pillow mattress laundry detergent soap shampoo toothpaste
medicine pharmacy prescription vitamins allergy insurance passport visa license
registration renewal subscription netflix spotify amazon order package delivery
courier address postcode neighbor weekend monday tuesday wednesday thursday
friday saturday sunday january february march april may june july august
september october november december morning afternoon evening night noon
midnight early late urgent important optional maybe later soon again always
never usually sometimes favourite allergic vegetarian recipe lasagna curry tacos
sushi pizza burger pancakes waffles smoothie oatmeal yogurt granola honey jam
anniversary wedding graduation funeral baby shower reunion picnic barbecue
camping hiking fishing skiing surfing sailing climbing tennis football chess
`)

// corpusSentence builds one memory of 6 to 20 words.
func corpusSentence(r *rand.Rand, z *rand.Zipf) string {
	n := 6 + r.IntN(15)
	words := make([]string, n)
	for i := range words {
		words[i] = vocabulary[z.Uint64()]
	}
	return strings.Join(words, " ")
}

// buildCorpus fills namespace "bench" with n memories in one transaction with a
// prepared statement (the triggers keep the index and the usage up to date),
// plus n/10 in another namespace so that the namespace filter has work to do.
func buildCorpus(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(42, 1))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))
	// A 64 MiB page cache for the build: the index's pages stay in memory.
	if _, err := s.writer.ExecContext(ctx, `PRAGMA cache_size = -65536`); err != nil {
		b.Fatal(err)
	}
	defer s.writer.ExecContext(ctx, `PRAGMA cache_size = -2000`)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO memories (namespace, text, tags, created_at) VALUES (?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixNano()
	for i := range n + n/10 {
		ns := "bench"
		if i%11 == 10 {
			ns = "other"
		}
		tags := fmt.Sprintf(`[%q]`, vocabulary[len(vocabulary)-1-r.IntN(100)])
		if _, err := stmt.ExecContext(ctx, ns, corpusSentence(r, z), tags, now+int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRecall measures Recall over 100,000 memories with queries of one to
// four words drawn from the corpus distribution, and reports the latency
// percentiles (target: p50 under 20 ms). p50-cpu-ms is the CPU time of the
// median query on its thread (Linux only): on a busy machine it is closer to
// what a query costs than the wall-clock figures.
func BenchmarkRecall(b *testing.B) {
	s := openTest(b, Options{})
	start := time.Now()
	buildCorpus(b, s, 100_000)
	corpus := time.Since(start)

	r := rand.New(rand.NewPCG(7, 7))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))
	ctx := context.Background()
	// Warm up: open the reader connections and load the index structure.
	for range readers {
		if _, err := s.Recall(ctx, "bench", "coffee", 10); err != nil {
			b.Fatal(err)
		}
	}
	runtime.LockOSThread() // for cputime.Thread
	defer runtime.UnlockOSThread()
	var lat, cpu []time.Duration
	empty := 0
	for b.Loop() {
		words := make([]string, 1+r.IntN(4))
		for i := range words {
			words[i] = vocabulary[z.Uint64()]
		}
		q := strings.Join(words, " ") + "?"
		c0, cpuOK := cputime.Thread()
		t0 := time.Now()
		mems, err := s.Recall(ctx, "bench", q, 10)
		lat = append(lat, time.Since(t0))
		if c1, ok := cputime.Thread(); ok && cpuOK {
			cpu = append(cpu, c1-c0)
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(mems) == 0 {
			empty++ // a phrase of stop words may match nothing
		}
	}
	if empty > len(lat)/10 {
		b.Errorf("%d of %d queries found nothing", empty, len(lat))
	}
	reportPercentiles(b, lat)
	if len(cpu) > 0 {
		slices.Sort(cpu)
		b.ReportMetric(float64(cpu[len(cpu)/2].Microseconds())/1000, "p50-cpu-ms")
	}
	b.ReportMetric(corpus.Seconds(), "corpus-build-s") // after b.Loop, which deletes earlier metrics
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkListSkills lists a registry of 500 installed skills.
func BenchmarkListSkills(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO installed_skills (`+skillColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		sk := testSkill(fmt.Sprintf("skill-%03d", i))
		sk.Manifest = strings.Repeat(sk.Manifest, 20) // ~1 KB, a realistic skill.toml
		if _, err := stmt.ExecContext(ctx, sk.Name, sk.Version, sk.Description, sk.Author, sk.WasmPath, sk.SHA256,
			sk.Manifest, sk.Capabilities, sk.Status, unixNanos(sk.InstalledAt), unixNanos(sk.UpdatedAt)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		list, err := s.ListSkills(ctx)
		if err != nil || len(list) != 500 {
			b.Fatalf("ListSkills: %d, %v", len(list), err)
		}
	}
}

// BenchmarkKVSet measures one durable KV write (a committed, fsynced
// transaction) of a 100-byte value over 1,000 keys.
func BenchmarkKVSet(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "buddy.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	value := []byte(strings.Repeat("v", 100))
	i := 0
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := s.KVSet(ctx, "bench", fmt.Sprint("key-", i%1000), value); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	reportPercentiles(b, lat)
}
