package store

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

func testSkill(name string) InstalledSkill {
	return InstalledSkill{
		Name:         name,
		Version:      "1.2.3",
		Description:  "says things back",
		Author:       "Ada <ada@example.org>",
		WasmPath:     "/home/ada/.local/share/buddy/skills/" + name + ".wasm",
		SHA256:       "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Manifest:     "[skill]\nname = \"" + name + "\"\nversion = \"1.2.3\"\n",
		Capabilities: `{"network":{"domains":["api.example.org"]}}`,
		Status:       StatusVerified,
		InstalledAt:  time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC),
		UpdatedAt:    time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC),
	}
}

func skillsEqual(a, b InstalledSkill) bool {
	ta, ua := a.InstalledAt, a.UpdatedAt
	a.InstalledAt, a.UpdatedAt = time.Time{}, time.Time{}
	tb, ub := b.InstalledAt, b.UpdatedAt
	b.InstalledAt, b.UpdatedAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && ua.Equal(ub)
}

// TestSkillStoreSeed003 is the skill store's test list: the migration
// creates installed_skills; install + get round-trips; install + list
// returns the skill; remove + get returns not found.
func TestSkillStoreSeed003(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store)
	}{
		{"migration creates installed_skills", func(t *testing.T, s *Store) {
			var sql string
			err := s.reader.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'installed_skills'`).Scan(&sql)
			if err != nil || sql == "" {
				t.Fatalf("installed_skills: %q, %v", sql, err)
			}
		}},
		{"install and get roundtrip", func(t *testing.T, s *Store) {
			want := testSkill("weather")
			if err := s.InsertSkill(t.Context(), want); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetSkill(t.Context(), "weather")
			if err != nil {
				t.Fatal(err)
			}
			if !skillsEqual(got, want) {
				t.Errorf("GetSkill = %+v\nwant      %+v", got, want)
			}
			if got.InstalledAt.Location() != time.UTC {
				t.Errorf("InstalledAt in %v, want UTC", got.InstalledAt.Location())
			}
		}},
		{"install and list returns the skill", func(t *testing.T, s *Store) {
			want := testSkill("weather")
			if err := s.InsertSkill(t.Context(), want); err != nil {
				t.Fatal(err)
			}
			list, err := s.ListSkills(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || !skillsEqual(list[0], want) {
				t.Errorf("ListSkills = %+v, want [%+v]", list, want)
			}
		}},
		{"remove and get returns not found", func(t *testing.T, s *Store) {
			if err := s.InsertSkill(t.Context(), testSkill("weather")); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteSkill(t.Context(), "weather"); err != nil {
				t.Fatal(err)
			}
			_, err := s.GetSkill(t.Context(), "weather")
			if !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("GetSkill after DeleteSkill: %v, want ErrNotFound", err)
			}
			if list, _ := s.ListSkills(t.Context()); len(list) != 0 {
				t.Errorf("ListSkills after DeleteSkill = %+v", list)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, openTest(t, Options{})) })
	}
}

func TestInsertSkillDuplicate(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	orig := testSkill("echo")
	if err := s.InsertSkill(ctx, orig); err != nil {
		t.Fatal(err)
	}
	dup := testSkill("echo")
	dup.Version, dup.SHA256, dup.WasmPath = "6.6.6", "deadbeef", "/tmp/evil.wasm"
	err := s.InsertSkill(ctx, dup)
	if !errors.Is(err, ErrExists) || !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("duplicate InsertSkill: %v (kind %s), want ErrExists and ErrConfig", err, errs.KindOf(err))
	}
	got, err := s.GetSkill(ctx, "echo")
	if err != nil || !skillsEqual(got, orig) {
		t.Errorf("after the refused duplicate: %+v, %v; want the original %+v", got, err, orig)
	}
}

func TestReplaceSkill(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	later := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	s.now = func() time.Time { return later }

	orig := testSkill("echo")
	if err := s.InsertSkill(ctx, orig); err != nil {
		t.Fatal(err)
	}
	up := testSkill("echo")
	up.Version, up.SHA256, up.Capabilities, up.Status = "2.0.0", "abc123", `{}`, StatusUnverified
	up.InstalledAt = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) // ignored
	if err := s.ReplaceSkill(ctx, up); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSkill(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	want := up
	want.InstalledAt, want.UpdatedAt = orig.InstalledAt, later
	if !skillsEqual(got, want) {
		t.Errorf("after ReplaceSkill = %+v\nwant                 %+v", got, want)
	}

	if err := s.ReplaceSkill(ctx, testSkill("absent")); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("ReplaceSkill of an absent skill: %v, want ErrNotFound", err)
	}
	if _, err := s.GetSkill(ctx, "absent"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("ReplaceSkill created the absent skill: %v", err)
	}
}

func TestInsertSkillDefaults(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	now := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	s.now = func() time.Time { return now }
	if err := s.InsertSkill(ctx, InstalledSkill{Name: "bare", Version: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSkill(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusUnverified || got.Capabilities != "{}" || !got.InstalledAt.Equal(now) || !got.UpdatedAt.Equal(now) {
		t.Errorf("defaults: %+v", got)
	}
	if err := s.InsertSkill(ctx, InstalledSkill{}); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("InsertSkill without a name: %v, want ErrInvalidInput", err)
	}
}

func TestSetSkillStatus(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	if err := s.InsertSkill(ctx, testSkill("echo")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, skill, status string
		wantErr             error
	}{
		{"to failed", "echo", StatusVerificationFailed, nil},
		{"back to verified", "echo", StatusVerified, nil},
		{"absent skill", "nope", StatusVerified, errs.ErrNotFound},
		{"empty status", "echo", "", errs.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.GetSkill(ctx, "echo")
			err := s.SetSkillStatus(ctx, tt.skill, tt.status)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("SetSkillStatus = %v, want %v", err, tt.wantErr)
			}
			after, _ := s.GetSkill(ctx, "echo")
			want := before
			if tt.wantErr == nil {
				want.Status = tt.status
			}
			if !skillsEqual(after, want) {
				t.Errorf("after: %+v, want %+v", after, want)
			}
		})
	}
}

func TestDeleteSkillAbsent(t *testing.T) {
	s := openTest(t, Options{})
	if err := s.DeleteSkill(t.Context(), "ghost"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("DeleteSkill of an absent skill: %v, want ErrNotFound", err)
	}
}

func TestListSkillsOrdered(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	names := []string{"weather", "Zed", "calc", "a-b", "échos", "b", "a"}
	for _, n := range names {
		if err := s.InsertSkill(ctx, testSkill(n)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.ListSkills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sk := range list {
		got = append(got, sk.Name)
	}
	want := slices.Clone(names)
	slices.Sort(want) // byte order, as SQLite's BINARY collation
	if !slices.Equal(got, want) {
		t.Errorf("ListSkills order = %q, want %q", got, want)
	}
}

func TestSkillsEmptyList(t *testing.T) {
	s := openTest(t, Options{})
	list, err := s.ListSkills(t.Context())
	if err != nil || len(list) != 0 {
		t.Errorf("ListSkills of a new store = %v, %v", list, err)
	}
}
