package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/audit"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/llm"
	"github.com/buddy-run/buddy/internal/llm/anthropic"
	"github.com/buddy-run/buddy/internal/llm/openai"
	"github.com/buddy-run/buddy/internal/secrets"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// newGate is the one place a process builds its approval gate: buddy serve
// (the WebSocket server, its agent and /mcp), buddy mcp and buddy skill run
// all get theirs here, each with only its own Asker (TestOneGate keeps it
// so). The gate wraps every skill the env serves (the WebAssembly registry,
// live across reloads, and the SKILL.md skills), reads [approval] as it is
// now at every call, records every call in the audit log, checks SKILL.md
// bindings, and keeps what it learns of a conversation in the store.
//
// holdFor, when given, replaces [approval] timeout: the scheduler's gate
// holds a scheduled turn's question that long (scheduler.HoldFor).
func (e *env) newGate(asker approval.Asker, log *slog.Logger, holdFor ...time.Duration) *approval.Gate {
	var cat catalog.Catalog = e.live
	cat = e.md.union(cat)
	opts := approval.Options{
		Asker: asker,
		Settings: func() approval.Settings {
			s := approvalSettings(e.config())
			if len(holdFor) > 0 {
				s.Timeout = holdFor[0]
			}
			return s
		},
		Record: audit.Recorder(e.st, log),
		Guard:  e.md.guard(),
	}
	if e.st != nil {
		opts.State = e.st
	}
	return approval.New(cat, opts)
}

// approvalSettings are the gate's settings of a configuration: [approval]
// timeout and after_private_read.
func approvalSettings(cfg *config.Config) approval.Settings {
	return approval.Settings{
		Timeout:               cfg.Approval.Timeout,
		AllowAfterPrivateRead: cfg.Approval.AfterPrivateRead == config.AfterPrivateReadAllow,
	}
}

// newLogger is the structured log of long-running commands, on stderr.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newLogger is the structured log of a long-running command, with every
// secret the env's store holds (and the provider's key) replaced by
// "[secret:NAME]" in every line.
func (e *env) newLogger(w io.Writer) *slog.Logger {
	return newLogger(e.secrets.Writer(w))
}

// compactionRecorder writes an audit row for every compaction of a
// conversation (agent.Options.OnCompaction): what was summarised or left
// out, and why.
func compactionRecorder(st *store.Store, log *slog.Logger) func(ctx context.Context, c agent.Compaction) {
	return func(ctx context.Context, c agent.Compaction) {
		detail := fmt.Sprintf("%d messages (ids %d to %d) %s to fit the model's window: about %d tokens before, %d after",
			c.Messages, c.CoversFrom, c.CoversTo, map[string]string{agent.MethodSummary: "summarised", agent.MethodDropped: "left out"}[c.Method],
			c.TokensBefore, c.TokensAfter)
		if c.Error != "" {
			detail += "; the summary failed: " + c.Error
		}
		_, err := st.AppendAudit(ctx, store.AuditEntry{Kind: store.AuditCompaction, Conversation: c.Conversation, Outcome: c.Method, Detail: detail})
		if err != nil {
			log.Error("writing the audit log", "kind", store.AuditCompaction, "conversation", c.Conversation, "err", err)
		}
	}
}

// newMCPServer builds the MCP server over the same gate as every front end
// (newGate).
func newMCPServer(ctx context.Context, e *env, log *slog.Logger,
	fallback approval.Asker, newConversation func(context.Context, string) (string, error)) (*mcpserver.Server, error) {
	return mcpserver.New(ctx, mcpserver.Options{
		NewGate: func(asker approval.Asker) mcpserver.Gate {
			return e.newGate(asker, log)
		},
		Fallback:        fallback,
		NewConversation: newConversation,
		MaxMessageBytes: e.cfg.Server.MaxMessageBytes,
		Version:         version,
		Logger:          log,
	})
}

// ttyMu keeps two questions from sharing the terminal at once.
var ttyMu sync.Mutex

// ttyAsker asks on the controlling terminal (/dev/tty): stdin and stdout
// belong to the MCP client. With no terminal (a client that spawned buddy
// detached) the call is denied.
func ttyAsker() approval.Asker {
	return approval.AskerFunc(func(ctx context.Context, req approval.Request) (bool, error) {
		ttyMu.Lock()
		defer ttyMu.Unlock()
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return false, fmt.Errorf("no terminal to ask for approval ([mcp] approval = \"terminal\"): %w", err)
		}
		defer tty.Close()
		if !isTerminal(tty.Fd()) {
			return false, errors.New("/dev/tty is not a terminal")
		}
		fmt.Fprintf(tty, "\nbuddy mcp: %s\nAllow? [y/N] ", approval.Describe(req, approval.DefaultWidth))
		return readYes(ctx, tty, tty, func() { _ = tty.Close() })
	})
}

// newServeMCP is the MCP server of buddy serve's /mcp: [mcp] approval =
// "web" asks on the buddy page (each MCP session gets a stored conversation
// the page can watch), "terminal" on buddy serve's terminal.
func newServeMCP(ctx context.Context, e *env, log *slog.Logger, host server.MCPHost) (*mcpserver.Server, error) {
	var fallback approval.Asker
	var newConv func(context.Context, string) (string, error)
	switch e.cfg.MCP.Approval {
	case config.MCPApprovalTerminal:
		fallback = ttyAsker()
	case config.MCPApprovalWeb:
		fallback = approval.AskerFunc(host.Ask)
		newConv = host.NewConversation
	}
	return newMCPServer(ctx, e, log, fallback, newConv)
}

// env is what most commands need: the configuration, the runtime, and (when
// asked) the store and the registry.
type env struct {
	// cfg is the configuration the command started with; now is the one
	// in force (a reload replaces it: read it with config()).
	cfg      *config.Config
	now      atomic.Pointer[config.Config]
	defaults bool // no buddy.toml was found: the embedded defaults apply
	dataDir  string
	rt       *runtime.Runtime
	st       *store.Store
	// secrets is the secret store of the data directory: credentials,
	// the provider's key, and what every output of buddy is redacted with.
	secrets *secrets.Store
	// live is the registry of skills, replaced on a reload.
	live *skills.Live
	// md is the SKILL.md skills (nil when [instructions] is disabled or
	// the registry was not asked for).
	md *skillsMD
	// jobs serves the schedule skill's host function: a scheduler over
	// the store that runs nothing (the CLI), or buddy serve's.
	jobs *scheduleHost
}

// openEnv loads the configuration and starts the runtime; withStore also
// opens the database, and withRegistry registers the skills.
func (a *app) openEnv(ctx context.Context, configFlag string, withStore, withRegistry bool) (_ *env, err error) {
	path, err := config.Find(configFlag)
	if err != nil {
		return nil, err
	}
	a.noteLocalConfig(path)
	e := &env{}
	defer func() {
		if err != nil {
			_ = e.Close(ctx)
		}
	}()
	if path == "" {
		e.defaults = true
		if e.cfg, err = embeddedDefaults(); err != nil {
			return nil, err
		}
	} else if e.cfg, err = config.Load(path); err != nil {
		return nil, err
	}
	if e.dataDir, err = e.cfg.DataDir(); err != nil {
		return nil, err
	}
	if e.secrets, err = secrets.Open(e.dataDir); err != nil {
		return nil, err
	}
	e.rt, err = runtime.New(ctx, runtime.Options{
		CacheDir:      filepath.Join(e.dataDir, "cache"),
		MaxConcurrent: e.cfg.Limits.MaxConcurrent,
		Prepared:      a.prepared(),
		Log:           guestLogger(a.stderr),
		Redact:        e.secrets.RedactBytes,
	})
	if err != nil {
		return nil, err
	}
	if withStore || withRegistry {
		if e.st, err = store.Open(ctx, e.cfg.Storage.Path, store.Options{Redact: e.secrets.RedactBytes}); err != nil {
			return nil, err
		}
	}
	e.now.Store(e.cfg)
	if e.st != nil {
		s, err := e.newScheduler(slog.New(slog.DiscardHandler), nil, nil)
		if err != nil {
			return nil, err
		}
		e.jobs = &scheduleHost{}
		e.jobs.set(s)
	}
	if withRegistry {
		reg, err := e.newRegistry(ctx, e.cfg)
		if err != nil {
			return nil, err
		}
		e.live = skills.NewLive(reg)
		e.md = openInstructions(ctx, e, a.stderr)
		if err := noteConfig(ctx, e.st, e.cfg.Path); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// newRegistry registers the skills cfg enables.
func (e *env) newRegistry(ctx context.Context, cfg *config.Config) (*skills.Registry, error) {
	return skills.New(ctx, skills.Options{
		Runtime: e.rt,
		Config:  cfg,
		Store:   e.st,
		Deps:    e.hostDeps(cfg),
	})
}

// hostDeps are what the skills' host functions use of buddy, and what of
// buddy's own they never touch: no file grant reaches the data directory
// (but its workspace), the SKILL.md skills, the secret store, the
// configuration file or the directory buddy looks for one in, however it is
// worded.
func (e *env) hostDeps(cfg *config.Config) hostfns.Deps {
	private := append(e.secrets.Files(), store.Files(cfg.Storage.Path)...)
	if cfg.Path != "" {
		private = append(private, cfg.Path)
	}
	dirs := []string{e.dataDir, cfg.Instructions.SkillsDir}
	if f := config.UserFile(); f != "" {
		dirs = append(dirs, filepath.Dir(f)) // a file planted there is the next start's configuration
	}
	return hostfns.Deps{KV: e.st, Memories: e.st, Secrets: e.secrets, Jobs: e.jobsDep(),
		PrivateFiles: absPaths(private), PrivateDirs: absPaths(dirs), SharedDirs: absPaths([]string{filepath.Join(e.dataDir, workspaceDir)})}
}

// absPaths makes every non-empty path absolute (against the working
// directory, as the files were opened).
func absPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" {
			continue
		}
		if a, err := filepath.Abs(p); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// config is the configuration in force.
func (e *env) config() *config.Config { return e.now.Load() }

// Close closes what the env opened (the registry, the runtime, the store,
// in that order) and returns what failed. A command that succeeded fails
// with it (closeEnv): a store that could not commit its queued writes
// must not exit 0.
func (e *env) Close(ctx context.Context) error {
	var err error
	if e.live != nil {
		err = errors.Join(err, e.live.Close(ctx))
	}
	if e.rt != nil {
		err = errors.Join(err, e.rt.Close(ctx))
	}
	if e.st != nil {
		err = errors.Join(err, e.st.Close(ctx))
	}
	return err
}

// closeEnv closes e and adds what failed to *err (deferred by commands with
// a named error result).
func closeEnv(ctx context.Context, e *env, err *error) {
	if cerr := e.Close(context.WithoutCancel(ctx)); cerr != nil {
		*err = errors.Join(*err, errs.Wrap(errs.ErrUnavailable, "closing", cerr))
	}
}

// workspaceDir is the directory in buddy's data directory that skills may be
// granted (the embedded defaults grant it): the rest of the data directory
// is never reachable through a grant.
const workspaceDir = "workspace"

// embeddedDefaults is the configuration used when there is no buddy.toml: the
// built-ins read and write a workspace directory inside buddy's data
// directory, memory is on, and nothing reaches the network.
func embeddedDefaults() (*config.Config, error) {
	c := config.Default()
	dir, err := c.DataDir()
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, workspaceDir)
	if err := osfile.PrivateDir(ws); err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "workspace", err)
	}
	c.Skills["read_file"] = config.Skill{AllowedDirectories: []string{ws}}
	c.Skills["write_file"] = config.Skill{AllowedDirectories: []string{ws}}
	c.Skills[skills.MemorySection] = config.Skill{Memory: true}
	return c, nil
}

func guestLogger(w io.Writer) func(string, runtime.Level, string) {
	return func(skill string, level runtime.Level, msg string) {
		fmt.Fprintf(w, "[%s] %s: %s\n", skill, level, strings.TrimRight(msg, "\n"))
	}
}

// prepared is how many instances the runtime keeps ready per module: none
// for a one-call CLI command, the default for a server.
func (a *app) prepared() int {
	if a.longRunning {
		return 0
	}
	return -1
}

// skillsMD is the SKILL.md side of an env: the store, the catalog of its
// active skills, and the conversations they bind.
type skillsMD struct {
	store    *skillmd.Store
	catalog  *skillmd.Catalog
	sessions *skillmd.Sessions
	problems []error
}

// openInstructions deploys the embedded SKILL.md skills (never over the
// user's) and loads the active ones; a skill that does not load is reported
// on w and the others load. It returns nil when [instructions] is disabled.
func openInstructions(ctx context.Context, e *env, w io.Writer) *skillsMD {
	c := e.cfg.Instructions
	if !c.Enabled {
		return nil
	}
	st := skillmd.NewStore(c.SkillsDir)
	if _, err := skillmd.EnsureDefaults(st.Dir()); err != nil && w != nil {
		fmt.Fprintf(w, "warning: deploying the default SKILL.md skills: %s\n", safe(err.Error()))
	}
	skills, problems := st.ListActive(ctx)
	warn := func(problems []error) {
		if w == nil {
			return
		}
		for _, p := range problems {
			fmt.Fprintf(w, "warning: skipping a SKILL.md skill: %s\n", safe(p.Error()))
		}
	}
	warn(problems)
	ws := filepath.Join(e.dataDir, workspaceDir)
	if sec, ok := e.cfg.Skills["read_file"]; ok && len(sec.AllowedDirectories) > 0 {
		ws = sec.AllowedDirectories[0]
	}
	var state catalog.StateStore
	if e.st != nil {
		state = e.st
	}
	sess := skillmd.NewSessions(skillmd.Dirs{Work: ws, Data: e.dataDir}, state)
	return &skillsMD{
		store: st, sessions: sess, problems: problems,
		// A folder added, changed or removed while buddy runs is seen by
		// the next call, as a WebAssembly install is.
		catalog: skillmd.NewCatalog(skills, skillmd.CatalogOptions{Sessions: sess, Source: st,
			OnReload: func(_ []*skillmd.Skill, problems []error) { warn(problems) }}),
	}
}

// union is the catalog the gate wraps: the WebAssembly skills, and the
// SKILL.md skills when enabled (a WebAssembly skill wins a name clash).
func (m *skillsMD) union(wasm catalog.Catalog) catalog.Catalog {
	if m == nil {
		return wasm
	}
	return catalog.NewUnion(wasm, m.catalog)
}

// guard is the gate's Guard: while a SKILL.md skill with permissions is
// active in the call's conversation (its scope), what the call would touch
// must fit the active declarations (skillmd.Sessions.Guard).
func (m *skillsMD) guard() func(ctx context.Context, req approval.Request) error {
	if m == nil {
		return nil
	}
	return func(ctx context.Context, req approval.Request) error {
		return m.sessions.Guard(ctx, skillmd.Call{Scope: req.Scope, Skill: req.Skill, Type: req.Type, Targets: req.Targets, Grant: req.Grant})
	}
}

// newProvider builds the configured LLM provider, or nil when [provider]
// names none. The API key is read from the variable api_key_env names (its
// value is then redacted like a stored secret), or from the secret store
// (api_key_secret) at every request; it is never logged or stored.
func newProvider(p config.Provider, sec *secrets.Store) (agent.Provider, error) {
	if p.Kind == "" {
		return nil, nil
	}
	var key string
	var keyFunc llm.Key
	switch {
	case p.APIKeyEnv != "":
		key = os.Getenv(p.APIKeyEnv)
		if key == "" {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("provider.api_key_env: the environment variable %s is empty or unset", p.APIKeyEnv))
		}
		sec.Also(p.APIKeyEnv, []byte(key))
	case p.APIKeySecret != "":
		name := p.APIKeySecret
		if !sec.Has(name) {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("provider.api_key_secret: the secret %q is not in the secret store: set it with buddy secret set %s", name, name))
		}
		keyFunc = func(ctx context.Context) ([]byte, error) { return sec.Secret(ctx, name) }
	}
	opts := llm.Options{
		BaseURL: p.BaseURL, Model: p.Model, APIKey: key, KeyFunc: keyFunc, Timeout: p.Timeout,
		Temperature: p.Temperature, MaxTokens: p.MaxTokens,
		MaxAnswerBytes: p.MaxAnswerBytes, MaxToolCalls: p.MaxToolCalls,
	}
	switch p.Kind {
	case "openai":
		return openai.New(opts)
	case "anthropic":
		if key == "" && keyFunc == nil {
			return nil, errs.New(errs.ErrConfig, "provider.api_key_env: the Anthropic API needs a key: name the environment variable that holds it, or set api_key_secret")
		}
		return anthropic.New(opts)
	}
	return nil, errs.New(errs.ErrConfig, fmt.Sprintf("provider.kind %q is not known", p.Kind))
}

// contextWindow is the model's window: [provider] context_tokens, else what
// the provider's server says (or its table of known models), else
// agent.DefaultWindow; the log says which.
func contextWindow(ctx context.Context, p config.Provider, prov agent.Provider, log *slog.Logger) int {
	if p.ContextTokens > 0 {
		log.Info("context window", "tokens", p.ContextTokens, "source", "[provider] context_tokens")
		return int(p.ContextTokens)
	}
	if d, ok := prov.(agent.WindowDiscoverer); ok {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := d.DiscoverWindow(ctx)
		if err == nil && w.Tokens > 0 {
			log.Info("context window", "tokens", w.Tokens, "source", w.Source, "model", p.Model)
			return w.Tokens
		}
		if err != nil {
			log.Info("the server did not say the model's context window", "model", p.Model, "err", err)
		}
	}
	log.Warn("context window unknown: assuming a conservative default; set [provider] context_tokens to the model's window",
		"tokens", agent.DefaultWindow, "model", p.Model)
	return agent.DefaultWindow
}

// agentVariant is what differs between the agents of one process: the
// server's turns, a scheduled check's, the heartbeat's.
type agentVariant struct {
	// systemPrompt replaces the configured one when not "".
	systemPrompt string
	// model replaces [provider] model when not "" (heartbeat_model).
	model string
	// lean turns see no history (the heartbeat).
	lean bool
}

// agentFactory builds the provider [provider] names (nil: none) and learns
// its model's context window once, and returns what builds the agent loop
// over a gate: nil without a provider. Every agent is metered by meter
// ([budget], before every request).
func (e *env) agentFactory(ctx context.Context, log *slog.Logger, meter agent.Meter) (func(gate catalog.Skills, v agentVariant) *agent.Agent, error) {
	cfg := e.cfg
	provider, err := newProvider(cfg.Provider, e.secrets)
	if err != nil || provider == nil {
		return func(catalog.Skills, agentVariant) *agent.Agent { return nil }, err
	}
	window := contextWindow(ctx, cfg.Provider, provider, log)
	// What the model sends back is redacted before anything sees it.
	providers := map[string]agent.Provider{cfg.Provider.Model: llm.Redacting(provider, e.secrets)}
	var mu sync.Mutex
	providerFor := func(model string) (agent.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := providers[model]; ok {
			return p, nil
		}
		pc := cfg.Provider
		pc.Model = model
		p, err := newProvider(pc, e.secrets)
		if err != nil {
			return nil, err
		}
		p = llm.Redacting(p, e.secrets)
		providers[model] = p
		return p, nil
	}
	return func(gate catalog.Skills, v agentVariant) *agent.Agent {
		model := cfg.Provider.Model
		if v.model != "" {
			model = v.model
		}
		prov, err := providerFor(model)
		if err != nil {
			log.Error("building the provider", "model", model, "err", err)
			return nil
		}
		system := cfg.Provider.SystemPrompt
		if v.systemPrompt != "" {
			system = v.systemPrompt
		}
		return agent.New(agent.Options{
			Provider: prov, Skills: gate, History: e.st, Logger: log,
			SystemPrompt: system, MaxIterations: cfg.Provider.MaxIterations,
			NewCallID:         func() string { return server.NewCallID() },
			InstructionTokens: cfg.Instructions.PromptTokens,
			Window:            window, Reserve: int(cfg.Provider.MaxTokens), Model: model,
			PriceInPerMTok: cfg.Provider.PricePerMtokIn, PriceOutPerMTok: cfg.Provider.PricePerMtokOut,
			Usage: e.st, OnCompaction: compactionRecorder(e.st, log), Meter: meter, Lean: v.lean,
		})
	}, nil
}
