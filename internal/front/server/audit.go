package server

import (
	"github.com/buddy-run/buddy/internal/audit"
	"net/http"
	"strconv"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// maxAuditRows caps one GET /api/audit answer.
const maxAuditRows = 1000

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
	out := audit.Rows(rows)
	writeJSON(w, http.StatusOK, map[string]any{"audit": out})
}

func targetsOrEmpty(v []catalog.Target) []catalog.Target {
	if v == nil {
		return []catalog.Target{}
	}
	return v
}
