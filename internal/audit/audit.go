// Package audit turns what the approval gate saw of a call (approval.Outcome)
// into rows of the tamper-evident audit log in the store: an approval row
// when the user was asked, then the invocation row with what the call's host
// functions touched. Every front end's gate records through it.
//
//	gate := approval.New(cat, approval.Options{Asker: a, Record: audit.Recorder(st, log)})
package audit

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// Recorder writes the audit rows of a call through the gate, the CLI's
// and the server's alike: an approval row when the user was asked (with why,
// and what was shown), then the invocation row with what the call's host
// functions touched. A failed write is logged; the call's own result stands.
func Recorder(st *store.Store, log *slog.Logger) func(ctx context.Context, o approval.Outcome) {
	if st == nil {
		return nil
	}
	return func(ctx context.Context, o approval.Outcome) {
		e := store.AuditEntry{
			Time:          o.Started.UTC(),
			Kind:          store.AuditInvocation,
			Conversation:  o.Call.Conversation,
			Skill:         o.Call.Skill,
			Version:       o.Info.Version,
			ModuleSHA256:  o.Info.SHA256,
			ArgumentsHash: o.ArgumentsHash,
			Outcome:       "ok",
			Asked:         o.Asked,
			DurationUS:    o.Duration.Microseconds(),
			BytesIn:       int64(len(o.Call.Arguments)),
		}
		if e.ArgumentsHash == "" { // an Outcome not made by the gate
			e.ArgumentsHash = catalog.ArgumentsHash(o.Call.Arguments)
		}
		if o.Info.Name != "" {
			e.Skill = o.Info.Name
		}
		if o.Err != nil {
			e.Outcome, e.Detail = string(errs.KindOf(o.Err)), o.Err.Error()
		}
		var used catalog.Usage
		if o.Result != nil {
			e.Fuel, e.BytesOut = o.Result.Fuel, int64(len(o.Result.Output))
			e.Version, e.ModuleSHA256 = o.Result.Version, o.Result.SHA256
			used = o.Result.Usage
		}
		var ue *catalog.UsageError
		if errors.As(o.Err, &ue) {
			used = ue.Usage
		}
		e.BytesRead, e.BytesWritten = used.BytesRead, used.BytesWritten
		e.Paths, e.Hosts, e.Addresses = used.Paths, used.Hosts, used.Addresses
		e.Credentials = used.Credentials
		var rows []store.AuditEntry
		if o.Asked {
			a := e
			a.Kind, a.Outcome, a.Detail = store.AuditApproval, "approved", approvalDetail(o)
			a.Fuel, a.DurationUS, a.BytesOut, a.BytesRead, a.BytesWritten = 0, 0, 0, 0, 0
			a.Paths, a.Hosts, a.Addresses = targetPaths(o.Targets)
			a.Credentials = nil
			switch {
			case errs.KindOf(o.Err) == errs.KindDenied || errs.KindOf(o.Err) == errs.KindCanceled:
				a.Outcome = string(errs.KindOf(o.Err))
			case o.Err != nil && o.Result == nil && errs.KindOf(o.Err) == errs.KindForbidden:
				a.Outcome = "refused"
			}
			rows = append(rows, a)
		}
		// One durable write for both rows: the call's result waits for
		// one commit, not two.
		if _, err := st.AppendAudits(ctx, append(rows, e)...); err != nil && log != nil {
			log.Error("writing the audit log", "skill", e.Skill, "err", err)
		}
	}
}

// approvalDetail is what the user was shown: why they were asked, and the
// targets.
func approvalDetail(o approval.Outcome) string {
	var parts []string
	if o.Reason != "" {
		parts = append(parts, "asked because: "+o.Reason)
	}
	for _, t := range o.Targets {
		parts = append(parts, t.String())
	}
	for _, c := range o.Info.Grant.Credentials {
		parts = append(parts, "credential "+c.Name+" for "+strings.Join(c.Hosts, ", "))
	}
	return strings.Join(parts, "; ")
}

// targetPaths lists the canonical paths, hosts and addresses of targets.
func targetPaths(ts []catalog.Target) (paths, hosts, addrs []string) {
	for _, t := range ts {
		if t.Path != "" {
			paths = append(paths, t.Path)
		}
		if t.Host != "" {
			hosts = append(hosts, t.Host)
		}
		for _, a := range t.Addresses {
			addrs = append(addrs, a.IP)
		}
	}
	return paths, hosts, addrs
}
