package main

import (
	"fmt"
	"os"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/errs"
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
