package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/buddy-run/buddy/internal/audit"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// audit is `buddy audit list|verify`.
func (a *app) audit(ctx context.Context, args []string) error {
	return a.subcommand(ctx, verbs{cmd: "audit", listed: "list, verify", run: map[string]func(context.Context, []string) error{
		"list": a.auditList, "verify": a.auditVerify,
	}}, args)
}

func (a *app) auditList(ctx context.Context, args []string) (err error) {
	var asJSON bool
	var conv string
	var limit int
	_, configPath, err := parseCommand("audit list", args, 0, "[--conversation ID] [--limit N] [--json]", func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&conv, "conversation", "", "only this conversation's rows")
		fs.IntVar(&limit, "limit", 0, "only the last N rows")
	})
	if err != nil {
		return err
	}
	if limit < 0 {
		return errs.New(errs.ErrInvalidInput, "--limit must be 0 (all) or more")
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	rows, err := e.st.Audit(ctx, conv, limit)
	if err != nil {
		return err
	}
	if asJSON {
		out := audit.Rows(rows)
		return writeJSON(a.stdout, out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "no audit rows")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tKIND\tCONVERSATION\tSKILL\tOUTCOME\tFUEL\tTOUCHED")
	for _, r := range rows {
		touched := append(append(append([]string(nil), r.Paths...), r.Hosts...), r.Addresses...)
		for _, c := range r.Credentials {
			touched = append(touched, "credential:"+c)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Time.Format(time.RFC3339), safe(r.Kind),
			safe(orDash(r.Conversation)), safe(orDash(r.Skill)), safe(r.Outcome), r.Fuel, safe(orDash(strings.Join(touched, " "))))
	}
	return tw.Flush()
}

func (a *app) auditVerify(ctx context.Context, args []string) (err error) {
	_, configPath, err := parseCommand("audit verify", args, 0, "", nil)
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	rep, err := e.st.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	if p := rep.Problem; p != nil {
		where := fmt.Sprintf("row %d", p.ID)
		switch {
		case p.Kind == store.AuditUnverifiable:
			where = "its head"
		case p.ID == 0:
			where = "the end of the log"
		}
		return errs.New(errs.ErrTampered, fmt.Sprintf("audit log %s: first problem at %s: %s: %s", e.cfg.Storage.Path, where, p.Kind, p.Detail))
	}
	fmt.Fprintf(a.stdout, "audit log intact: %d rows chained\n", rep.Rows)
	return nil
}

// noteConfig appends a config row when the configuration buddy starts with
// differs from the last one the audit log saw (its SHA-256; the embedded
// defaults count as a configuration of their own).
func noteConfig(ctx context.Context, st *store.Store, path string) error {
	content := []byte("embedded defaults")
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return errs.Wrap(errs.ErrConfig, "reading "+path+" for the audit log", err)
		}
		content = b
	}
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])
	last, ok, err := st.LastAudit(ctx, store.AuditConfig)
	if err != nil {
		return err
	}
	if ok && last.ArgumentsHash == hash && (len(last.Paths) == 0 && path == "" || len(last.Paths) == 1 && last.Paths[0] == path) {
		return nil
	}
	outcome := "changed"
	if !ok {
		outcome = "first seen"
	}
	e := store.AuditEntry{Kind: store.AuditConfig, Outcome: outcome, ArgumentsHash: hash,
		Detail: fmt.Sprintf("configuration sha256 %s", hash)}
	if path != "" {
		e.Paths = []string{path}
	}
	_, err = st.AppendAudit(ctx, e)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
