// Package config reads buddy.toml: the operator's grants per skill, limits,
// storage, server and provider settings. Parsing is strict: every unknown key
// and invalid value is reported with its key path and line, and nothing is
// silently skipped (a directory that does not exist is an error).
//
//	path, err := config.Find(flagPath)   // --config, $BUDDY_CONFIG, $XDG_CONFIG_HOME/buddy/buddy.toml
//	cfg, err := config.Load(path)        // path "" = the embedded defaults
//	sk, ok := cfg.Skills["read_file"]    // absent = the built-in is not registered
//
// buddy.example.toml documents every option; docs/CONFIG.md states the rules.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/hostport"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/base/rules"
	"github.com/buddy-run/buddy/internal/base/tomlx"
	"github.com/buddy-run/buddy/internal/secrets"
)

// Approval policies (docs/CONFIG.md, "Approval").
const (
	ApprovalAlways = "always" // ask on every call
	ApprovalOnce   = "once"   // ask on the first call per conversation
	ApprovalTrust  = "trust"  // never ask
)

// Config is a parsed, validated buddy.toml.
type Config struct {
	// Path is the file it came from; "" for the embedded defaults.
	Path     string
	Server   Server
	Provider Provider
	Storage  Storage
	Limits   Limits
	Approval Approval
	MCP      MCP
	// Instructions is [instructions]: SKILL.md skills (package
	// internal/skills/skillmd).
	Instructions Instructions
	// Scheduler is [scheduler]: reminders, checks and the heartbeat.
	Scheduler Scheduler
	// Budget is [budget]: caps on what the model may spend.
	Budget Budget
	// Skills are the [skills.NAME] sections by name. A built-in is registered
	// only when its section is present ("memory" enables the four memory
	// skills); an installed skill without a section runs with no capability.
	Skills map[string]Skill
	// Channels are the [channels.NAME] sections by name: the chat channels
	// buddy serve runs (docs/CHANNELS.md). A channel runs only when its
	// section is present.
	Channels map[string]Channel
}

// Channel is one [channels.NAME] section: a chat platform buddy serve
// polls, whose adapter is the built-in of that name.
type Channel struct {
	// Credential names the secret holding the bot's token (`buddy secret
	// set NAME`); default the channel's name.
	Credential string
	// APIBase is the platform's API root; default the platform's own
	// (https://api.telegram.org). http:// only for a loopback address.
	APIBase string
	// DMPolicy is who may talk to buddy in a direct chat: DMPolicyPairing
	// (the default: a stranger gets a code the owner approves),
	// DMPolicyAllowlist (only AllowFrom) or DMPolicyOpen (anyone).
	DMPolicy string
	// AllowFrom are the platform's ids always allowed: users (positive) in
	// direct chats, and groups (negative ids, on Telegram) where anyone may
	// talk. Groups are off unless listed here.
	AllowFrom []int64
	// PollTimeout is how long one long poll waits for updates; default
	// 25s, at most 50s.
	PollTimeout time.Duration
	// Adapter is the path of a channel adapter's module (docs/CHANNELS.md),
	// its skill.toml beside it; "" = the built-in adapter of the channel's
	// name. A channel buddy has no built-in adapter for needs one, and
	// api_base.
	Adapter string
}

// [channels.NAME] dm_policy values.
const (
	DMPolicyPairing   = "pairing"
	DMPolicyAllowlist = "allowlist"
	DMPolicyOpen      = "open"
)

// KnownChannels are the channel names buddy has an adapter for, with the
// platform's API root.
var KnownChannels = map[string]string{
	"telegram": "https://api.telegram.org",
}

// DefaultPollTimeout is [channels.NAME] poll_timeout when unset.
const DefaultPollTimeout = 25 * time.Second

// Server is [server]: the chat server (`buddy serve`).
type Server struct {
	Listen          string        // host:port; default 127.0.0.1:7700
	TokenFile       string        // file holding the bearer token; default <data_dir>/token
	AllowedOrigins  []string      // extra Origins allowed besides the server's own
	MaxMessageBytes int64         // WebSocket message cap; default 1 MiB
	WriteTimeout    time.Duration // per WebSocket write; default 10s
	// AllowRemote must be true to listen on an address that is not loopback.
	AllowRemote bool
	// AllowedHosts are Host names served besides loopback ones (DNS
	// rebinding: any other Host gets 403).
	AllowedHosts []string
	// MaxConnections caps concurrent WebSocket connections; default 2048.
	MaxConnections int
}

// Provider is [provider]: the LLM endpoint. Kind "" means none: the server still
// runs and clients can invoke skills directly.
type Provider struct {
	Kind      string // "", "openai" (any OpenAI-compatible endpoint) or "anthropic"
	BaseURL   string
	Model     string
	APIKeyEnv string // name of the environment variable holding the key
	// APIKeySecret names the key in buddy's secret store (buddy secret
	// set NAME); at most one of APIKeyEnv and APIKeySecret is set.
	APIKeySecret  string
	Timeout       time.Duration
	MaxIterations int
	// Temperature is sent when set (0–2).
	Temperature *float64
	// MaxTokens caps an answer; 0 = the provider's default (anthropic: 4096).
	MaxTokens int64
	// SystemPrompt replaces the built-in system prompt when not "".
	SystemPrompt string
	// MaxAnswerBytes caps what one model answer may stream: its text and
	// its tool calls' names and arguments together, and, separately, the
	// reasoning text buddy reads but does not keep; default 1 MiB.
	MaxAnswerBytes int64
	// MaxToolCalls caps the tool calls of one answer; default 64.
	MaxToolCalls int
	// ContextTokens is the model's context window; 0 = discovered from
	// the server at start, else a table of known models, else 8192.
	ContextTokens int64
	// PricePerMtokIn and PricePerMtokOut, when set, are the dollars a
	// million prompt and completion tokens cost (usage shows money too).
	PricePerMtokIn, PricePerMtokOut float64
}

// Storage is [storage].
type Storage struct {
	DataDir string // default $XDG_DATA_HOME/buddy
	Path    string // the database; default <data_dir>/buddy.db
}

// Limits is [limits]: ceilings for every skill and defaults for the built-ins.
type Limits struct {
	MaxFuel       uint64        // a manifest asking for more gets this; default 1e10
	MaxMemoryMB   int           // default 256
	MaxTimeout    time.Duration // default 5m
	MaxConcurrent int           // concurrent skill calls; default 2×CPUs
	MaxReadBytes  int64         // file reads; default 10 MiB
	MaxWriteBytes int64         // file writes; default 10 MiB
	MaxFetchBytes int64         // HTTP bodies after decompression; default 5 MiB
	FetchTimeout  time.Duration // one deadline per fetch; default 10s
}

// Approval is [approval].
type Approval struct {
	Timeout time.Duration // no answer within it = denied; default 60s
	// AfterPrivateRead is what a network skill does in a conversation that
	// has read private data (files, memory): "ask" (the default) asks
	// whatever its policy; "allow" follows its policy.
	AfterPrivateRead string
}

// Values of [approval] after_private_read.
const (
	AfterPrivateReadAsk   = "ask"
	AfterPrivateReadAllow = "allow"
)

// MCP is [mcp]: the Model Context Protocol front end (`buddy mcp`, /mcp).
type MCP struct {
	// Approval is who is asked when the MCP client cannot ask by
	// elicitation: MCPApprovalElicit (default: the client's form, else
	// deny), MCPApprovalTerminal, MCPApprovalWeb or MCPApprovalDeny.
	Approval string
}

// Instructions is [instructions]: SKILL.md skill folders (instruction,
// template, composite and script skills) read from SkillsDir.
type Instructions struct {
	// Enabled loads the SKILL.md skills and deploys the embedded defaults;
	// default true. When false none is loaded and no skill_ tool is offered.
	Enabled bool
	// SkillsDir holds one folder per skill (<skills_dir>/<name>/SKILL.md);
	// default <data_dir>/instructions.
	SkillsDir string
	// PromptTokens caps the list of skills (names and descriptions) in the
	// agent's system prompt; default 2000 (about 8,000 characters).
	PromptTokens int
}

// Scheduler is [scheduler]: the jobs `buddy serve` runs (internal/scheduler).
type Scheduler struct {
	// Timezone is the IANA zone cron expressions and days are read in;
	// "" = the machine's (Local).
	Timezone string
	// Heartbeat is how often HEARTBEAT.md is read and, when it holds a
	// checklist, run as a lean turn; 0 = off (the default).
	Heartbeat time.Duration
	// HeartbeatModel, when set, is the model the heartbeat's turns use
	// instead of [provider] model.
	HeartbeatModel string
}

// Location is the scheduler's time zone.
func (s Scheduler) Location() (*time.Location, error) {
	if s.Timezone == "" {
		return time.Local, nil
	}
	return time.LoadLocation(s.Timezone)
}

// MinHeartbeat is the shortest [scheduler] heartbeat.
const MinHeartbeat = time.Minute

// Budget is [budget]: caps on the model's spend, checked before every
// request (internal/budget). 0 = no cap.
type Budget struct {
	TokensPerTurn      int64
	TokensPerJobPerDay int64
	TokensPerDay       int64
	TokensPerMonth     int64
	// The same in dollars; they need [provider] prices.
	USDPerTurn      float64
	USDPerJobPerDay float64
	USDPerDay       float64
	USDPerMonth     float64
}

// DefaultInstructionTokens is [instructions] prompt_tokens when unset.
const DefaultInstructionTokens = 2000

// [mcp] approval values.
const (
	MCPApprovalElicit   = "elicit"
	MCPApprovalTerminal = "terminal"
	MCPApprovalWeb      = "web"
	MCPApprovalDeny     = "deny"
)

// Skill is one [skills.NAME] section.
type Skill struct {
	// AllowedDirectories apply to whatever file access the skill declares:
	// reads for read_file, writes for write_file, both for a skill declaring both.
	AllowedDirectories []string
	ReadDirectories    []string // reads only
	WriteDirectories   []string // writes only
	AllowedDomains     []string // network allowlist, canonical (package hostfns/allow, parsed as allow.Operator)
	Env                []string // environment variable names
	Memory             bool     // its own key-value and memory namespace
	// Credentials are the secrets (names in buddy's secret store) the
	// skill may have sent for it, where its skill.toml declares them.
	Credentials []string
	Approval    string // "" = the default for its permission level
	MaxBytes    int64  // overrides the [limits] read/write/fetch cap for this skill
	Timeout     time.Duration
	Fuel        uint64 // overrides the manifest's fuel (up to limits.max_fuel)
}

// Defaults.
const (
	DefaultListen          = "127.0.0.1:7700"
	DefaultMaxMessageBytes = 1 << 20
	DefaultWriteTimeout    = 10 * time.Second
	DefaultMaxConnections  = 2048
	DefaultMaxFuel         = 10_000_000_000
	DefaultMaxMemoryMB     = 256
	DefaultMaxTimeout      = 5 * time.Minute
	DefaultMaxReadBytes    = 10 << 20
	DefaultMaxWriteBytes   = 10 << 20
	DefaultMaxFetchBytes   = 5 << 20
	DefaultFetchTimeout    = 10 * time.Second
	DefaultApprovalTimeout = 60 * time.Second
	DefaultProviderTimeout = 2 * time.Minute
	DefaultMaxIterations   = 10
	// DefaultMaxAnswerBytes is [provider] max_answer_bytes when unset: about
	// twice the longest answer a model of today can write (128k output
	// tokens of about 4 bytes each), and little enough to keep and send back.
	DefaultMaxAnswerBytes = 1 << 20
	// DefaultMaxToolCalls is [provider] max_tool_calls when unset: far more
	// than a model asks for at once, few enough to read through.
	DefaultMaxToolCalls = 64
	// Base URLs when [provider] base_url is left out: each SDK's own form
	// (openai's ends in /v1, anthropic's is the API root).
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// MaxFileBytes caps buddy.toml (a real one is a few KiB).
	MaxFileBytes = 1 << 20
)

// file mirrors buddy.toml for strict decoding.
type file struct {
	Server *struct {
		Listen          *string  `toml:"listen"`
		TokenFile       *string  `toml:"token_file"`
		AllowedOrigins  []string `toml:"allowed_origins"`
		MaxMessageBytes *int64   `toml:"max_message_bytes"`
		WriteTimeout    *string  `toml:"write_timeout"`
		AllowRemote     *bool    `toml:"allow_remote"`
		AllowedHosts    []string `toml:"allowed_hosts"`
		MaxConnections  *int64   `toml:"max_connections"`
	} `toml:"server"`
	Provider *struct {
		Kind           *string  `toml:"kind"`
		BaseURL        *string  `toml:"base_url"`
		Model          *string  `toml:"model"`
		APIKeyEnv      *string  `toml:"api_key_env"`
		APIKeySecret   *string  `toml:"api_key_secret"`
		Timeout        *string  `toml:"timeout"`
		MaxIterations  *int64   `toml:"max_iterations"`
		Temperature    *float64 `toml:"temperature"`
		MaxTokens      *int64   `toml:"max_tokens"`
		SystemPrompt   *string  `toml:"system_prompt"`
		MaxAnswerBytes *int64   `toml:"max_answer_bytes"`
		MaxToolCalls   *int64   `toml:"max_tool_calls"`
		ContextTokens  *int64   `toml:"context_tokens"`
		PriceIn        *float64 `toml:"price_per_mtok_in"`
		PriceOut       *float64 `toml:"price_per_mtok_out"`
	} `toml:"provider"`
	Storage *struct {
		DataDir *string `toml:"data_dir"`
		Path    *string `toml:"path"`
	} `toml:"storage"`
	Limits *struct {
		MaxFuel       *int64  `toml:"max_fuel"`
		MaxMemoryMB   *int64  `toml:"max_memory_mb"`
		MaxTimeout    *string `toml:"max_timeout"`
		MaxConcurrent *int64  `toml:"max_concurrent"`
		MaxReadBytes  *int64  `toml:"max_read_bytes"`
		MaxWriteBytes *int64  `toml:"max_write_bytes"`
		MaxFetchBytes *int64  `toml:"max_fetch_bytes"`
		FetchTimeout  *string `toml:"fetch_timeout"`
	} `toml:"limits"`
	Approval *struct {
		Timeout          *string `toml:"timeout"`
		AfterPrivateRead *string `toml:"after_private_read"`
	} `toml:"approval"`
	MCP *struct {
		Approval *string `toml:"approval"`
	} `toml:"mcp"`
	Instructions *struct {
		Enabled      *bool   `toml:"enabled"`
		SkillsDir    *string `toml:"skills_dir"`
		PromptTokens *int64  `toml:"prompt_tokens"`
	} `toml:"instructions"`
	Scheduler *struct {
		Timezone       *string `toml:"timezone"`
		Heartbeat      *string `toml:"heartbeat"`
		HeartbeatModel *string `toml:"heartbeat_model"`
	} `toml:"scheduler"`
	Budget *struct {
		TokensPerTurn      *int64   `toml:"tokens_per_turn"`
		TokensPerJobPerDay *int64   `toml:"tokens_per_job_per_day"`
		TokensPerDay       *int64   `toml:"tokens_per_day"`
		TokensPerMonth     *int64   `toml:"tokens_per_month"`
		USDPerTurn         *float64 `toml:"usd_per_turn"`
		USDPerJobPerDay    *float64 `toml:"usd_per_job_per_day"`
		USDPerDay          *float64 `toml:"usd_per_day"`
		USDPerMonth        *float64 `toml:"usd_per_month"`
	} `toml:"budget"`
	Skills   map[string]skillFile   `toml:"skills"`
	Channels map[string]channelFile `toml:"channels"`
}

type channelFile struct {
	Credential  *string `toml:"credential"`
	APIBase     *string `toml:"api_base"`
	DMPolicy    *string `toml:"dm_policy"`
	AllowFrom   []int64 `toml:"allow_from"`
	PollTimeout *string `toml:"poll_timeout"`
	Adapter     *string `toml:"adapter"`
}

type skillFile struct {
	AllowedDirectories []string `toml:"allowed_directories"`
	ReadDirectories    []string `toml:"read_directories"`
	WriteDirectories   []string `toml:"write_directories"`
	AllowedDomains     []string `toml:"allowed_domains"`
	Env                []string `toml:"env"`
	Memory             bool     `toml:"memory"`
	Credentials        []string `toml:"credentials"`
	Approval           *string  `toml:"approval"`
	MaxBytes           *int64   `toml:"max_bytes"`
	Timeout            *string  `toml:"timeout"`
	Fuel               *int64   `toml:"fuel"`
}

// Default returns the configuration used when no buddy.toml exists: storage
// under the XDG data directory and no skill enabled. (cmd/buddy layers its own
// starter grants on top.)
func Default() *Config {
	c := &Config{Skills: map[string]Skill{}, Channels: map[string]Channel{}, Instructions: Instructions{Enabled: true}}
	c.fillDefaults()
	return c
}

func (c *Config) fillDefaults() {
	if c.Server.Listen == "" {
		c.Server.Listen = DefaultListen
	}
	if c.Server.MaxMessageBytes == 0 {
		c.Server.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Server.MaxConnections == 0 {
		c.Server.MaxConnections = DefaultMaxConnections
	}
	if c.Server.WriteTimeout == 0 {
		c.Server.WriteTimeout = DefaultWriteTimeout
	}
	if c.Provider.Timeout == 0 {
		c.Provider.Timeout = DefaultProviderTimeout
	}
	if c.Provider.MaxIterations == 0 {
		c.Provider.MaxIterations = DefaultMaxIterations
	}
	if c.Provider.MaxAnswerBytes == 0 {
		c.Provider.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if c.Provider.MaxToolCalls == 0 {
		c.Provider.MaxToolCalls = DefaultMaxToolCalls
	}
	if c.Storage.DataDir == "" {
		c.Storage.DataDir = defaultDataDir()
	}
	if c.Storage.Path == "" {
		c.Storage.Path = filepath.Join(c.Storage.DataDir, "buddy.db")
	}
	if c.Server.TokenFile == "" {
		c.Server.TokenFile = filepath.Join(c.Storage.DataDir, "token")
	}
	l := &c.Limits
	if l.MaxFuel == 0 {
		l.MaxFuel = DefaultMaxFuel
	}
	if l.MaxMemoryMB == 0 {
		l.MaxMemoryMB = DefaultMaxMemoryMB
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = DefaultMaxTimeout
	}
	if l.MaxConcurrent == 0 {
		l.MaxConcurrent = 2 * goruntime.GOMAXPROCS(0)
	}
	if l.MaxReadBytes == 0 {
		l.MaxReadBytes = DefaultMaxReadBytes
	}
	if l.MaxWriteBytes == 0 {
		l.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if l.MaxFetchBytes == 0 {
		l.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if l.FetchTimeout == 0 {
		l.FetchTimeout = DefaultFetchTimeout
	}
	if c.Approval.Timeout == 0 {
		c.Approval.Timeout = DefaultApprovalTimeout
	}
	if c.Approval.AfterPrivateRead == "" {
		c.Approval.AfterPrivateRead = AfterPrivateReadAsk
	}
	if c.MCP.Approval == "" {
		c.MCP.Approval = MCPApprovalElicit
	}
	if c.Instructions.SkillsDir == "" {
		c.Instructions.SkillsDir = filepath.Join(c.Storage.DataDir, "instructions")
	}
	if c.Instructions.PromptTokens == 0 {
		c.Instructions.PromptTokens = DefaultInstructionTokens
	}
	if c.Skills == nil {
		c.Skills = map[string]Skill{}
	}
	if c.Channels == nil {
		c.Channels = map[string]Channel{}
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "buddy")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "buddy")
	}
	return filepath.Join(os.TempDir(), "buddy")
}

// Find returns the configuration file to use: flagPath if set, else
// $BUDDY_CONFIG, else $XDG_CONFIG_HOME/buddy/buddy.toml (~/.config when
// unset). It returns "" when the implicit place has no file (the embedded
// defaults apply); an explicit path that does not exist is an error.
//
// ./buddy.toml is not read unless named: the file grants capabilities, and a
// directory one merely works in (a cloned repository, an unpacked archive, a
// shared directory) is not the operator's to decide with. LocalFile reports
// one so that the CLI can say it was skipped.
func Find(flagPath string) (string, error) {
	for _, explicit := range []struct{ path, from string }{{flagPath, "--config"}, {os.Getenv("BUDDY_CONFIG"), "$BUDDY_CONFIG"}} {
		if explicit.path == "" {
			continue
		}
		fi, err := os.Stat(explicit.path)
		if err != nil {
			return "", errs.Wrap(errs.ErrConfig, fmt.Sprintf("%s names %s", explicit.from, explicit.path), err)
		}
		if fi.IsDir() {
			return "", errs.New(errs.ErrConfig, fmt.Sprintf("%s names %s, a directory", explicit.from, explicit.path))
		}
		return explicit.path, nil
	}
	if p := UserFile(); p != "" {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", nil
}

// UserFile is the implicit place of the configuration file,
// $XDG_CONFIG_HOME/buddy/buddy.toml (~/.config when unset), whether or not
// a file is there; "" when there is no home to put it in. What is written
// there decides what skills may do at the next start: no skill may write
// in its directory (hostfns.Deps.PrivateDirs).
func UserFile() string {
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(xdg) {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		xdg = filepath.Join(h, ".config")
	}
	return filepath.Join(xdg, "buddy", "buddy.toml")
}

// LocalFile is the buddy.toml of the current directory, which Find does not
// pick; it returns "" when there is none (or it is not a file).
func LocalFile() string {
	if fi, err := os.Stat("buddy.toml"); err == nil && !fi.IsDir() {
		return "buddy.toml"
	}
	return ""
}

// Load reads and validates a configuration file; path "" gives Default().
//
// The file must be a regular file of at most MaxFileBytes of UTF-8, owned by
// the user running buddy (or root) and not writable by group or others: a
// file someone else can change must not widen grants.
func Load(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := osfile.ReadPrivate(path, MaxFileBytes)
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "config file", err)
	}
	if err := osfile.CheckUTF8(path, data); err != nil {
		// A configuration problem like any other, with its line.
		var bad *osfile.InvalidUTF8Error
		if errors.As(err, &bad) {
			line := 1 + bytes.Count(data[:bad.Offset], []byte("\n"))
			col := bad.Offset - bytes.LastIndexByte(data[:bad.Offset], '\n')
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("%s: line %d, column %d: not valid UTF-8 (invalid byte 0x%02x at offset %d): a buddy.toml is UTF-8 text",
				path, line, col, data[bad.Offset], bad.Offset))
		}
		return nil, errs.Wrap(errs.ErrConfig, "config file", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse validates a buddy.toml document. Errors wrap errs.ErrConfig and name
// the key path and line of every problem found.
func Parse(data []byte) (*Config, error) {
	var f file
	idx, err := tomlx.Decode(data, &f)
	if err != nil {
		return nil, err
	}
	v := &validator{tomlx.NewValidator(idx)}
	c := &Config{Skills: map[string]Skill{}, Instructions: Instructions{Enabled: true}}

	if s := f.Server; s != nil {
		c.Server.Listen = v.str(s.Listen, "server.listen")
		if l := c.Server.Listen; strings.TrimSpace(l) != "" && !validListen(l) {
			v.fail("server.listen", "%q must be host:port (port 0-65535)", l)
		}
		c.Server.TokenFile = v.path(s.TokenFile, "server.token_file")
		for i, o := range s.AllowedOrigins {
			// The server's own parser (internal/base/hostport): an
			// entry it could never match is refused here, with its line.
			if _, err := hostport.ParseOrigin(o); err != nil {
				v.fail(fmt.Sprintf("server.allowed_origins[%d]", i), "%q must be an origin like https://host:port: %v", o, err)
			}
		}
		c.Server.AllowedOrigins = s.AllowedOrigins
		c.Server.MaxMessageBytes = v.positive(s.MaxMessageBytes, "server.max_message_bytes", 1<<30)
		c.Server.WriteTimeout = v.duration(s.WriteTimeout, "server.write_timeout")
		if s.AllowRemote != nil {
			c.Server.AllowRemote = *s.AllowRemote
		}
		for i, h := range s.AllowedHosts {
			if _, err := hostport.ParseAllowedHost(h); err != nil {
				v.fail(fmt.Sprintf("server.allowed_hosts[%d]", i), "%q must be a host name or IP address, without scheme or port: %v", h, err)
				continue
			}
			c.Server.AllowedHosts = append(c.Server.AllowedHosts, strings.ToLower(h))
		}
		c.Server.MaxConnections = int(v.positive(s.MaxConnections, "server.max_connections", 1<<20))
	}
	if p := f.Provider; p != nil {
		c.Provider.Kind = v.str(p.Kind, "provider.kind")
		switch c.Provider.Kind {
		case "", "openai", "anthropic":
		default:
			v.fail("provider.kind", "%q must be \"openai\" (any OpenAI-compatible endpoint) or \"anthropic\"", c.Provider.Kind)
		}
		c.Provider.BaseURL = v.str(p.BaseURL, "provider.base_url")
		if u := c.Provider.BaseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			v.fail("provider.base_url", "%q must be an http(s) URL", u)
		}
		c.Provider.Model = v.str(p.Model, "provider.model")
		c.Provider.APIKeyEnv = v.str(p.APIKeyEnv, "provider.api_key_env")
		if e := c.Provider.APIKeyEnv; e != "" && !rules.ValidEnvName(e) {
			v.fail("provider.api_key_env", "%q is not an environment variable name", e)
		}
		c.Provider.APIKeySecret = v.str(p.APIKeySecret, "provider.api_key_secret")
		switch n := c.Provider.APIKeySecret; {
		case n != "" && !secrets.ValidName(n):
			v.fail("provider.api_key_secret", "%q is not a secret name: %s", n, secrets.NameRule)
		case n != "" && c.Provider.APIKeyEnv != "":
			v.fail("provider.api_key_secret", "set api_key_secret or api_key_env, not both")
		}
		c.Provider.Timeout = v.duration(p.Timeout, "provider.timeout")
		c.Provider.MaxIterations = int(v.positive(p.MaxIterations, "provider.max_iterations", 1000))
		if c.Provider.Kind != "" && p.Model == nil {
			v.fail("provider.model", "required when provider.kind is set")
		}
		if c.Provider.BaseURL == "" {
			switch c.Provider.Kind {
			case "openai":
				c.Provider.BaseURL = DefaultOpenAIBaseURL
			case "anthropic":
				c.Provider.BaseURL = DefaultAnthropicBaseURL
			}
		}
		if t := p.Temperature; t != nil {
			if *t < 0 || *t > 2 {
				v.fail("provider.temperature", "%v must be between 0 and 2", *t)
			} else {
				c.Provider.Temperature = t
			}
		}
		c.Provider.MaxTokens = v.positive(p.MaxTokens, "provider.max_tokens", 1<<24)
		if p.SystemPrompt != nil {
			c.Provider.SystemPrompt = *p.SystemPrompt
		}
		c.Provider.MaxAnswerBytes = v.positive(p.MaxAnswerBytes, "provider.max_answer_bytes", 1<<30)
		c.Provider.MaxToolCalls = int(v.positive(p.MaxToolCalls, "provider.max_tool_calls", 1024))
		c.Provider.ContextTokens = v.positive(p.ContextTokens, "provider.context_tokens", 1<<24)
		if p.ContextTokens != nil && *p.ContextTokens > 0 && *p.ContextTokens < 512 {
			v.fail("provider.context_tokens", "%d is too small a window: at least 512 tokens", *p.ContextTokens)
		}
		if c.Provider.ContextTokens != 0 && c.Provider.MaxTokens*2 > c.Provider.ContextTokens {
			v.fail("provider.max_tokens", "%d leaves too little of the %d-token window (provider.context_tokens) for the conversation: at most half of it", c.Provider.MaxTokens, c.Provider.ContextTokens)
		}
		for _, pr := range []struct {
			v   *float64
			key string
			dst *float64
		}{{p.PriceIn, "provider.price_per_mtok_in", &c.Provider.PricePerMtokIn}, {p.PriceOut, "provider.price_per_mtok_out", &c.Provider.PricePerMtokOut}} {
			if pr.v == nil {
				continue
			}
			if *pr.v < 0 || *pr.v > 10000 || *pr.v != *pr.v {
				v.fail(pr.key, "%v must be a price in dollars per million tokens, from 0 to 10000", *pr.v)
				continue
			}
			*pr.dst = *pr.v
		}
	}
	if s := f.Storage; s != nil {
		c.Storage.DataDir = v.path(s.DataDir, "storage.data_dir")
		c.Storage.Path = v.path(s.Path, "storage.path")
	}
	if l := f.Limits; l != nil {
		c.Limits.MaxFuel = uint64(v.positive(l.MaxFuel, "limits.max_fuel", rules.MaxFuel))
		c.Limits.MaxMemoryMB = int(v.positive(l.MaxMemoryMB, "limits.max_memory_mb", rules.MaxMemoryMB))
		if l.MaxMemoryMB != nil && *l.MaxMemoryMB == 1 {
			v.fail("limits.max_memory_mb", "must be at least 2 (the Extism kernel alone takes 1 MiB)")
		}
		c.Limits.MaxTimeout = v.duration(l.MaxTimeout, "limits.max_timeout")
		c.Limits.MaxConcurrent = int(v.positive(l.MaxConcurrent, "limits.max_concurrent", 1024))
		c.Limits.MaxReadBytes = v.positive(l.MaxReadBytes, "limits.max_read_bytes", 1<<30)
		c.Limits.MaxWriteBytes = v.positive(l.MaxWriteBytes, "limits.max_write_bytes", 1<<30)
		c.Limits.MaxFetchBytes = v.positive(l.MaxFetchBytes, "limits.max_fetch_bytes", 1<<30)
		c.Limits.FetchTimeout = v.duration(l.FetchTimeout, "limits.fetch_timeout")
	}
	if a := f.Approval; a != nil {
		c.Approval.Timeout = v.duration(a.Timeout, "approval.timeout")
		if a.AfterPrivateRead != nil {
			switch *a.AfterPrivateRead {
			case AfterPrivateReadAsk, AfterPrivateReadAllow:
				c.Approval.AfterPrivateRead = *a.AfterPrivateRead
			default:
				v.fail("approval.after_private_read", "%q must be \"ask\" or \"allow\"", *a.AfterPrivateRead)
			}
		}
	}
	if m := f.MCP; m != nil && m.Approval != nil {
		switch a := *m.Approval; a {
		case MCPApprovalElicit, MCPApprovalTerminal, MCPApprovalWeb, MCPApprovalDeny:
			c.MCP.Approval = a
		default:
			v.fail("mcp.approval", "%q must be \"elicit\", \"terminal\", \"web\" or \"deny\"", a)
		}
	}
	if in := f.Instructions; in != nil {
		if in.Enabled != nil {
			c.Instructions.Enabled = *in.Enabled
		}
		c.Instructions.SkillsDir = v.path(in.SkillsDir, "instructions.skills_dir")
		c.Instructions.PromptTokens = int(v.positive(in.PromptTokens, "instructions.prompt_tokens", 1<<20))
	}
	if sc := f.Scheduler; sc != nil {
		c.Scheduler.Timezone = v.str(sc.Timezone, "scheduler.timezone")
		if tz := c.Scheduler.Timezone; tz != "" {
			if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
				v.fail("scheduler.timezone", "%q is not an IANA time zone name (like \"Europe/Paris\" or \"UTC\"): leave the key out for the machine's", tz)
			}
		}
		c.Scheduler.Heartbeat = v.duration(sc.Heartbeat, "scheduler.heartbeat")
		if hb := c.Scheduler.Heartbeat; hb != 0 && hb < MinHeartbeat {
			v.fail("scheduler.heartbeat", "%s is too often: at least %s", hb, MinHeartbeat)
		}
		c.Scheduler.HeartbeatModel = v.str(sc.HeartbeatModel, "scheduler.heartbeat_model")
	}
	if b := f.Budget; b != nil {
		c.Budget.TokensPerTurn = v.positive(b.TokensPerTurn, "budget.tokens_per_turn", 1<<40)
		c.Budget.TokensPerJobPerDay = v.positive(b.TokensPerJobPerDay, "budget.tokens_per_job_per_day", 1<<40)
		c.Budget.TokensPerDay = v.positive(b.TokensPerDay, "budget.tokens_per_day", 1<<40)
		c.Budget.TokensPerMonth = v.positive(b.TokensPerMonth, "budget.tokens_per_month", 1<<40)
		priced := c.Provider.PricePerMtokIn > 0 || c.Provider.PricePerMtokOut > 0
		for _, u := range []struct {
			v   *float64
			key string
			dst *float64
		}{{b.USDPerTurn, "budget.usd_per_turn", &c.Budget.USDPerTurn}, {b.USDPerJobPerDay, "budget.usd_per_job_per_day", &c.Budget.USDPerJobPerDay},
			{b.USDPerDay, "budget.usd_per_day", &c.Budget.USDPerDay}, {b.USDPerMonth, "budget.usd_per_month", &c.Budget.USDPerMonth}} {
			if u.v == nil {
				continue
			}
			switch {
			case !(*u.v > 0 && *u.v <= 1e6):
				v.fail(u.key, "%v must be an amount in dollars, more than 0 and at most 1000000 (leave the key out for no cap)", *u.v)
			case !priced:
				v.fail(u.key, "a cap in dollars needs the model's prices: set [provider] price_per_mtok_in and price_per_mtok_out")
			default:
				*u.dst = *u.v
			}
		}
	}
	names := make([]string, 0, len(f.Skills))
	for name := range f.Skills {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sf := f.Skills[name]
		at := func(key string) string { return "skills." + name + "." + key }
		if !rules.ValidSkillName(name) {
			v.fail("skills."+name, "%q is not a skill name ([a-z][a-z0-9_]{0,63})", name)
			continue
		}
		sk := Skill{Memory: sf.Memory}
		sk.AllowedDirectories = v.dirs(sf.AllowedDirectories, at("allowed_directories"))
		sk.ReadDirectories = v.dirs(sf.ReadDirectories, at("read_directories"))
		sk.WriteDirectories = v.dirs(sf.WriteDirectories, at("write_directories"))
		for i, d := range sf.AllowedDomains {
			// The grammar the intersection and the fetcher use; an exact
			// entry here is what lets a host reach private addresses.
			e, err := allow.Parse(d, allow.Operator)
			if err != nil {
				v.fail(fmt.Sprintf("%s[%d]", at("allowed_domains"), i), "%v", err)
				continue
			}
			sk.AllowedDomains = append(sk.AllowedDomains, e.String())
		}
		for i, e := range sf.Env {
			if !rules.ValidEnvName(e) {
				v.fail(fmt.Sprintf("%s[%d]", at("env"), i), "%q is not an environment variable name", e)
				continue
			}
			sk.Env = append(sk.Env, e)
		}
		for i, n := range sf.Credentials {
			switch {
			case !secrets.ValidName(n):
				v.fail(fmt.Sprintf("%s[%d]", at("credentials"), i), "%q is not a secret name: %s", n, secrets.NameRule)
			case slices.Contains(sk.Credentials, n):
				v.fail(fmt.Sprintf("%s[%d]", at("credentials"), i), "%q is listed twice", n)
			default:
				sk.Credentials = append(sk.Credentials, n)
			}
		}
		if sf.Approval != nil {
			switch *sf.Approval {
			case ApprovalAlways, ApprovalOnce, ApprovalTrust:
				sk.Approval = *sf.Approval
			default:
				v.fail(at("approval"), "%q must be \"always\", \"once\" or \"trust\"", *sf.Approval)
			}
		}
		sk.MaxBytes = v.positive(sf.MaxBytes, at("max_bytes"), 1<<30)
		sk.Timeout = v.duration(sf.Timeout, at("timeout"))
		sk.Fuel = uint64(v.positive(sf.Fuel, at("fuel"), rules.MaxFuel))
		c.Skills[name] = sk
	}
	c.Channels = v.channels(f.Channels)
	if err := v.Err(); err != nil {
		return nil, err
	}
	c.fillDefaults()
	return c, nil
}

// channels validates the [channels.NAME] sections.
func (v *validator) channels(sections map[string]channelFile) map[string]Channel {
	out := map[string]Channel{}
	names := make([]string, 0, len(sections))
	for name := range sections {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		cf := sections[name]
		at := func(key string) string { return "channels." + name + "." + key }
		base, known := KnownChannels[name]
		if !known && (cf.Adapter == nil || cf.APIBase == nil) {
			known := make([]string, 0, len(KnownChannels))
			for k := range KnownChannels {
				known = append(known, k)
			}
			slices.Sort(known)
			v.fail("channels."+name, "%q is not a channel buddy has a built-in adapter for (known: %s): another channel needs adapter (its module) and api_base", name, strings.Join(known, ", "))
			continue
		}
		if !validChannelName(name) {
			v.fail("channels."+name, "%q is not a channel name: lower-case letters, digits, - and _, at most 32", name)
			continue
		}
		ch := Channel{Credential: name, APIBase: base, DMPolicy: DMPolicyPairing, PollTimeout: DefaultPollTimeout}
		if cf.Adapter != nil {
			ch.Adapter = v.path(cf.Adapter, at("adapter"))
			if ch.Adapter != "" {
				if fi, err := os.Stat(ch.Adapter); err != nil || !fi.Mode().IsRegular() {
					v.fail(at("adapter"), "%s is not a file: it names a channel adapter's module, its skill.toml beside it", ch.Adapter)
				} else if _, err := os.Stat(filepath.Join(filepath.Dir(ch.Adapter), "skill.toml")); err != nil {
					v.fail(at("adapter"), "no skill.toml beside %s", ch.Adapter)
				}
			}
		}
		if cf.Credential != nil {
			ch.Credential = v.str(cf.Credential, at("credential"))
			if !secrets.ValidName(ch.Credential) && strings.TrimSpace(ch.Credential) != "" {
				v.fail(at("credential"), "%q is not a secret name: %s", ch.Credential, secrets.NameRule)
			}
		}
		if cf.APIBase != nil {
			ch.APIBase = strings.TrimRight(v.str(cf.APIBase, at("api_base")), "/")
			if err := checkAPIBase(ch.APIBase); err != nil && strings.TrimSpace(*cf.APIBase) != "" {
				v.fail(at("api_base"), "%q %v", *cf.APIBase, err)
			}
		}
		if cf.DMPolicy != nil {
			switch p := *cf.DMPolicy; p {
			case DMPolicyPairing, DMPolicyAllowlist, DMPolicyOpen:
				ch.DMPolicy = p
			default:
				v.fail(at("dm_policy"), "%q must be \"pairing\", \"allowlist\" or \"open\"", p)
			}
		}
		for i, id := range cf.AllowFrom {
			if id == 0 {
				v.fail(fmt.Sprintf("%s[%d]", at("allow_from"), i), "0 is not a user or group id")
				continue
			}
			if !slices.Contains(ch.AllowFrom, id) {
				ch.AllowFrom = append(ch.AllowFrom, id)
			}
		}
		if cf.PollTimeout != nil {
			d := v.duration(cf.PollTimeout, at("poll_timeout"))
			switch {
			case d == 0:
			case d < time.Second || d > 50*time.Second:
				v.fail(at("poll_timeout"), "%s must be between 1s and 50s", d)
			default:
				ch.PollTimeout = d
			}
		}
		out[name] = ch
	}
	return out
}

// checkAPIBase: an http(s) URL with no user, query or fragment; http only
// to a loopback address (the bot's token travels in it).
func checkAPIBase(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return errors.New("must be an http(s) URL such as https://api.telegram.org")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?"):
		return errors.New("must have no user, query or fragment")
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return errors.New("must be https: the bot's token travels in every request (http:// is for a loopback address only)")
		}
	}
	return nil
}

// validChannelName: a channel's name is a key of the store and of the page's
// routes.
func validChannelName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// validListen reports whether s is host:port with a numeric port.
func validListen(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535 && !strings.HasPrefix(port, "+")
}

// DataDir creates the data directory (0700) and returns it. An existing one
// must be a directory owned by the user running buddy (or root) and not
// writable by group or others: buddy runs code compiled into its cache there.
func (c *Config) DataDir() (string, error) {
	if err := osfile.PrivateDir(c.Storage.DataDir); err != nil {
		return "", errs.Wrap(errs.ErrConfig, "data directory", err)
	}
	return c.Storage.DataDir, nil
}

// validator is tomlx's Validator with buddy.toml's own checks (paths,
// directories).
type validator struct {
	*tomlx.Validator
}

func (v *validator) fail(path string, format string, args ...any) { v.Fail(path, format, args...) }

func (v *validator) str(s *string, path string) string {
	if s == nil {
		return ""
	}
	if strings.TrimSpace(*s) == "" {
		v.fail(path, "must not be empty (leave the key out for the default)")
	}
	return *s
}

func (v *validator) positive(n *int64, path string, max int64) int64 { return v.Positive(n, path, max) }

// duration is a duration of buddy.toml: at most a day.
func (v *validator) duration(s *string, path string) time.Duration {
	return v.Duration(s, path, 24*time.Hour)
}

func (v *validator) path(s *string, path string) string {
	if s == nil {
		return ""
	}
	p, err := expand(*s)
	if err != nil {
		v.fail(path, "%v", err)
		return ""
	}
	return p
}

// dirs validates a list of directories: absolute (or ~/...), existing, and
// directories. Missing ones are errors, never silently skipped.
func (v *validator) dirs(list []string, path string) []string {
	var out []string
	for i, d := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		p, err := expand(d)
		if err != nil {
			v.fail(at, "%v", err)
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			v.fail(at, "directory %s does not exist", p)
			continue
		case err != nil:
			v.fail(at, "%v", err)
			continue
		case !fi.IsDir():
			v.fail(at, "%s is not a directory", p)
			continue
		}
		out = append(out, p)
	}
	return out
}

// expand turns "~/x" into an absolute path under $HOME and refuses relative paths.
func expand(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand %q: %v", p, err)
		}
		p = filepath.Join(h, p[1:])
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q must be an absolute path (or start with ~/)", p)
	}
	return filepath.Clean(p), nil
}
