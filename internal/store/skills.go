package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Verification statuses of an installed skill. Status is free text in the
// database; these are the values buddy writes.
const (
	StatusUnverified         = "unverified"
	StatusVerified           = "verified"
	StatusVerificationFailed = catalog.StatusVerificationFailed
)

// InstalledSkill is one row of the skill registry.
type InstalledSkill struct {
	Name        string
	Version     string
	Description string
	Author      string
	// WasmPath is the absolute path of the module's copy in the data directory.
	WasmPath string
	// SHA256 is the hex SHA-256 of the module bytes, re-verified at every load.
	SHA256 string
	// Manifest is the skill.toml text as installed.
	Manifest string
	// Capabilities is the JSON of the declared capabilities.
	Capabilities string
	// Status is StatusVerified, StatusVerificationFailed, ...; empty means
	// StatusUnverified.
	Status string
	// InstalledAt is when the skill was first installed; UpdatedAt when it was
	// last installed or upgraded (a status change does not move it). Both are
	// UTC; a zero InstalledAt given to InsertSkill means now.
	InstalledAt time.Time
	UpdatedAt   time.Time
}

const skillColumns = `name, version, description, author, wasm_path, sha256, manifest,
	capabilities, verification_status, installed_at, updated_at`

func (sk *InstalledSkill) validate() error {
	if sk.Name == "" {
		return invalid("installed skill: empty name")
	}
	if sk.Status == "" {
		sk.Status = StatusUnverified
	}
	if sk.Capabilities == "" {
		sk.Capabilities = "{}"
	}
	return nil
}

// InsertSkill records a newly installed skill. If a skill of that name exists,
// it fails with an errs.ErrConfig error wrapping ErrExists and changes nothing:
// installing never silently overwrites another skill.
func (s *Store) InsertSkill(ctx context.Context, sk InstalledSkill) error {
	if err := sk.validate(); err != nil {
		return err
	}
	if sk.InstalledAt.IsZero() {
		sk.InstalledAt = s.now()
	}
	if sk.UpdatedAt.IsZero() {
		sk.UpdatedAt = sk.InstalledAt
	}
	op := fmt.Sprintf("installing skill %q", sk.Name)
	return s.writeSkills(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO installed_skills (`+skillColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO NOTHING`,
			sk.Name, sk.Version, sk.Description, sk.Author, sk.WasmPath, sk.SHA256, sk.Manifest,
			sk.Capabilities, sk.Status, unixNanos(sk.InstalledAt), unixNanos(sk.UpdatedAt))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return errs.Wrap(errs.ErrConfig, fmt.Sprintf("skill %q", sk.Name), ErrExists)
		}
		return nil
	})
}

// ReplaceSkill upgrades an installed skill: every field is replaced except
// InstalledAt, which is kept, and UpdatedAt, which is set to now. It fails with
// errs.ErrNotFound if the skill is not installed.
func (s *Store) ReplaceSkill(ctx context.Context, sk InstalledSkill) error {
	if err := sk.validate(); err != nil {
		return err
	}
	op := fmt.Sprintf("upgrading skill %q", sk.Name)
	return s.writeSkills(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE installed_skills SET
				version = ?, description = ?, author = ?, wasm_path = ?, sha256 = ?, manifest = ?,
				capabilities = ?, verification_status = ?, updated_at = ?
			WHERE name = ?`,
			sk.Version, sk.Description, sk.Author, sk.WasmPath, sk.SHA256, sk.Manifest,
			sk.Capabilities, sk.Status, unixNanos(s.now()), sk.Name)
		return affectedOne(ctx, op, res, err, "skill %q", sk.Name)
	})
}

// GetSkill returns the installed skill of that name, or an errs.ErrNotFound error.
func (s *Store) GetSkill(ctx context.Context, name string) (InstalledSkill, error) {
	row := s.reader.QueryRowContext(ctx, `SELECT `+skillColumns+` FROM installed_skills WHERE name = ?`, name)
	sk, err := scanSkill(row)
	if errors.Is(err, sql.ErrNoRows) {
		return InstalledSkill{}, notFound("skill %q", name)
	}
	if err != nil {
		return InstalledSkill{}, dbErr(ctx, fmt.Sprintf("reading skill %q", name), err)
	}
	return sk, nil
}

// ListSkills returns every installed skill, ordered by name.
func (s *Store) ListSkills(ctx context.Context) ([]InstalledSkill, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+skillColumns+` FROM installed_skills ORDER BY name`)
	if err != nil {
		return nil, dbErr(ctx, "listing skills", err)
	}
	defer rows.Close()
	var out []InstalledSkill
	for rows.Next() {
		sk, err := scanSkill(rows)
		if err != nil {
			return nil, dbErr(ctx, "listing skills", err)
		}
		out = append(out, sk)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(ctx, "listing skills", err)
	}
	return out, nil
}

// DeleteSkill removes an installed skill from the registry (not its files, nor
// its KV entries and memories). It fails with errs.ErrNotFound if absent.
func (s *Store) DeleteSkill(ctx context.Context, name string) error {
	op := fmt.Sprintf("removing skill %q", name)
	return s.writeSkills(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM installed_skills WHERE name = ?`, name)
		return affectedOne(ctx, op, res, err, "skill %q", name)
	})
}

// SetSkillStatus records the verification status of an installed skill. It
// fails with errs.ErrNotFound if the skill is not installed.
func (s *Store) SetSkillStatus(ctx context.Context, name, status string) error {
	if status == "" {
		return invalid("skill %q: empty status", name)
	}
	op := fmt.Sprintf("setting the status of skill %q", name)
	return s.write(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE installed_skills SET verification_status = ? WHERE name = ?`, status, name)
		return affectedOne(ctx, op, res, err, "skill %q", name)
	})
}

type scanner interface{ Scan(dest ...any) error }

func scanSkill(r scanner) (InstalledSkill, error) {
	var sk InstalledSkill
	var installed, updated int64
	err := r.Scan(&sk.Name, &sk.Version, &sk.Description, &sk.Author, &sk.WasmPath, &sk.SHA256,
		&sk.Manifest, &sk.Capabilities, &sk.Status, &installed, &updated)
	if err != nil {
		return InstalledSkill{}, err
	}
	sk.InstalledAt = fromUnixNanos(installed)
	sk.UpdatedAt = fromUnixNanos(updated)
	return sk, nil
}

// affectedOne turns the result of a statement that must touch one row into an
// error: the statement's own, or errs.ErrNotFound naming the row.
func affectedOne(ctx context.Context, op string, res sql.Result, err error, what string, args ...any) error {
	if err != nil {
		return dbErr(ctx, op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return dbErr(ctx, op, err)
	}
	if n == 0 {
		return notFound(what, args...)
	}
	return nil
}

// ErrNotAnnounced is wrapped by an error of InsertSkill, ReplaceSkill or
// DeleteSkill whose change was committed but could not be announced to the
// running buddy processes (the skills stamp could be neither appended to nor
// removed): the change stands, and a running buddy serve sees it once
// restarted. The caller finishes what follows the change (its files, its
// audit row) and reports the error.
var ErrNotAnnounced = errors.New("not announced to running buddy processes")

// writeSkills is write for a change of installed_skills: once committed, the
// change is stamped (stamp.go).
func (s *Store) writeSkills(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.write(ctx, op, fn); err != nil {
		return err
	}
	if err := s.stampSkills(); err != nil {
		return errs.Wrap(errs.ErrUnavailable, op+": done, but a running buddy serve may not see it until restarted",
			fmt.Errorf("%w: %w", ErrNotAnnounced, err))
	}
	return nil
}
