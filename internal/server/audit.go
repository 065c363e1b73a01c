package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
)

// maxAuditRows caps one GET /api/audit answer.
const maxAuditRows = 1000

// auditJSON is one audit row as GET /api/audit shows it.
type auditJSON struct {
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
	PrevHash       string    `json:"prev_hash"`
	Hash           string    `json:"hash"`
}

// listAudit is GET /api/audit[?conversation=ID][&limit=N]: the audit rows,
// oldest first (the last N, at most 1000).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	limit := maxAuditRows
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditRows {
			writeError(w, http.StatusBadRequest, errs.KindInvalidInput, "limit must be a number from 1 to 1000")
			return
		}
		limit = n
	}
	rows, err := s.opts.Store.Audit(r.Context(), r.URL.Query().Get("conversation"), limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]auditJSON, 0, len(rows))
	for _, e := range rows {
		out = append(out, auditJSON{
			ID: e.ID, Time: e.Time, Kind: e.Kind, ConversationID: e.Conversation, Skill: e.Skill, Version: e.Version,
			ModuleSHA256: e.ModuleSHA256, ArgumentsHash: e.ArgumentsHash, Outcome: e.Outcome, Detail: e.Detail,
			Asked: e.Asked, Fuel: e.Fuel, DurationMS: float64(e.DurationUS) / 1000,
			BytesRead: e.BytesRead, BytesWritten: e.BytesWritten,
			Paths: orEmpty(e.Paths), Hosts: orEmpty(e.Hosts), Addresses: orEmpty(e.Addresses),
			PrevHash: e.PrevHash, Hash: e.Hash,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"audit": out})
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func targetsOrEmpty(v []catalog.Target) []catalog.Target {
	if v == nil {
		return []catalog.Target{}
	}
	return v
}
