package audit

import (
	"time"

	"github.com/buddy-run/buddy/internal/store"
)

// Row is one audit row as `buddy audit list --json` and GET /api/audit show
// it. Lists are never null.
type Row struct {
	ID             int64     `json:"id"`
	Time           time.Time `json:"time"`
	Kind           string    `json:"kind"`
	ConversationID string    `json:"conversation_id,omitempty"`
	Skill          string    `json:"skill"`
	Version        string    `json:"version,omitempty"`
	ModuleSHA256   string    `json:"module_sha256,omitempty"`
	ArgumentsHash  string    `json:"arguments_hash,omitempty"`
	Outcome        string    `json:"outcome"`
	Detail         string    `json:"detail,omitempty"`
	Asked          bool      `json:"asked"`
	Fuel           uint64    `json:"fuel"`
	DurationMS     float64   `json:"duration_ms"`
	BytesRead      int64     `json:"bytes_read"`
	BytesWritten   int64     `json:"bytes_written"`
	Paths          []string  `json:"paths"`
	Hosts          []string  `json:"hosts"`
	Addresses      []string  `json:"addresses"`
	// Credentials are the credentials buddy added to the call's requests
	// (names only).
	Credentials []string `json:"credentials"`
	PrevHash    string   `json:"prev_hash"`
	Hash        string   `json:"hash"`
}

// Rows converts stored audit entries for display.
func Rows(entries []store.AuditEntry) []Row {
	out := make([]Row, 0, len(entries))
	for _, e := range entries {
		out = append(out, Row{
			ID: e.ID, Time: e.Time, Kind: e.Kind, ConversationID: e.Conversation, Skill: e.Skill, Version: e.Version,
			ModuleSHA256: e.ModuleSHA256, ArgumentsHash: e.ArgumentsHash, Outcome: e.Outcome, Detail: e.Detail,
			Asked: e.Asked, Fuel: e.Fuel, DurationMS: float64(e.DurationUS) / 1000,
			BytesRead: e.BytesRead, BytesWritten: e.BytesWritten,
			Paths: orEmpty(e.Paths), Hosts: orEmpty(e.Hosts), Addresses: orEmpty(e.Addresses),
			Credentials: orEmpty(e.Credentials), PrevHash: e.PrevHash, Hash: e.Hash,
		})
	}
	return out
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
