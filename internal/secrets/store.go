package secrets

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// File names in the data directory.
const (
	StoreFile = "secrets.enc" // the encrypted store
	KeyFile   = "secrets.key" // its key: 64 hex digits, mode 0600
	lockFile  = "secrets.lock"
)

// Limits.
const (
	// MaxValueBytes caps one secret's value.
	MaxValueBytes = 16 << 10
	// MaxSecrets caps how many the store holds.
	MaxSecrets = 256
	// maxStoreBytes caps the store file read.
	maxStoreBytes = 8 << 20
)

// magic starts the store file and is its AES-GCM additional data.
const magic = "buddy-secrets/1\n"

// Entry is what List shows of a secret: never its value.
type Entry struct {
	Name  string    `json:"name"`
	SetAt time.Time `json:"set_at"`
}

// Store is the secret store of one data directory. It is safe for
// concurrent use, and sees changes made by another process (buddy secret
// set while buddy serve runs) at the next Secret or Redactor.
type Store struct {
	dir, path, keyPath, lockPath string

	fp *fingerprinter

	mu    sync.Mutex
	seen  fs.FileInfo // the store file when stored was fingerprinted; nil = none
	names []string    // the store's names then
	// stored and extra are fingerprints: of the store's values, and of
	// values Also was told of (a provider key from the environment).
	stored, extra []pattern
	red           *Redactor
	err           error // why the last reload failed, if it did
}

// record is a secret as the store file holds it.
type record struct {
	Name  string    `json:"name"`
	Value []byte    `json:"value"`
	SetAt time.Time `json:"set_at"`
}

type contents struct {
	Secrets []record `json:"secrets"`
}

// clear zeroes every value.
func (c *contents) clear() {
	for i := range c.Secrets {
		clear(c.Secrets[i].Value)
	}
}

// Open opens the store of the data directory dir (which the caller has
// checked is private: config.DataDir). Nothing is created until the first
// Set. A key or store file that others may read or write, or that another
// user owns, is refused (errs.ErrConfig) with the command that fixes it; a
// store that exists without its key, or that does not decrypt with it, is
// an errs.ErrConfig error naming both files.
func Open(dir string) (*Store, error) {
	s := &Store{
		dir: dir, path: filepath.Join(dir, StoreFile), keyPath: filepath.Join(dir, KeyFile),
		lockPath: filepath.Join(dir, lockFile), fp: newFingerprinter(),
	}
	s.red = build(s.fp, nil)
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the data directory the store lives in.
func (s *Store) Dir() string { return s.dir }

// Path is the store file.
func (s *Store) Path() string { return s.path }

// Files are the store's files, existing or not: the store, its key and its
// lock. Whoever reads the first two has every secret; no skill may touch
// them (hostfns.Deps.PrivateFiles).
func (s *Store) Files() []string { return []string{s.path, s.keyPath, s.lockPath} }

// Set stores value under name, replacing any value it had. A value must be
// MinValueBytes to MaxValueBytes of text without control characters (it is
// sent in HTTP headers and URLs); the first Set creates the key file.
func (s *Store) Set(ctx context.Context, name string, value []byte) error {
	if !ValidName(name) {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("secret name %q must be %s", name, NameRule))
	}
	if err := CheckValue(value); err != nil {
		return err
	}
	return s.update(ctx, func(c *contents) error {
		now := time.Now().UTC().Truncate(time.Second)
		for i := range c.Secrets {
			if c.Secrets[i].Name == name {
				clear(c.Secrets[i].Value)
				c.Secrets[i].Value, c.Secrets[i].SetAt = slices.Clone(value), now
				return nil
			}
		}
		if len(c.Secrets) >= MaxSecrets {
			return errs.New(errs.ErrTooLarge, fmt.Sprintf("the secret store holds %d secrets, its limit", MaxSecrets))
		}
		c.Secrets = append(c.Secrets, record{Name: name, Value: slices.Clone(value), SetAt: now})
		slices.SortFunc(c.Secrets, func(a, b record) int {
			if a.Name < b.Name {
				return -1
			}
			if a.Name > b.Name {
				return 1
			}
			return 0
		})
		return nil
	})
}

// CheckValue checks a secret's value: MinValueBytes to MaxValueBytes of
// UTF-8 text with no control characters.
func CheckValue(v []byte) error {
	switch {
	case len(v) < MinValueBytes:
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("a secret of %d bytes is too short to be told apart from ordinary text: at least %d", len(v), MinValueBytes))
	case len(v) > MaxValueBytes:
		return errs.New(errs.ErrTooLarge, fmt.Sprintf("a secret of %d bytes is over the %d-byte cap", len(v), MaxValueBytes))
	case !utf8.Valid(v):
		return errs.New(errs.ErrInvalidInput, "a secret must be UTF-8 text")
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("a secret may not contain control characters (byte 0x%02x): it is sent in HTTP headers and URLs", c))
		}
	}
	return nil
}

// Remove deletes a secret (errs.ErrNotFound when there is none).
func (s *Store) Remove(ctx context.Context, name string) error {
	return s.update(ctx, func(c *contents) error {
		i := slices.IndexFunc(c.Secrets, func(r record) bool { return r.Name == name })
		if i < 0 {
			return errs.New(errs.ErrNotFound, fmt.Sprintf("no secret %q in the store", name))
		}
		clear(c.Secrets[i].Value)
		c.Secrets = slices.Delete(c.Secrets, i, i+1)
		return nil
	})
}

// List returns the names in the store and when each was set, sorted by
// name. It never returns a value.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	c, err := s.read()
	if err != nil {
		return nil, err
	}
	defer c.clear()
	out := make([]Entry, 0, len(c.Secrets))
	for _, r := range c.Secrets {
		out = append(out, Entry{Name: r.Name, SetAt: r.SetAt})
	}
	return out, nil
}

// Secret returns the value of name, decrypted now from the store file, for
// one request: the caller clears it when the request is sent. A name the
// store does not hold is errs.ErrNotFound, naming the command that sets it.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.read()
	if err != nil {
		return nil, err
	}
	defer c.clear()
	for _, r := range c.Secrets {
		if r.Name == name {
			return slices.Clone(r.Value), nil
		}
	}
	return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("the secret %q is not in the secret store: set it with buddy secret set %s", name, name))
}

// Has reports whether the store holds name, without decrypting anything
// (from the names seen at the last reload).
func (s *Store) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.names, name)
}

// Also makes the store's redactor match value under name too, without
// storing it: a provider key read from the environment (api_key_env). Only
// its fingerprints are kept. A value under MinValueBytes is not matched.
func (s *Store) Also(name string, value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extra = append(s.extra, s.fp.patterns(name, value)...)
	s.red = build(s.fp, slices.Concat(s.stored, s.extra))
}

// Redactor returns the redactor of the secrets the store holds now (and
// those Also was told of). It looks at the store file (one stat) and
// fingerprints it again if it changed; if that fails (the file was made
// unreadable meanwhile), the last redactor is kept and Secret reports the
// problem.
func (s *Store) Redactor() *Redactor {
	if s == nil {
		return nil
	}
	_ = s.reload()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.red
}

// Redact replaces every secret in text with "[secret:NAME]".
func (s *Store) Redact(text string) string { return s.Redactor().Redact(text) }

// RedactBytes replaces every secret in b with "[secret:NAME]" (b itself
// when there is none).
func (s *Store) RedactBytes(b []byte) []byte { return s.Redactor().RedactBytes(b) }

// Writer returns w redacted on every Write with the secrets the store holds
// at that moment: for log handlers, which write one record per Write.
func (s *Store) Writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if _, err := w.Write(s.RedactBytes(p)); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

// reload fingerprints the store again when its file changed since the last
// time (or appeared, or went away).
func (s *Store) reload() error {
	fi, err := os.Lstat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		fi, err = nil, nil
	}
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "secret store "+s.path, err)
	}
	s.mu.Lock()
	same := (fi == nil && s.seen == nil) ||
		(fi != nil && s.seen != nil && os.SameFile(fi, s.seen) && fi.Size() == s.seen.Size() && fi.ModTime().Equal(s.seen.ModTime()))
	s.mu.Unlock()
	if same {
		return nil
	}
	c, err := s.read()
	if err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		return err
	}
	defer c.clear()
	var pats []pattern
	var names []string
	for _, r := range c.Secrets {
		pats = append(pats, s.fp.patterns(r.Name, r.Value)...)
		names = append(names, r.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen, s.stored, s.names, s.err = fi, pats, names, nil
	s.red = build(s.fp, slices.Concat(s.stored, s.extra))
	return nil
}

// read decrypts the store file; a missing file is an empty store.
func (s *Store) read() (*contents, error) {
	data, err := readPrivate(s.path, maxStoreBytes, "the secret store")
	if errors.Is(err, fs.ErrNotExist) {
		if _, kerr := os.Lstat(s.keyPath); kerr == nil {
			if err := s.checkKey(); err != nil {
				return nil, err
			}
		}
		return &contents{}, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := s.readKey()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("the secret store %s exists but its key %s does not: the secrets cannot be decrypted (restore the key, or remove %s and set the secrets again)", s.path, s.keyPath, s.path))
	}
	if err != nil {
		return nil, err
	}
	defer clear(key)
	plain, err := open(key, data)
	if err != nil {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("the secret store %s does not decrypt with the key %s: it is corrupt, or the key is not its own (%v); restore both from a backup, or remove %s and set the secrets again", s.path, s.keyPath, err, s.path))
	}
	defer clear(plain)
	var c contents
	if err := json.Unmarshal(plain, &c); err != nil {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("the secret store %s decrypts but does not parse: %v", s.path, err))
	}
	return &c, nil
}

// update applies fn to the store under the store's lock and writes it back
// atomically, creating the key first if needed.
func (s *Store) update(ctx context.Context, fn func(c *contents) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := lock(s.lockPath)
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "locking the secret store", err)
	}
	defer unlock()
	key, err := s.readKey()
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(s.path); serr == nil {
			return errs.New(errs.ErrConfig, fmt.Sprintf("the secret store %s exists but its key %s does not: restore the key, or remove %s and set the secrets again", s.path, s.keyPath, s.path))
		}
		key, err = s.newKey()
	}
	if err != nil {
		return err
	}
	defer clear(key)
	c, err := s.read()
	if err != nil {
		return err
	}
	defer c.clear()
	if err := fn(c); err != nil {
		return err
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return errs.Wrap(errs.ErrInternal, "encoding the secret store", err)
	}
	defer clear(plain)
	sealed, err := seal(key, plain)
	if err != nil {
		return err
	}
	if err := osfile.WriteAtomic(s.path, sealed, 0o600); err != nil {
		return errs.Wrap(errs.ErrConfig, "writing the secret store", err)
	}
	return s.reload()
}

// readKey reads and parses the key file (fs.ErrNotExist when absent).
func (s *Store) readKey() ([]byte, error) {
	data, err := readPrivate(s.keyPath, 256, "the secret store's key")
	if err != nil {
		return nil, err
	}
	defer clear(data)
	text := bytes.TrimSpace(data)
	key := make([]byte, 32)
	if n, err := hex.Decode(key, text); err != nil || n != 32 || len(text) != 64 {
		clear(key)
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("the secret store's key %s is not 64 hex digits: it is corrupt", s.keyPath))
	}
	return key, nil
}

// checkKey checks the key file's owner and mode without reading it.
func (s *Store) checkKey() error {
	_, err := readPrivate(s.keyPath, 256, "the secret store's key")
	return err
}

// newKey makes the key file (under the store's lock).
func (s *Store) newKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, errs.Wrap(errs.ErrInternal, "making the secret store's key", err)
	}
	text := []byte(hex.EncodeToString(key) + "\n")
	defer clear(text)
	if err := osfile.WriteAtomic(s.keyPath, text, 0o600); err != nil {
		clear(key)
		return nil, errs.Wrap(errs.ErrConfig, "writing the secret store's key", err)
	}
	return key, nil
}

// seal encrypts plain: magic, a random nonce, AES-256-GCM of plain with
// magic as additional data.
func seal(key, plain []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(magic)+aead.NonceSize(), len(magic)+aead.NonceSize()+len(plain)+aead.Overhead())
	copy(out, magic)
	if _, err := rand.Read(out[len(magic):]); err != nil {
		return nil, errs.Wrap(errs.ErrInternal, "making a nonce", err)
	}
	return aead.Seal(out, out[len(magic):], plain, []byte(magic)), nil
}

// open decrypts what seal made.
func open(key, data []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(magic)) {
		return nil, errors.New("it does not start as a buddy secret store")
	}
	rest := data[len(magic):]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("it is truncated")
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(magic))
	if err != nil {
		return nil, errors.New("its authentication tag does not match")
	}
	return plain, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, errs.Wrap(errs.ErrInternal, "the secret store's cipher", err)
	}
	return cipher.NewGCM(b)
}
