package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/llm"
)

// What DiscoverWindow asks is bounded: each question by probeTimeout, each
// answer by maxProbeBytes (an Ollama /api/show with the model's license and
// template, or a llama.cpp /props with its chat template, is tens of KiB).
const (
	probeTimeout  = 2 * time.Second
	maxProbeBytes = 1 << 20
)

// ollamaDefaultWindow is the window Ollama loads a model with when nothing
// asks for another: the smallest of its defaults, which grow with the GPU's
// memory (docs/context-length.mdx: 4k under 24 GiB of VRAM, 32k up to 48
// GiB, 256k above; OLLAMA_CONTEXT_LENGTH overrides them all).
const ollamaDefaultWindow = 4096

// errNoAnswer is a question the server did not answer as the kind of server
// it was asked as: the next question is asked.
var errNoAnswer = errors.New("no answer")

// DiscoverWindow implements agent.WindowDiscoverer. It asks the server, in
// this order, each question within 2 s:
//
//   - llama.cpp: GET <root>/props?model=<model>, default_generation_settings.n_ctx
//     (the window of one slot) or n_ctx;
//   - Ollama: POST <root>/api/show {"model"}: the num_ctx of the model's
//     parameters, else GET <root>/api/ps: the context_length the model is
//     loaded with, else Ollama's smallest default (4096); each capped by the
//     model's own <arch>.context_length;
//   - vLLM: GET <base_url>/models, data[].max_model_len of the model;
//   - LM Studio: GET <root>/api/v0/models, the model's loaded_context_length;
//
// where <root> is base_url without its /v1. A server that says what it is
// but not the window (LM Studio with the model not loaded, a llama.cpp
// router) ends the search with an error; otherwise a model of
// llm.KnownWindow's table is answered from it. When nothing answers, an
// error: never a guess.
func (p *Provider) DiscoverWindow(ctx context.Context) (agent.Window, error) {
	root := serverRoot(p.opts.BaseURL)
	for _, ask := range []func(context.Context, string) (agent.Window, error){
		p.llamaCppProps, p.ollamaShow, p.vllmModels, p.lmStudioModels,
	} {
		w, err := ask(ctx, root)
		switch {
		case err == nil && w.Tokens > 0:
			return w, nil
		case ctx.Err() != nil:
			return agent.Window{}, ctx.Err()
		case err != nil && !errors.Is(err, errNoAnswer):
			return agent.Window{}, err
		}
	}
	if n, ok := llm.KnownWindow(p.opts.Model); ok {
		return agent.Window{Tokens: n, Source: llm.KnownWindowSource}, nil
	}
	return agent.Window{}, fmt.Errorf("no context window for model %q: %s answered none of llama.cpp's /props, Ollama's /api/show, "+
		"vLLM's /models, LM Studio's /api/v0/models, and the model is not one buddy knows", p.opts.Model, root)
}

// serverRoot is the server's address without the API's /v1.
func serverRoot(baseURL string) string {
	return strings.TrimSuffix(strings.TrimSuffix(baseURL, "/"), "/v1")
}

// llamaCppProps asks llama.cpp's server. ?model= names the model to a
// llama.cpp router (several models, --models-preset) and to llama-swap; a
// single-model server ignores it.
func (p *Provider) llamaCppProps(ctx context.Context, root string) (agent.Window, error) {
	var props struct {
		Settings *struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		NCtx int `json:"n_ctx"`
	}
	if err := p.ask(ctx, http.MethodGet, root+"/props?model="+url.QueryEscape(p.opts.Model), nil, &props); err != nil {
		return agent.Window{}, err
	}
	switch {
	case props.Settings != nil && props.Settings.NCtx > 0:
		return agent.Window{Tokens: props.Settings.NCtx, Source: "llama.cpp /props n_ctx"}, nil
	case props.NCtx > 0:
		return agent.Window{Tokens: props.NCtx, Source: "llama.cpp /props n_ctx"}, nil
	case props.Settings != nil:
		// A router answers for itself, n_ctx 0, until the model is loaded.
		return agent.Window{}, fmt.Errorf("llama.cpp's /props at %s gives no n_ctx for model %q (a router that has not loaded it?)", root, p.opts.Model)
	}
	return agent.Window{}, errNoAnswer
}

// ollamaShow asks Ollama: a model's num_ctx (its Modelfile's PARAMETER),
// else the window it is loaded with now, else Ollama's default.
func (p *Provider) ollamaShow(ctx context.Context, root string) (agent.Window, error) {
	var show struct {
		Parameters *string                    `json:"parameters"`
		Modelfile  *string                    `json:"modelfile"`
		ModelInfo  map[string]json.RawMessage `json:"model_info"`
		RemoteHost string                     `json:"remote_host"`
	}
	body, _ := json.Marshal(map[string]string{"model": p.opts.Model})
	if err := p.ask(ctx, http.MethodPost, root+"/api/show", body, &show); err != nil {
		return agent.Window{}, err
	}
	if show.ModelInfo == nil && show.Modelfile == nil && show.Parameters == nil {
		return agent.Window{}, errNoAnswer
	}
	trained := trainedWindow(show.ModelInfo)
	capped := func(n int, source string) (agent.Window, error) {
		if trained > 0 && trained < n {
			n, source = trained, source+", capped by the model's context_length"
		}
		return agent.Window{Tokens: n, Source: source}, nil
	}
	if show.RemoteHost != "" && trained > 0 {
		// A cloud model runs with its whole window.
		return agent.Window{Tokens: trained, Source: "Ollama /api/show context_length (a cloud model)"}, nil
	}
	if show.Parameters != nil {
		if n := numCtx(*show.Parameters); n > 0 {
			return capped(n, "Ollama /api/show num_ctx")
		}
	}
	if n := p.ollamaLoaded(ctx, root); n > 0 {
		return capped(n, "Ollama /api/ps context_length")
	}
	if ctx.Err() != nil {
		return agent.Window{}, ctx.Err()
	}
	return capped(ollamaDefaultWindow, "Ollama's default window (4096, its smallest; the model is not loaded)")
}

// ollamaLoaded is the window Ollama has loaded the model with (0: not
// loaded, or no answer). /api/ps names a model "name:tag", "latest" when
// none was given.
func (p *Provider) ollamaLoaded(ctx context.Context, root string) int {
	var ps struct {
		Models []struct {
			Name          string `json:"name"`
			Model         string `json:"model"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	if p.ask(ctx, http.MethodGet, root+"/api/ps", nil, &ps) != nil {
		return 0
	}
	want := withTag(p.opts.Model)
	for _, m := range ps.Models {
		if withTag(m.Model) == want || withTag(m.Name) == want {
			return m.ContextLength
		}
	}
	return 0
}

func withTag(model string) string {
	if model != "" && !strings.Contains(model[strings.LastIndexByte(model, '/')+1:], ":") {
		return model + ":latest"
	}
	return model
}

// trainedWindow is a model's own window in Ollama's model_info:
// "<general.architecture>.context_length".
func trainedWindow(info map[string]json.RawMessage) int {
	var arch string
	if json.Unmarshal(info["general.architecture"], &arch) != nil || arch == "" {
		return 0
	}
	var n int
	if json.Unmarshal(info[arch+".context_length"], &n) != nil {
		return 0
	}
	return n
}

// numCtx reads num_ctx from Ollama's parameters: one "name value" per line.
func numCtx(parameters string) int {
	for _, line := range strings.Split(parameters, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "num_ctx" {
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// vllmModels reads vLLM's max_model_len of the model (OpenAI, Ollama,
// llama.cpp and LM Studio list their models without one).
func (p *Provider) vllmModels(ctx context.Context, _ string) (agent.Window, error) {
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := p.ask(ctx, http.MethodGet, p.opts.BaseURL+"models", nil, &models); err != nil {
		return agent.Window{}, err
	}
	for _, m := range models.Data {
		if m.ID == p.opts.Model && m.MaxModelLen > 0 {
			return agent.Window{Tokens: m.MaxModelLen, Source: "vLLM /v1/models max_model_len"}, nil
		}
	}
	return agent.Window{}, errNoAnswer
}

// lmStudioModels reads LM Studio's loaded_context_length of the model. Its
// max_context_length is the model's own window, not the one LM Studio loads
// it with (4096 unless the user chose another): a model not loaded yet has
// no answer.
func (p *Provider) lmStudioModels(ctx context.Context, root string) (agent.Window, error) {
	var models struct {
		Data []struct {
			ID                  string `json:"id"`
			State               string `json:"state"`
			LoadedContextLength int    `json:"loaded_context_length"`
		} `json:"data"`
	}
	if err := p.ask(ctx, http.MethodGet, root+"/api/v0/models", nil, &models); err != nil {
		return agent.Window{}, err
	}
	for _, m := range models.Data {
		if m.ID != p.opts.Model {
			continue
		}
		if m.LoadedContextLength > 0 {
			return agent.Window{Tokens: m.LoadedContextLength, Source: "LM Studio /api/v0/models loaded_context_length"}, nil
		}
		return agent.Window{}, fmt.Errorf("LM Studio at %s has not loaded model %q (state %q): its window is chosen when it loads", root, p.opts.Model, m.State)
	}
	return agent.Window{}, errNoAnswer
}

// ask sends one question and decodes the JSON answer into out: errNoAnswer
// unless the server answers 200 with a JSON object within maxProbeBytes and
// probeTimeout.
func (p *Provider) ask(ctx context.Context, method, u string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.probeTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return errNoAnswer
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case p.opts.KeyFunc != nil:
		key, err := p.opts.KeyFunc(ctx)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+string(key))
		clear(key)
	case p.opts.APIKey != "":
		req.Header.Set("Authorization", "Bearer "+p.opts.APIKey)
	}
	client := http.DefaultClient
	if p.opts.HTTPClient != nil {
		client = p.opts.HTTPClient
	}
	res, err := client.Do(req)
	if err != nil {
		return errNoAnswer
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return errNoAnswer
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxProbeBytes+1))
	if err != nil || len(raw) > maxProbeBytes {
		return errNoAnswer
	}
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, out) != nil {
		return errNoAnswer
	}
	return nil
}
