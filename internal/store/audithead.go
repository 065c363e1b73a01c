package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// The audit anchor. The hash chain alone says whether the rows agree with
// each other, not whether they are all the rows buddy wrote: a log cut short
// (with the AUTOINCREMENT counter rewritten), emptied, or with a well-formed
// row appended agrees with itself. So from schema v4 on:
//
//   - each row's hash is an HMAC-SHA256 under a key kept in a file beside the
//     database (<db>.audit-key, 0600, 32 random bytes as hex, created at first
//     use and refused when others may read or write it): SQL access to the
//     database alone cannot write a row that verifies;
//   - a head file beside the database (<db>.audit-head, 0600) records, under
//     the same key, the first keyed row (rows before it were chained without
//     a key, before the upgrade) and the last row's id and hash: a log that
//     ends before the head, or disagrees with it, was cut.
//
// The head is written after the commit that holds its rows, once per group
// commit (batch.go), in place: a fixed-size record rewritten at offset 0 of
// a file each Store keeps open (no fsync; no new file renamed over it,
// which ext4 flushes to disk like an fsync). Writers hold an exclusive
// advisory lock on the head file, readers a shared one, so a reader never
// sees half a record. After a crash of the machine the head may lag. It
// never runs ahead of its rows, so a reader that reads the head and then the
// rows sees the head's row; the rows may run past the head (a crash between
// the commit and the write, another process appending while VerifyAudit
// reads). A head is only moved forward, and only when the database holds
// the row it names with the hash it names: a log cut behind buddy's back is
// never re-anchored by the next append.
//
// Open anchors a log that has no head yet (a new database, or the upgrade
// that seals the rows written before v3), and never one that already holds
// keyed rows or was emptied: that head was removed, and VerifyAudit says so.

const (
	auditKeySuffix  = ".audit-key"
	auditHeadSuffix = ".audit-head"
	// auditAnchorSchema is the schema version from which the log is keyed
	// and anchored: a database with a head and an older version had its
	// version rewritten.
	auditAnchorSchema = 4
	auditKeyBytes     = 32
	// maxAnchorFile bounds what is read of the key and head files.
	maxAnchorFile = 4096
	// auditHeadTag is the first line of a head file, its format's version.
	auditHeadTag = "buddy-audit-head/1"
	// headRecordSize is the size of a head record, padded with newlines, so
	// that rewriting it in place never leaves the end of a longer one.
	headRecordSize = 256
	// auditKeyedCanon tags the keyed encoding of a row.
	auditKeyedCanon = "buddy-audit/2"
)

// auditHead is what the head file records.
type auditHead struct {
	From int64  // the first row chained with the key; rows before it were chained without one
	ID   int64  // the last row anchored (0: none)
	Hash string // its hash ("" when ID is 0)
}

// auditAnchor is a Store's audit key and its head file.
type auditAnchor struct {
	keyPath, headPath string
	key               []byte
	macs              sync.Pool // of hash.Hash: HMAC-SHA256 states under key
	mu                sync.Mutex
	head              *os.File // the head, open for writing; nil when there is none to keep
	err               error    // the last failure to write the head (reported by Close)
}

// openAuditAnchor loads the audit key (creating it at first use), anchors a
// log that has no head and no keyed row (see above), and opens the head.
func (s *Store) openAuditAnchor(ctx context.Context, real string) error {
	a := &auditAnchor{keyPath: real + auditKeySuffix, headPath: real + auditHeadSuffix}
	key, err := openAuditKey(a.keyPath)
	if err != nil {
		return err
	}
	a.key = key
	s.anchor = a
	_, err = os.Lstat(a.headPath)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.anchorAudit(ctx, a); err != nil {
			return err
		}
	}
	// A head that is there is kept whatever it holds (VerifyAudit judges
	// it); one that cannot be opened as a regular file is never written.
	if f, err := os.OpenFile(a.headPath, headOpenFlags, 0); err == nil {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			a.head = f
		} else {
			f.Close()
		}
	}
	return nil
}

// anchorAudit writes the first head of a log that has none: at the last row
// (rows from the next id on will be keyed), unless the log already holds a
// keyed row, or is empty while its counter says rows were written: its head
// was then removed, and is not made again.
func (s *Store) anchorAudit(ctx context.Context, a *auditAnchor) error {
	const op = "anchoring the audit log"
	var seq int64
	err := s.writer.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'audit'`).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return dbErr(ctx, op, err)
	}
	rows, err := query(ctx, s.writer, op, scanRecord, `SELECT `+auditColumns+` FROM audit ORDER BY id DESC LIMIT 1`)
	if err != nil {
		return err
	}
	if len(rows) == 0 && seq > 0 {
		return nil // an emptied log without its head: it was removed
	}
	h := auditHead{From: 1}
	if len(rows) == 1 {
		last := rows[0]
		if last.hash != "" && a.keyedOK(last) {
			return nil // keyed rows without their head: it was removed
		}
		h.ID, h.Hash, h.From = last.id, last.hash, max(seq, last.id)+1
	}
	if err := createHeadFile(a.headPath, a.encodeHead(h)); err != nil {
		return errs.Wrap(errs.ErrConfig, "writing the audit head "+a.headPath, err)
	}
	return nil
}

// close releases the head file.
func (a *auditAnchor) close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.err
	if a.head != nil {
		err = errors.Join(err, a.head.Close())
		a.head = nil
	}
	if err != nil {
		return fmt.Errorf("the audit head: %w", err)
	}
	return nil
}

// openAuditKey reads the audit key file at path, creating it at first use.
// A key file that is not a regular file, belongs to another user, or that
// group or others may read or write is refused with an errs.ErrConfig error
// naming the fix.
func openAuditKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, keyOpenFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createAuditKey(path); err != nil {
			return nil, errs.Wrap(errs.ErrConfig, "creating the audit key "+path, err)
		}
		f, err = os.OpenFile(path, keyOpenFlags, 0)
	}
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "opening the audit key "+path, err)
	}
	defer f.Close()
	return readAuditKey(path, f)
}

func readAuditKey(path string, f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "the audit key "+path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("the audit key %s is not a regular file (%s)", path, fi.Mode().Type()))
	}
	if err := checkKeyMode(path, fi); err != nil {
		return nil, err
	}
	data, err := osfile.ReadAllBounded(f, maxAnchorFile)
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "reading the audit key "+path, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != auditKeyBytes {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf(
			"the audit key %s does not hold %d hex digits: it was damaged, and the audit log written with it can no longer be verified (move the database and its .audit-key and .audit-head aside to start a new log)",
			path, 2*auditKeyBytes))
	}
	return key, nil
}

// createAuditKey writes a new random key to path (0600), durably; an
// existing file is left as it is.
func createAuditKey(path string) error {
	key := make([]byte, auditKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// syncDir makes a new directory entry durable, where the platform allows.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// rowHash is the keyed hash of a row as stored: HMAC-SHA256 over every
// column but id and hash, each length-prefixed (texts) or 8 bytes (integers),
// so that no two different rows encode alike. The id is not covered: ids
// must run 1, 2, 3, ... in chain order, which fixes each row's.
func (a *auditAnchor) rowHash(r auditRecord) string {
	b := make([]byte, 0, 256+len(r.detail))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	str(auditKeyedCanon)
	num(r.time)
	for _, s := range []string{r.kind, r.conversation, r.skill, r.version, r.moduleSHA256, r.argumentsHash, r.outcome, r.detail} {
		str(s)
	}
	for _, v := range []int64{r.asked, r.fuel, r.durationUS, r.bytesIn, r.bytesOut, r.bytesRead, r.bytesWritten} {
		num(v)
	}
	for _, s := range []string{r.paths, r.hosts, r.addresses, r.prevHash} {
		str(s)
	}
	if r.credentials != "" {
		// Schema v8's column, covered only when a row names a credential:
		// the rows written before it keep their hashes, and a row with one
		// cannot encode like a row without (its encoding is longer, and
		// every field before is length-prefixed).
		str(r.credentials)
	}
	return a.mac(b)
}

// mac is the hex HMAC-SHA256 of b under the key. Keyed states are reused:
// making one hashes the key twice.
func (a *auditAnchor) mac(b []byte) string {
	m, _ := a.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, a.key)
	}
	m.Write(b)
	var sum [sha256.Size]byte
	out := hex.EncodeToString(m.Sum(sum[:0]))
	m.Reset()
	a.macs.Put(m)
	return out
}

// keyedOK reports whether r's hash is its keyed hash.
func (a *auditAnchor) keyedOK(r auditRecord) bool {
	return hmac.Equal([]byte(a.rowHash(r)), []byte(r.hash))
}

func headBody(h auditHead) string {
	return fmt.Sprintf("%s\nfrom %d\nid %d\nhash %s\n", auditHeadTag, h.From, h.ID, h.Hash)
}

func (a *auditAnchor) headMAC(body string) string { return a.mac([]byte(body)) }

// encodeHead is a head record: four lines, then their MAC, padded with
// newlines to headRecordSize.
func (a *auditAnchor) encodeHead(h auditHead) []byte {
	body := headBody(h)
	rec := []byte(body + "mac " + a.headMAC(body) + "\n")
	for len(rec) < headRecordSize {
		rec = append(rec, '\n')
	}
	return rec
}

// errHeadMAC: a well-formed head whose MAC is not the key's.
var errHeadMAC = errors.New("its MAC does not match the audit key")

// decodeHead parses a head file's content and checks its MAC.
func (a *auditAnchor) decodeHead(data []byte) (auditHead, error) {
	var h auditHead
	lines := strings.Split(strings.TrimRight(string(data), "\n")+"\n", "\n")
	if len(lines) != 6 || lines[5] != "" || lines[0] != auditHeadTag {
		return h, errors.New("it is not in the format buddy writes")
	}
	field := func(line, name string) (string, bool) { return strings.CutPrefix(line, name+" ") }
	from, ok1 := field(lines[1], "from")
	id, ok2 := field(lines[2], "id")
	hash, ok3 := field(lines[3], "hash")
	mac, ok4 := field(lines[4], "mac")
	var err1, err2 error
	h.From, err1 = strconv.ParseInt(from, 10, 64)
	h.ID, err2 = strconv.ParseInt(id, 10, 64)
	h.Hash = hash
	body := strings.Join(lines[:4], "\n") + "\n"
	if !ok1 || !ok2 || !ok3 || !ok4 || err1 != nil || err2 != nil || body != headBody(h) || h.From < 1 || h.ID < 0 {
		return auditHead{}, errors.New("it is not in the format buddy writes")
	}
	if !hmac.Equal([]byte(mac), []byte(a.headMAC(body))) {
		return auditHead{}, errHeadMAC
	}
	return h, nil
}

// readHead reads and checks the head file, under a shared lock (a writer
// holds an exclusive one): fs.ErrNotExist when there is none.
func (a *auditAnchor) readHead() (auditHead, error) {
	f, err := os.OpenFile(a.headPath, headReadFlags, 0)
	if err != nil {
		return auditHead{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return auditHead{}, err
	}
	if !fi.Mode().IsRegular() {
		return auditHead{}, fmt.Errorf("it is not a regular file (%s)", fi.Mode().Type())
	}
	unlock := lockFile(f, false)
	data, err := osfile.ReadAllBounded(f, maxAnchorFile)
	unlock()
	if err != nil {
		return auditHead{}, err
	}
	return a.decodeHead(data)
}

// createHeadFile writes data to a new file beside path and links it there,
// unless path exists by then.
func createHeadFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*") // 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// auditTail is the last audit row a batch's transaction wrote, and the row
// its first audit write chained onto (the last row before the batch).
type auditTail struct {
	id   int64
	hash string
	base *auditTail
}

// advanceHead moves the head to the row t (just committed), if the head is
// behind it and the database holds the row the head names: the batch
// chained onto it, or it is there still. A head that is missing or does not
// verify is left as it is, for VerifyAudit to report, as is one that was
// replaced (the write goes to the file opened at Open); a failure to write
// is kept for Close (the head then lags, which VerifyAudit accepts).
func (s *Store) advanceHead(ctx context.Context, t auditTail) {
	a := s.anchor
	if a == nil || t.id == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.head
	if f == nil {
		return
	}
	unlock := lockFile(f, true)
	defer unlock()
	buf := make([]byte, headRecordSize+1) // more is not a record buddy wrote
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		a.err = err
		return
	}
	cur, err := a.decodeHead(buf[:n])
	if err != nil || cur.ID >= t.id {
		return
	}
	if b := t.base; cur.ID > 0 && (b == nil || b.id != cur.ID || b.hash != cur.Hash) {
		var hash string
		err := s.writeRow(ctx, sqlAuditHashAt, cur.ID).Scan(&hash)
		if err != nil || hash != cur.Hash {
			return // the log no longer extends its head: leave the evidence
		}
	}
	next := auditHead{From: cur.From, ID: t.id, Hash: t.hash}
	if _, err := f.WriteAt(a.encodeHead(next), 0); err != nil {
		a.err = err
		return
	}
	a.err = nil
}
