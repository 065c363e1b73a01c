package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/buddy-run/buddy/hostfns/kv"
)

// Remember stores a memory in namespace and returns its id. Tags are searched
// along with the text. An empty text fails with errs.ErrInvalidInput; a text
// longer than Options.MaxMemoryBytes, too many or too long tags, or a write that
// would exceed the namespace's count or byte quota fail with a *QuotaError
// (errs.ErrTooLarge) and change nothing.
func (s *Store) Remember(ctx context.Context, namespace, text string, tags []string) (int64, error) {
	if err := validNamespace(namespace); err != nil {
		return 0, err
	}
	text, tags = s.redactString(text), s.redactList(tags)
	if strings.TrimSpace(text) == "" {
		return 0, invalid("namespace %q: empty memory text", namespace)
	}
	if !utf8.ValidString(text) {
		return 0, invalid("namespace %q: memory text is not valid UTF-8", namespace)
	}
	if err := checkQuota(namespace, QuotaMemoryBytes, int64(len(text)), int64(s.opts.MaxMemoryBytes)); err != nil {
		return 0, err
	}
	tagsJSON, err := encodeTags(namespace, tags)
	if err != nil {
		return 0, err
	}
	size := int64(len(text) + len(tagsJSON))

	var id int64
	op := fmt.Sprintf("remembering in namespace %q", namespace)
	err = s.write(ctx, op, func(tx *sql.Tx) error {
		var count, total int64
		err := tx.QueryRowContext(ctx, `SELECT memories, memory_bytes FROM namespace_usage WHERE namespace = ?`, namespace).Scan(&count, &total)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dbErr(ctx, op, err)
		}
		if err := checkQuota(namespace, QuotaMemories, count+1, int64(s.opts.MaxMemories)); err != nil {
			return err
		}
		if err := checkQuota(namespace, QuotaMemoryTotalBytes, total+size, s.opts.MaxMemoryTotalBytes); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO memories (namespace, text, tags, created_at) VALUES (?, ?, ?, ?)`,
			namespace, text, tagsJSON, unixNanos(s.now()))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Recall returns up to limit memories of namespace, the most relevant to query
// first (FTS5's bm25 over text and tags, tags weighing double). limit 0 means
// DefaultRecall; more than MaxRecall means MaxRecall. query is free text: it is
// split into words, which are OR-ed as quoted FTS5 strings, so no query can be an
// FTS5 syntax error or reach FTS5's operators. Common words ("the", "what") are
// dropped when there are others. A query without words (empty, only
// punctuation, or a single common word) returns the most recent memories.
func (s *Store) Recall(ctx context.Context, namespace, query string, limit int) ([]kv.Memory, error) {
	if err := validNamespace(namespace); err != nil {
		return nil, err
	}
	switch {
	case limit < 0:
		return nil, invalid("namespace %q: negative recall limit %d", namespace, limit)
	case limit == 0:
		limit = DefaultRecall
	case limit > MaxRecall:
		limit = MaxRecall
	}
	op := fmt.Sprintf("recalling from namespace %q", namespace)

	expr := matchExpr(query)
	if expr == "" {
		rows, err := s.reader.QueryContext(ctx, `SELECT id, text, tags, created_at FROM memories
			WHERE namespace = ? ORDER BY id DESC LIMIT ?`, namespace, limit)
		return collectMemories(ctx, op, rows, err)
	}

	// Two ways to rank only the namespace's memories; which is cheaper depends
	// on the namespace's share of all memories.
	var mine, all int64
	err := s.reader.QueryRowContext(ctx, `SELECT
			coalesce((SELECT memories FROM namespace_usage WHERE namespace = ?), 0),
			coalesce((SELECT sum(memories) FROM namespace_usage), 0)`, namespace).Scan(&mine, &all)
	if err != nil {
		return nil, dbErr(ctx, op, err)
	}
	if mine == 0 {
		return []kv.Memory{}, nil
	}
	if share := float64(mine) / float64(all); share >= majorityShare {
		mems, ok, err := s.recallGlobal(ctx, op, namespace, expr, limit, overfetch(limit, share))
		if err != nil || ok {
			return mems, err
		}
	}
	return s.recallInNamespace(ctx, op, namespace, expr, limit)
}

// majorityShare is the share of all memories above which a namespace is
// searched by ranking every memory and keeping the namespace's: filtering
// inside the index would cost more than it saves.
const majorityShare = 0.25

// overfetch is how many globally top-ranked memories to read so that about
// twice limit of them are expected to belong to a namespace holding share of
// all memories.
func overfetch(limit int, share float64) int {
	return min(int(2*float64(limit)/share)+limit, 1000)
}

// recallGlobal ranks the memories of every namespace, reads the top n and keeps
// those of namespace, in rank order. The namespace's own ranking is the global
// one restricted to it, so the result is exact when it has limit memories or
// when fewer than n memories matched at all; ok says so. Otherwise the caller
// must search inside the namespace.
func (s *Store) recallGlobal(ctx context.Context, op, namespace, expr string, limit, n int) (_ []kv.Memory, ok bool, _ error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?
		ORDER BY bm25(memories_fts, 1.0, 2.0, 0.0), rowid DESC LIMIT ?`, `{text tags} : (`+expr+`)`, n)
	if err != nil {
		return nil, false, dbErr(ctx, op, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, false, dbErr(ctx, op, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, dbErr(ctx, op, err)
	}
	if len(ids) == 0 {
		return []kv.Memory{}, true, nil
	}

	idList, err := json.Marshal(ids)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	rows, err = s.reader.QueryContext(ctx, `SELECT id, text, tags, created_at FROM memories
		WHERE id IN (SELECT value FROM json_each(?)) AND namespace = ?`, string(idList), namespace)
	found, err := collectMemories(ctx, op, rows, err)
	if err != nil {
		return nil, false, err
	}
	byID := make(map[int64]kv.Memory, len(found))
	for _, m := range found {
		byID[m.ID] = m
	}
	out := make([]kv.Memory, 0, min(limit, len(found)))
	for _, id := range ids {
		if m, ok := byID[id]; ok && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, len(out) == limit || len(ids) < n, nil
}

// recallInNamespace ranks only the namespace's memories: the namespace is a
// term of the MATCH (its ns_token, weighted 0 in bm25), and only the top ones
// are read from memories. The user's words search text and tags only. The outer
// namespace test is the exact one: the token is the namespace in hex, so it
// could only fail if the stemmer merged two tokens, which would cost results,
// never leak them. bm25 counts the documents of every term of the query, the
// namespace's included, which is why a large namespace goes through
// recallGlobal instead.
func (s *Store) recallInNamespace(ctx context.Context, op, namespace, expr string, limit int) ([]kv.Memory, error) {
	match := `ns_token : "` + nsToken(namespace) + `" AND {text tags} : (` + expr + `)`
	rows, err := s.reader.QueryContext(ctx, `SELECT m.id, m.text, m.tags, m.created_at
		FROM (
			SELECT rowid AS id, bm25(memories_fts, 1.0, 2.0, 0.0) AS score
			FROM memories_fts WHERE memories_fts MATCH ?
			ORDER BY score, rowid DESC LIMIT ?
		) AS f
		JOIN memories AS m ON m.id = f.id
		WHERE m.namespace = ?
		ORDER BY f.score, m.id DESC`, match, limit, namespace)
	return collectMemories(ctx, op, rows, err)
}

// collectMemories reads rows of (id, text, tags, created_at).
func collectMemories(ctx context.Context, op string, rows *sql.Rows, err error) ([]kv.Memory, error) {
	if err != nil {
		return nil, dbErr(ctx, op, err)
	}
	defer rows.Close()
	out := []kv.Memory{}
	for rows.Next() {
		var m kv.Memory
		var tags string
		var created int64
		if err := rows.Scan(&m.ID, &m.Text, &tags, &created); err != nil {
			return nil, dbErr(ctx, op, err)
		}
		if err := json.Unmarshal([]byte(tags), &m.Tags); err != nil {
			return nil, fmt.Errorf("%s: memory %d: decoding tags: %w", op, m.ID, err)
		}
		if m.Tags == nil {
			m.Tags = []string{}
		}
		m.CreatedAt = fromUnixNanos(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(ctx, op, err)
	}
	return out, nil
}

// Forget deletes memory id of namespace. It fails with errs.ErrNotFound if there
// is no such memory in that namespace.
func (s *Store) Forget(ctx context.Context, namespace string, id int64) error {
	if err := validNamespace(namespace); err != nil {
		return err
	}
	op := fmt.Sprintf("forgetting memory %d of namespace %q", id, namespace)
	return s.write(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ? AND namespace = ?`, id, namespace)
		return affectedOne(ctx, op, res, err, "memory %d in namespace %q", id, namespace)
	})
}

// encodeTags checks tags and returns them as the JSON array stored in the
// tags column (and indexed by FTS5).
func encodeTags(ns string, tags []string) (string, error) {
	if len(tags) > MaxTags {
		return "", checkQuota(ns, QuotaMemoryTags, int64(len(tags)), MaxTags)
	}
	for _, t := range tags {
		if strings.TrimSpace(t) == "" {
			return "", invalid("namespace %q: empty memory tag", ns)
		}
		if len(t) > MaxTagBytes {
			return "", checkQuota(ns, QuotaMemoryTags, int64(len(t)), MaxTagBytes)
		}
		if !utf8.ValidString(t) {
			return "", invalid("namespace %q: memory tag is not valid UTF-8", ns)
		}
	}
	if tags == nil {
		tags = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "<" as itself, not as a \u003c the tokenizer would index
	if err := enc.Encode(tags); err != nil {
		return "", fmt.Errorf("encoding tags: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Limits of a search expression built from a user's query.
const (
	maxQueryTerms = 16 // a 10 KB query searches its first 16 distinct words
	maxTermBytes  = 64
)

// stopWords are common English words dropped from a query that has other
// words. bm25 would rank them low anyway; dropping them keeps a question like
// "what did I say about the dentist" from scoring every memory.
var stopWords = map[string]bool{
	"a": true, "about": true, "an": true, "and": true, "are": true, "as": true, "at": true,
	"be": true, "by": true, "did": true, "do": true, "does": true, "for": true, "from": true,
	"had": true, "has": true, "have": true, "he": true, "her": true, "his": true, "how": true,
	"i": true, "in": true, "is": true, "it": true, "its": true, "me": true, "my": true,
	"of": true, "on": true, "or": true, "our": true, "she": true, "so": true, "that": true,
	"the": true, "their": true, "them": true, "there": true, "they": true, "this": true,
	"to": true, "was": true, "we": true, "were": true, "what": true, "when": true,
	"where": true, "which": true, "who": true, "why": true, "will": true, "with": true,
	"you": true, "your": true,
}

// queryWords splits a free-text query into lower-case words: runs of letters,
// digits and combining marks. Everything else, including every character
// FTS5's query syntax gives a meaning to, separates words.
func queryWords(query string) []string {
	words := strings.FieldsFunc(query, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r))
	})
	for i, w := range words {
		words[i] = truncateUTF8(strings.ToLower(w), maxTermBytes)
	}
	return words
}

// matchExpr builds the FTS5 expression for a free-text query. Its distinct
// words other than stop words become FTS5 strings ("..."), OR-ed; a query made
// only of stop words ("where is it?") is searched as one phrase instead,
// since each of its words is in nearly every memory, and a single stop word
// counts as no word at all. Inside a string FTS5 only
// interprets `"` (written `""`), so whatever the user typed, the expression is
// well formed and uses no operator of theirs. It is "" when the query has no
// words.
func matchExpr(query string) string {
	words := queryWords(query)
	var terms []string
	seen := make(map[string]bool)
	for _, w := range words {
		if stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
		if len(terms) == maxQueryTerms {
			break
		}
	}
	if len(terms) == 0 {
		if len(words) < 2 {
			return "" // one stop word says nothing: as for an empty query
		}
		if len(words) > maxQueryTerms {
			words = words[:maxQueryTerms]
		}
		return ftsString(strings.Join(words, " "))
	}
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString(ftsString(t))
	}
	return b.String()
}

// ftsString quotes s as an FTS5 string; "" for an empty s.
func ftsString(s string) string {
	if s == "" {
		return ""
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// nsToken is the FTS5 token of a namespace, as the ns_token column computes it.
func nsToken(ns string) string { return "ns" + hex.EncodeToString([]byte(ns)) }

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
