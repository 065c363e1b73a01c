package llm

import "testing"

func TestKnownWindow(t *testing.T) {
	for _, tc := range []struct {
		model  string
		tokens int // 0: not known
	}{
		{"gpt-4o", 128_000},
		{"gpt-4o-mini", 128_000},
		{"gpt-4o-2024-08-06", 128_000},
		{"openai/gpt-4o", 128_000},
		{"gpt-4.1-mini", 1_047_576},
		{"gpt-4", 8_192},
		{"gpt-4-turbo-2024-04-09", 128_000},
		{"o1", 200_000},
		{"o1-mini", 128_000},
		{"o3-mini-2025-01-31", 200_000},
		{"o4-mini", 200_000},
		{"gpt-5", 272_000},
		{"gpt-5-mini", 272_000},
		{"gpt-5.1", 272_000},
		{"gpt-5-chat-latest", 128_000},
		{"claude-sonnet-4-5", 200_000},
		{"claude-3-5-haiku-20241022", 200_000},
		{"Claude-Opus-4-1", 200_000},
		{"anthropic/claude-3.5-sonnet", 200_000},
		{"claude-3-5-sonnet@20240620", 200_000},
		{"claude-instant-1.2", 100_000},
		{"mistral-large-latest", 128_000},
		{"mistral-large-2402", 32_000},
		{"mistralai/Mistral-7B-Instruct-v0.3", 8_192},
		{"mistral-small-2501", 32_000},
		{"open-mixtral-8x22b", 64_000},
		{"llama-3.3-70b-versatile", 128_000},
		{"meta-llama/Llama-3.1-8B-Instruct", 128_000},
		{"llama-3-8b-instruct", 8_192},
		{"Qwen/Qwen2.5-72B-Instruct", 32_768},
		// Not known: local names (their server runs them with its own
		// window) and near misses.
		{"llama3.2", 0},
		{"llama3.1:8b", 0},
		{"qwen2.5:7b", 0},
		{"mistral", 0},
		{"gpt-4oo", 0},
		{"o10", 0},
		{"claudette", 0},
		{"", 0},
	} {
		n, ok := KnownWindow(tc.model)
		if n != tc.tokens || ok != (tc.tokens > 0) {
			t.Errorf("KnownWindow(%q) = %d, %v; want %d", tc.model, n, ok, tc.tokens)
		}
	}
}
