package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/llm/anthropic"
	"github.com/buddy-run/buddy/internal/llm/openai"
)

// newProvider builds the configured LLM provider, or nil when [provider]
// names none. The API key is read from the variable api_key_env names; it is
// never logged or stored.
func newProvider(p config.Provider) (agent.Provider, error) {
	if p.Kind == "" {
		return nil, nil
	}
	var key string
	if p.APIKeyEnv != "" {
		key = os.Getenv(p.APIKeyEnv)
		if key == "" {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("provider.api_key_env: the environment variable %s is empty or unset", p.APIKeyEnv))
		}
	}
	switch p.Kind {
	case "openai":
		return openai.New(openai.Options{
			BaseURL: p.BaseURL, Model: p.Model, APIKey: key, Timeout: p.Timeout,
			Temperature: p.Temperature, MaxTokens: p.MaxTokens,
			MaxAnswerBytes: p.MaxAnswerBytes, MaxToolCalls: p.MaxToolCalls,
		})
	case "anthropic":
		if key == "" {
			return nil, errs.New(errs.ErrConfig, "provider.api_key_env: the Anthropic API needs a key: name the environment variable that holds it")
		}
		return anthropic.New(anthropic.Options{
			BaseURL: p.BaseURL, Model: p.Model, APIKey: key, Timeout: p.Timeout,
			Temperature: p.Temperature, MaxTokens: p.MaxTokens,
			MaxAnswerBytes: p.MaxAnswerBytes, MaxToolCalls: p.MaxToolCalls,
		})
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
