package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/proc/gcpolicy"
	"github.com/buddy-run/buddy/internal/proc/osmem"
	"github.com/buddy-run/buddy/internal/scheduler"
)

// shutdownGrace bounds how long a stopping server waits for calls to end
// after canceling them.
const shutdownGrace = 10 * time.Second

// serve is `buddy serve [--listen ADDR]`: the HTTP + WebSocket server.
// SIGINT/SIGTERM stop it cleanly (exit 0); SIGHUP reloads buddy.toml.
func (a *app) serve(ctx context.Context, args []string) (err error) {
	var listenFlag *string
	_, configPath, err := parseCommand("serve", args, 0, "[--listen ADDR]", func(fs *flag.FlagSet) {
		listenFlag = fs.String("listen", "", "address to listen on (default: [server] listen, 127.0.0.1:7700)")
	})
	if err != nil {
		return err
	}
	a.longRunning = true
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	log := e.newLogger(a.stderr)
	cfg := e.cfg
	listen := cfg.Server.Listen
	if *listenFlag != "" {
		listen = *listenFlag
	}
	remote, err := checkListen(listen, cfg.Server.AllowRemote)
	if err != nil {
		return err
	}
	tok, err := loadToken(cfg.Server.TokenFile)
	if err != nil {
		return err
	}
	if n, err := e.st.ExpirePendingApprovals(ctx, time.Now().UTC()); err != nil {
		return err
	} else if n > 0 {
		log.Info("expired approvals left pending by the last run", "count", n)
	}

	loc, err := cfg.Scheduler.Location()
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "scheduler.timezone", err)
	}
	meter := e.newMeter(loc)
	newAgent, err := e.agentFactory(ctx, log, meter)
	if err != nil {
		return err
	}
	// The chat channels: a channel whose credential cannot be read stops
	// the start here, before anything listens.
	chans, err := e.openChannels(ctx, log)
	if err != nil {
		return err
	}
	// The scheduler: its own gate (asking through held approvals), its
	// agents, and the page to notify once the server exists. Its
	// notifications and held calls reach the owner's chats too when a
	// channel is configured.
	page := &pageProxy{}
	var deliverer scheduler.Deliverer
	if len(chans.Names()) > 0 {
		deliverer = chans
	}
	sched, err := e.newScheduler(log, page, deliverer)
	if err != nil {
		return err
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if cerr := sched.Close(stop); cerr != nil {
			log.Warn("stopping the scheduler", "err", cerr)
		}
	}()
	e.jobs.set(sched) // the schedule skill adds through the running scheduler
	schedGate := e.newGate(sched.Asker(), log, scheduler.HoldFor)
	checkAgent := newAgent(sched.Skills(schedGate, false), agentVariant{systemPrompt: scheduler.SystemPrompt(cfg.Provider.SystemPrompt)})
	beatAgent := newAgent(sched.Skills(schedGate, true), agentVariant{systemPrompt: scheduler.SystemPrompt(scheduler.HeartbeatPrompt),
		model: cfg.Scheduler.HeartbeatModel, lean: true})
	if checkAgent != nil {
		var beat scheduler.Agent
		if beatAgent != nil {
			beat = beatAgent
		}
		sched.SetAgents(checkAgent, beat)
	}
	live := e.live
	var mcpSrv *mcpserver.Server
	var mcpErr error
	srv, err := server.New(server.Options{
		Token: tok,
		Store: e.st,
		NewGate: func(asker approval.Asker) server.Gate {
			return e.newGate(asker, log)
		},
		NewAgent: func(gate server.Gate) server.Agent {
			if a := newAgent(gate, agentVariant{}); a != nil {
				return a
			}
			return nil
		},
		Schedule: sched,
		Spending: meter,
		NewMCP: func(host server.MCPHost) http.Handler {
			mcpSrv, mcpErr = newServeMCP(ctx, e, log, host)
			if mcpErr != nil {
				return nil
			}
			return mcpSrv.HTTPHandler()
		},
		NewChannels:     e.channelsHandler(chans, newAgent, log),
		AllowedOrigins:  cfg.Server.AllowedOrigins,
		AllowedHosts:    cfg.Server.AllowedHosts,
		MaxMessageBytes: cfg.Server.MaxMessageBytes,
		WriteTimeout:    cfg.Server.WriteTimeout,
		MaxConnections:  cfg.Server.MaxConnections,
		Logger:          log,
		Redact:          e.secrets.RedactBytes,
	})
	if err == nil {
		err = mcpErr
	}
	if err != nil {
		return err
	}
	defer mcpSrv.Close()
	go mcpSrv.Watch(ctx)
	page.set(srv)
	sched.SinkFor(srv.TurnSink)
	go func() {
		if err := sched.Run(ctx); err != nil {
			log.Error("the scheduler stopped", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return errs.Wrap(errs.ErrUnavailable, "listening on "+listen, err)
	}
	httpSrv := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * is not answered by net/http's default handler: every
		// request reaches buddy's Host check.
		DisableGeneralOptionsHandler: true,
		// net/http's own complaints go to the structured log, not raw stderr.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if remote {
		log.Warn("LISTENING ON A NON-LOOPBACK ADDRESS: anyone who can reach it and has the token can run your skills", "listen", ln.Addr().String())
	}
	// Everything is up: give back what start-up touched once (the
	// executable's pages its packages' init functions read, the heap's
	// garbage); what serving uses comes back on first use (internal/proc/osmem).
	switch r, err := osmem.ReleaseStartup(); {
	case err == nil:
		log.Info("start-up memory released", "rss_before_mib", mebibytes(r.Before), "rss_after_mib", mebibytes(r.After))
	case !errors.Is(err, osmem.ErrUnsupported):
		log.Warn("releasing start-up memory", "err", err)
	}
	// Then the collector's policy for serving: more heap, fewer cycles under
	// a burst, within a memory limit (internal/proc/gcpolicy).
	if restore, applied := gcpolicy.Apply(ctx, gcpolicy.Serve, os.Getenv); applied {
		defer restore()
		log.Info("garbage collector", "gc_percent", gcpolicy.Serve.Percent, "memory_limit_mib", mebibytes(gcpolicy.Serve.Limit))
	} else {
		log.Info("garbage collector left as GOGC and GOMEMLIMIT set it", "GOGC", os.Getenv("GOGC"), "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	}
	// SIGHUP is caught before the address is printed: a client that reads
	// it may signal at once (SIGHUP's default would end the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	addr := ln.Addr().String()
	fmt.Fprintf(a.stdout, "buddy is serving on http://%s/\nopen the page: http://%s/#token=%s\n", addr, addr, tok)
	log.Info("serving", "listen", addr, "config", cfg.Path, "skills", len(live.Current().Skills()), "provider", cfg.Provider.Kind, "model", cfg.Provider.Model)
	if cfg.Provider.Kind == "" {
		log.Info("no LLM provider configured: send answers with a config error; skills can still be invoked (add [provider] to buddy.toml)")
	}

	// Every enabled skill is loaded in the background (from the compile
	// cache, or compiled now): a call that comes first waits only for its
	// own skill's compile, if it is the one running. Then what loading left
	// behind (the compiler's garbage above all: some 40 MiB on a fresh data
	// directory) is given back, as after start-up.
	go func() {
		start := time.Now()
		live.Current().Warm(ctx)
		took := time.Since(start).Milliseconds()
		if ctx.Err() != nil {
			return
		}
		r, err := osmem.ReleaseStartup()
		if err != nil && !errors.Is(err, osmem.ErrUnsupported) {
			log.Warn("releasing the skills' load memory", "err", err)
		}
		log.Info("skills loaded", "took_ms", took, "rss_before_mib", mebibytes(r.Before), "rss_after_mib", mebibytes(r.After))
	}()
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	chansCtx, stopChans := context.WithCancel(context.WithoutCancel(ctx))
	defer stopChans()
	go chans.Run(chansCtx)
	for {
		select {
		case err := <-served:
			if !errors.Is(err, http.ErrServerClosed) {
				return errs.Wrap(errs.ErrUnavailable, "serving", err)
			}
			return nil
		case <-hup:
			a.reload(ctx, e, configPath, log)
		case <-ctx.Done():
			log.Info("shutting down")
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			defer cancel()
			// Stop accepting, then cancel calls, expire questions and
			// close the WebSocket connections (hijacked: Shutdown does
			// not wait for them).
			mcpSrv.Close() // MCP sessions hold streams open: end them first
			shutErr := httpSrv.Shutdown(stop)
			// The channels stop before the server cancels its calls: a turn
			// they cut stays in their inbox, answered at the next start.
			chansErr := chans.Close(stop)
			closeErr := errors.Join(srv.Close(stop), chansErr)
			if _, err := e.st.ExpirePendingApprovals(stop, time.Now().UTC()); err != nil {
				log.Error("expiring pending approvals", "err", err)
			}
			if err := errors.Join(shutErr, closeErr); err != nil {
				log.Warn("shutdown", "err", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}

// mebibytes rounds bytes to tenths of MiB for the log.
func mebibytes(b int64) float64 { return float64(b*10/(1<<20)) / 10 }

// reload re-reads buddy.toml on SIGHUP: new grants, limits and [approval]
// settings apply to the next call, and the SKILL.md folder is read again; a
// key that only a restart applies (the listen address, the provider, …) is
// named in the log line; a file that does not load is reported and the old
// configuration kept.
func (a *app) reload(ctx context.Context, e *env, configPath string, log *slog.Logger) {
	cfg, err := a.loadConfig(configPath)
	if err != nil {
		log.Error("reload failed: keeping the old configuration", "err", err)
		return
	}
	reg, err := e.newRegistry(ctx, cfg)
	if err != nil {
		log.Error("reload failed: keeping the old configuration", "err", err)
		return
	}
	restart := restartKeys(e.config(), cfg)
	e.live.Swap(ctx, reg)
	go reg.Warm(ctx)
	e.now.Store(cfg)
	if e.md != nil {
		e.md.catalog.Reload(ctx)
	}
	attrs := []any{"config", cfg.Path, "skills", len(reg.Skills()),
		"applied", "skills, limits, approval, SKILL.md folder"}
	if len(restart) > 0 {
		attrs = append(attrs, "restart_needed_for", strings.Join(restart, ", "))
		log.Warn("configuration reloaded; some changes need a restart of buddy serve", attrs...)
		return
	}
	log.Info("configuration reloaded", attrs...)
}

// checkListen refuses a non-loopback address unless allowed; it reports
// whether the address is remote.
func checkListen(addr string, allowRemote bool) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, errs.New(errs.ErrInvalidInput, fmt.Sprintf("--listen %q must be host:port", addr))
	}
	if host == "localhost" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return false, nil
	}
	if !allowRemote {
		return true, errs.New(errs.ErrConfig, fmt.Sprintf("listening on %s would expose buddy beyond this machine: set [server] allow_remote = true in buddy.toml to allow it", addr))
	}
	return true, nil
}
