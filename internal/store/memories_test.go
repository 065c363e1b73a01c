package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns/kv"
	"github.com/buddy-run/buddy/internal/base/errs"
)

func remember(t *testing.T, s *Store, ns, text string, tags ...string) int64 {
	t.Helper()
	id, err := s.Remember(t.Context(), ns, text, tags)
	if err != nil {
		t.Fatalf("Remember(%q): %v", text, err)
	}
	return id
}

func texts(mems []kv.Memory) []string {
	var out []string
	for _, m := range mems {
		out = append(out, m.Text)
	}
	return out
}

func TestRememberRecall(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	created := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	s.now = func() time.Time { return created }
	corpus := []struct {
		text string
		tags []string
	}{
		{"the dentist appointment is on Tuesday at 3pm", []string{"health"}},
		{"buy milk, eggs and bread on the way home", []string{"shopping"}},
		{"Alice's birthday is on March 3rd; she likes orchids", []string{"people", "birthdays"}},
		{"the car needs new tyres before winter", nil},
		{"call the dentist again if the appointment moves; dentist phone 555-0100", []string{"health", "dentist"}},
		{"Zoë prefers café crème over espresso", []string{"people"}},
	}
	ids := map[string]int64{}
	for _, m := range corpus {
		ids[m.text] = remember(t, s, "notes", m.text, m.tags...)
	}

	tests := []struct {
		query   string
		first   string // the memory that must rank first ("" = no result)
		count   int    // -1: don't check
		contain []string
	}{
		{"dentist", corpus[4].text, 2, nil}, // "dentist" three times in text and tags beats once
		{"When is my DENTIST appointment?", "", 2, []string{corpus[0].text, corpus[4].text}},
		{"birthdays", corpus[2].text, 1, nil},      // tag only
		{"shopping list", corpus[1].text, 1, nil},  // tag match, "list" matches nothing
		{"tyre", corpus[3].text, 1, nil},           // porter stemming: tyre ~ tyres
		{"zoe cafe creme", corpus[5].text, 1, nil}, // diacritics folded
		{"ZOË", corpus[5].text, 1, nil},            // case folded
		{"giraffe", "", 0, nil},                    // no match
		{"orchids birthday alice", corpus[2].text, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			mems, err := s.Recall(ctx, "notes", tt.query, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.count >= 0 && len(mems) != tt.count {
				t.Errorf("%d results %q, want %d", len(mems), texts(mems), tt.count)
			}
			if tt.first != "" && (len(mems) == 0 || mems[0].Text != tt.first) {
				t.Errorf("results %q, want %q first", texts(mems), tt.first)
			}
			for _, c := range tt.contain {
				if !slices.Contains(texts(mems), c) {
					t.Errorf("results %q lack %q", texts(mems), c)
				}
			}
			for _, m := range mems {
				if m.ID != ids[m.Text] || !m.CreatedAt.Equal(created) || m.Tags == nil {
					t.Errorf("memory %+v: want id %d, created %v, non-nil tags", m, ids[m.Text], created)
				}
			}
		})
	}

	mems, err := s.Recall(ctx, "notes", "alice", 1)
	if err != nil || len(mems) != 1 || !slices.Equal(mems[0].Tags, []string{"people", "birthdays"}) {
		t.Errorf("tags roundtrip: %+v, %v", mems, err)
	}
}

func TestRecallRanking(t *testing.T) {
	s := openTest(t, Options{})
	// Many memories mention "project" once; one is all about the invoice.
	for i := range 30 {
		remember(t, s, "ns", fmt.Sprintf("note %d about the project schedule and the team", i))
	}
	strong := remember(t, s, "ns", "invoice invoice: the project invoice from Acme is overdue, pay the invoice")
	remember(t, s, "ns", "an invoice template lives in the shared drive among many other unrelated documents and folders")
	mems, err := s.Recall(t.Context(), "ns", "project invoice", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(mems) != 5 || mems[0].ID != strong {
		t.Errorf("Recall = %q; want 5 results, memory %d first", texts(mems), strong)
	}
}

func TestRecallHostileQueries(t *testing.T) {
	s := openTest(t, Options{})
	remember(t, s, "ns", `quote " star * near NEAR( and AND or OR not NOT minus -x col:val caret ^ plus + braces {} parens ()`, "tag:value")
	remember(t, s, "ns", "日本語のテキスト и кириллица")
	queries := []string{
		`"`, `""`, `"""`, `*`, `**`, `NEAR(`, `NEAR(a b, 2)`, `AND OR NOT`, `AND`, `OR`, `NOT`,
		`-x`, `- x`, `col:val`, `text:foo`, `tags:tag`, `{text tags}: x`, `^x`, `x*`, `"x"*`, `a + b`,
		`(`, `)`, `()`, `((((`, `\`, `'`, `''`, `;`, `--`, `/* */`, `'; DROP TABLE memories; --`,
		"\x00", "\xff\xfe", "a\x00b", "\u202e", "🙂", "日本語", "кириллица", "é", "e\u0301",
		strings.Repeat("x", 10<<10), strings.Repeat(`" NEAR( * `, 1000), strings.Repeat("word ", 2000),
		"", " ", "\t\n",
	}
	for _, q := range queries {
		name := q
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			if _, err := s.Recall(t.Context(), "ns", q, 0); err != nil {
				t.Errorf("Recall(%q): %v", q, err)
			}
		})
	}
	// Operators are searched as words, not obeyed.
	for _, q := range []string{"NEAR", "and", "col:val", "-x", "КИРИЛЛИЦА", "tag:value"} {
		if mems, err := s.Recall(t.Context(), "ns", q, 0); err != nil || len(mems) == 0 {
			t.Errorf("Recall(%q) = %d results, %v; want the memory that contains it", q, len(mems), err)
		}
	}
	if mems, _ := s.Recall(t.Context(), "ns", "日本語のテキスト", 0); len(mems) != 1 {
		t.Errorf("CJK query: %d results, want 1", len(mems))
	}
	// The table still exists after the injection attempt.
	if _, err := s.Recall(t.Context(), "ns", "quote", 0); err != nil {
		t.Error(err)
	}
}

func TestMatchExpr(t *testing.T) {
	tests := []struct{ query, want string }{
		{"", ""},
		{`" * ( ) : ^ + - {}`, ""},
		{"hello", `"hello"`},
		{"Hello, WORLD! hello", `"hello" OR "world"`},
		{`NEAR(a b) AND c`, `"near" OR "b" OR "c"`}, // "a" and "and" are stop words
		{"what is the time", `"time"`},
		{"what is the", `"what is the"`},                             // only stop words: a phrase
		{"Is it? Is it where it was?", `"is it is it where it was"`}, // in order, repeats kept
		{"the?", ``}, // one stop word: no words
		{"col:val", `"col" OR "val"`},
		{"café-crème", `"café" OR "crème"`},
		{strings.Repeat("abc ", 3) + "def", `"abc" OR "def"`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := matchExpr(tt.query); got != tt.want {
				t.Errorf("matchExpr(%q) = %q, want %q", tt.query, got, tt.want)
			}
		})
	}
	var many strings.Builder
	for i := range 100 {
		fmt.Fprintf(&many, "w%d ", i)
	}
	if n := strings.Count(matchExpr(many.String()), " OR ") + 1; n != maxQueryTerms {
		t.Errorf("a 100-word query gave %d terms, want %d", n, maxQueryTerms)
	}
	if got := matchExpr(strings.Repeat("é", 100)); len(got) > maxTermBytes+2 || !strings.HasSuffix(got, `é"`) {
		t.Errorf("long term not cut at a character boundary: %q", got)
	}
}

// FuzzRecall checks that no query makes Recall fail.
func FuzzRecall(f *testing.F) {
	for _, q := range []string{`"`, `NEAR(`, `a AND b OR NOT c`, `col:val`, `-x`, `x*`, "\xff", "日本"} {
		f.Add(q)
	}
	s := openTest(f, Options{})
	if _, err := s.Remember(f.Context(), "ns", "some text to search through", []string{"tag"}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := s.Recall(t.Context(), "ns", q, 0); err != nil {
			t.Errorf("Recall(%q): %v", q, err)
		}
	})
}

func TestRecallEmptyQueryIsRecent(t *testing.T) {
	s := openTest(t, Options{})
	var ids []int64
	for i := range 15 {
		ids = append(ids, remember(t, s, "ns", fmt.Sprint("memory number ", i)))
	}
	for _, q := range []string{"", "   ", "?!", `"*"`} {
		mems, err := s.Recall(t.Context(), "ns", q, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, m := range mems {
			got = append(got, m.ID)
		}
		want := slices.Clone(ids[5:])
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("Recall(%q) ids = %v, want the 10 most recent %v", q, got, want)
		}
	}
}

func TestRecallLimit(t *testing.T) {
	s := openTest(t, Options{})
	for i := range 120 {
		remember(t, s, "ns", fmt.Sprint("apple number ", i))
	}
	tests := []struct {
		query string
		limit int
		want  int
	}{
		{"apple", 0, DefaultRecall},
		{"apple", 1, 1},
		{"apple", 7, 7},
		{"apple", 100, 100},
		{"apple", 1000, MaxRecall},
		{"", 3, 3},
		{"", 1000, MaxRecall},
		{"number 5", 2, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q %d", tt.query, tt.limit), func(t *testing.T) {
			mems, err := s.Recall(t.Context(), "ns", tt.query, tt.limit)
			if err != nil || len(mems) != tt.want {
				t.Errorf("Recall = %d results, %v; want %d", len(mems), err, tt.want)
			}
		})
	}
	if _, err := s.Recall(t.Context(), "ns", "apple", -1); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("negative limit: %v, want ErrInvalidInput", err)
	}
}

func TestMemoriesNamespacesIsolated(t *testing.T) {
	s := openTest(t, Options{})
	a := remember(t, s, "alice", "secret recipe for lemon cake")
	b := remember(t, s, "bob", "secret plan for the lemon stand")
	for ns, want := range map[string]int64{"alice": a, "bob": b} {
		for _, q := range []string{"secret lemon", ""} {
			mems, err := s.Recall(t.Context(), ns, q, 0)
			if err != nil || len(mems) != 1 || mems[0].ID != want {
				t.Errorf("Recall(%s, %q) = %+v, %v; want only memory %d", ns, q, mems, err, want)
			}
		}
	}
	if err := s.Forget(t.Context(), "bob", a); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("bob forgetting alice's memory: %v, want ErrNotFound", err)
	}
	if mems, _ := s.Recall(t.Context(), "alice", "", 0); len(mems) != 1 {
		t.Errorf("alice's memory is gone after bob's Forget")
	}
	if mems, err := s.Recall(t.Context(), "carol", "secret", 0); err != nil || len(mems) != 0 {
		t.Errorf("carol recalls %+v, %v", mems, err)
	}
	// The namespace's index token is not searchable as a word.
	if mems, err := s.Recall(t.Context(), "bob", nsToken("alice")+" "+nsToken("bob"), 0); err != nil || len(mems) != 0 {
		t.Errorf("searching for the namespace tokens found %+v, %v", mems, err)
	}
}

func TestMemoriesSimilarNamespaces(t *testing.T) {
	s := openTest(t, Options{})
	namespaces := []string{"notes", "Notes", "notes-2", "notes 2", "note", "notesnotes", "日本", "n", "ns", `a\`}
	ids := map[string]int64{}
	for _, ns := range namespaces {
		ids[ns] = remember(t, s, ns, "shared words in every namespace, from "+ns)
	}
	for _, ns := range namespaces {
		for _, q := range []string{"shared words", ""} {
			mems, err := s.Recall(t.Context(), ns, q, 0)
			if err != nil || len(mems) != 1 || mems[0].ID != ids[ns] {
				t.Errorf("Recall(%q, %q) = %q, %v; want only its own memory", ns, q, texts(mems), err)
			}
		}
	}
	long := strings.Repeat("n", MaxNamespaceBytes)
	if _, err := s.Remember(t.Context(), long, "fits", nil); err != nil {
		t.Errorf("namespace of %d bytes: %v", MaxNamespaceBytes, err)
	}
	if mems, err := s.Recall(t.Context(), long, "fits", 0); err != nil || len(mems) != 1 {
		t.Errorf("Recall in the longest namespace: %d, %v", len(mems), err)
	}
	if _, err := s.Remember(t.Context(), long+"n", "too long", nil); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("namespace over %d bytes: %v, want ErrInvalidInput", MaxNamespaceBytes, err)
	}
}

func TestForget(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	keep := remember(t, s, "ns", "keep the umbrella by the door")
	gone := remember(t, s, "ns", "the umbrella is broken", "umbrella")
	if err := s.Forget(ctx, "ns", gone); err != nil {
		t.Fatal(err)
	}
	mems, err := s.Recall(ctx, "ns", "umbrella broken", 0)
	if err != nil || len(mems) != 1 || mems[0].ID != keep {
		t.Errorf("after Forget: %+v, %v; want only %d", mems, err, keep)
	}
	if err := s.Forget(ctx, "ns", gone); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second Forget: %v, want ErrNotFound", err)
	}
	// Ids are not reused.
	if again := remember(t, s, "ns", "new umbrella"); again <= gone {
		t.Errorf("new id %d reuses or precedes the forgotten %d", again, gone)
	}
	// The FTS index is consistent with the table after the delete.
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '"broken"'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the index still finds the forgotten memory: %d, %v", n, err)
	}
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("fts integrity-check: %v", err)
	}
}

func TestRememberValidation(t *testing.T) {
	s := openTest(t, Options{MaxMemoryBytes: 50})
	tests := []struct {
		name  string
		ns    string
		text  string
		tags  []string
		want  error
		quota Quota
	}{
		{"empty text", "ns", "", nil, errs.ErrInvalidInput, ""},
		{"blank text", "ns", " \n\t", nil, errs.ErrInvalidInput, ""},
		{"empty namespace", "", "text", nil, errs.ErrInvalidInput, ""},
		{"invalid utf-8", "ns", "bad \xff", nil, errs.ErrInvalidInput, ""},
		{"empty tag", "ns", "text", []string{"ok", ""}, errs.ErrInvalidInput, ""},
		{"text too long", "ns", strings.Repeat("x", 51), nil, errs.ErrTooLarge, QuotaMemoryBytes},
		{"too many tags", "ns", "text", make([]string, MaxTags+1), errs.ErrTooLarge, QuotaMemoryTags},
		{"tag too long", "ns", "text", []string{strings.Repeat("t", MaxTagBytes+1)}, errs.ErrTooLarge, QuotaMemoryTags},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Remember(t.Context(), tt.ns, tt.text, tt.tags)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Remember: %v, want %v", err, tt.want)
			}
			var qe *QuotaError
			if tt.quota != "" && (!errors.As(err, &qe) || qe.Quota != tt.quota) {
				t.Errorf("Remember: %v, want quota %s", err, tt.quota)
			}
			if mems, _ := s.Recall(t.Context(), "ns", "", 0); len(mems) != 0 {
				t.Errorf("a refused memory was stored: %+v", mems)
			}
		})
	}
	if _, err := s.Remember(t.Context(), "ns", strings.Repeat("x", 50), nil); err != nil {
		t.Errorf("text of exactly the limit: %v", err)
	}
}

func TestMemoryQuotas(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		fill  int    // memories stored first
		text  string // the one refused
		quota Quota
	}{
		{"count", Options{MaxMemories: 3}, 3, "one too many", QuotaMemories},
		// each fill memory is 10 bytes of text + 2 of "[]"
		{"total bytes", Options{MaxMemoryTotalBytes: 40}, 3, "12345", QuotaMemoryTotalBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t, tt.opts)
			for i := range tt.fill {
				remember(t, s, "ns", fmt.Sprintf("memory %03d", i))
			}
			_, err := s.Remember(t.Context(), "ns", tt.text, nil)
			var qe *QuotaError
			if !errors.Is(err, errs.ErrTooLarge) || !errors.As(err, &qe) || qe.Quota != tt.quota || qe.Namespace != "ns" {
				t.Fatalf("Remember: %v, want a %s quota error", err, tt.quota)
			}
			if !strings.Contains(err.Error(), string(tt.quota)) || !strings.Contains(err.Error(), `"ns"`) {
				t.Errorf("error %q does not name the quota and namespace", err)
			}
			if mems, _ := s.Recall(t.Context(), "ns", "", 100); len(mems) != tt.fill {
				t.Errorf("%d memories after the refused one, want %d", len(mems), tt.fill)
			}
			if _, err := s.Remember(t.Context(), "other", tt.text, nil); err != nil {
				t.Errorf("another namespace: %v", err)
			}
			// Forgetting frees the quota.
			if err := s.Forget(t.Context(), "ns", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Remember(t.Context(), "ns", tt.text, nil); err != nil {
				t.Errorf("after Forget: %v", err)
			}
		})
	}
}

// TestRecallStrategiesAgree checks that the two ways Recall ranks a namespace
// (globally then filtered, or filtered inside the index) give the same answer,
// and that a large namespace whose matches are crowded out by another
// namespace's falls back to the exact search.
func TestRecallStrategiesAgree(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	r := rand.New(rand.NewPCG(3, 4))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		ns := "big"
		if i%5 == 0 {
			ns = "small"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO memories (namespace, text, created_at) VALUES (?, ?, 0)`, ns, corpusSentence(r, z)); err != nil {
			t.Fatal(err)
		}
	}
	// "zebra" is all over the small namespace and in one memory of the big one.
	for range 50 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO memories (namespace, text, created_at) VALUES ('small', 'zebra zebra zebra', 0)`); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	lone := remember(t, s, "big", "a zebra crossing on a long road among many other words here")

	ids := func(mems []kv.Memory) []int64 {
		var out []int64
		for _, m := range mems {
			out = append(out, m.ID)
		}
		return out
	}
	mems, err := s.Recall(ctx, "big", "zebra", 1)
	if err != nil || len(mems) != 1 || mems[0].ID != lone {
		t.Errorf("Recall(big, zebra) = %v, %v; want [%d] (the fallback)", ids(mems), err, lone)
	}
	if _, ok, _ := s.recallGlobal(ctx, "test", "big", `"zebra"`, 1, overfetch(1, 0.8)); ok {
		t.Error("recallGlobal claimed an exact answer when all its top memories were another namespace's")
	}

	checked := 0
	for range 120 {
		words := make([]string, 1+r.IntN(3))
		for i := range words {
			words[i] = vocabulary[z.Uint64()]
		}
		q := strings.Join(words, " ")
		expr := matchExpr(q)
		if expr == "" {
			continue
		}
		for _, ns := range []string{"big", "small"} {
			limit := 1 + r.IntN(20)
			want, err := s.recallInNamespace(ctx, "test", ns, expr, limit)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Recall(ctx, ns, q, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), ids(want)) {
				t.Errorf("Recall(%s, %q, %d) = %v, want %v", ns, q, limit, ids(got), ids(want))
			}
			if g, ok, err := s.recallGlobal(ctx, "test", ns, expr, limit, overfetch(limit, 0.8)); err != nil {
				t.Fatal(err)
			} else if ok {
				checked++
				if !slices.Equal(ids(g), ids(want)) {
					t.Errorf("recallGlobal(%s, %q, %d) = %v, want %v", ns, q, limit, ids(g), ids(want))
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d exact global answers to compare", checked)
	}
}
