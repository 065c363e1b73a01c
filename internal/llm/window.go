package llm

import "strings"

// KnownWindowSource is the agent.Window source of a KnownWindow figure.
const KnownWindowSource = "buddy's table of known models"

// KnownWindow is the context window, in tokens, of a well-known hosted
// model, matched by the longest prefix of its name (lowercase, after any
// "vendor/" part, as routers such as OpenRouter spell it) that ends where a
// name part ends ("-", ".", "@", "_" or the end; not ":", Ollama's tag). It is the model's own window, not what a local server
// runs it with (Ollama, llama.cpp and LM Studio load models with a smaller
// one): the OpenAI-compatible provider asks the server first, and only
// names spelled as hosted APIs spell them are in the table. Where a model's
// versions differ, the smallest figure is kept; a figure too small only
// makes buddy summarise earlier, one too large loses the conversation.
func KnownWindow(model string) (int, bool) {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, tokens := 0, 0
	for _, w := range knownWindows {
		if len(w.prefix) <= best || !strings.HasPrefix(name, w.prefix) {
			continue
		}
		if rest := name[len(w.prefix):]; rest != "" && !strings.ContainsRune("-.@_", rune(rest[0])) {
			continue // "gpt-4" is not a prefix of "gpt-4o"
		}
		best, tokens = len(w.prefix), w.tokens
	}
	return tokens, best > 0
}

var knownWindows = []struct {
	prefix string
	tokens int
}{
	// OpenAI, platform.openai.com/docs/models (each model's page: "context
	// window").
	{"gpt-3.5-turbo", 16_385},
	{"gpt-4", 8_192},
	{"gpt-4-turbo", 128_000},
	{"gpt-4o", 128_000}, // gpt-4o, gpt-4o-mini and their dated versions
	{"gpt-4.1", 1_047_576},
	{"o1", 200_000},
	{"o1-mini", 128_000},
	{"o1-preview", 128_000},
	{"o3", 200_000},
	{"o3-mini", 200_000},
	{"o4-mini", 200_000},
	// GPT-5: a 400,000-token window of which up to 128,000 are the answer's,
	// so at most 272,000 of input. The input limit is kept: a request is
	// refused past it whatever max_tokens says. gpt-5.4 and later take more;
	// the smaller figure stays until they are told apart here.
	{"gpt-5", 272_000},
	// The ChatGPT snapshots have 128,000 (gpt-5-chat-latest's model page).
	{"gpt-5-chat", 128_000},
	{"gpt-5.1-chat", 128_000},
	{"gpt-5.2-chat", 128_000},
	// Anthropic, docs.claude.com "Models overview" and "Context windows":
	// 200,000 for every current Claude model; 1,000,000 only with the
	// context-1m beta header, which buddy does not send. Claude 2.0 and
	// Claude Instant had 100,000.
	{"claude", 200_000},
	{"claude-2.0", 100_000},
	{"claude-instant", 100_000},
	// Mistral AI's model cards and announcements. Mistral Large 2 has 128k,
	// the first Mistral Large (2402) 32k (Mistral-Large-Instruct-2411's card);
	// Medium had 32k before 2505; Small and Codestral 32k in their first
	// versions; Nemo and Ministral 128k; Mixtral 8x7B 32k, 8x22B 64k; Mistral
	// 7B v0.1 8k (the API's open-mistral-7b 32k). The smallest of a model's
	// versions is kept, except for a dated name that says which.
	{"mistral-large", 128_000},
	{"mistral-large-2402", 32_000},
	{"mistral-medium", 32_000},
	{"mistral-small", 32_000},
	{"mistral-nemo", 128_000},
	{"open-mistral-nemo", 128_000},
	{"ministral", 128_000},
	{"codestral", 32_000},
	{"mistral-7b", 8_192},
	{"open-mistral-7b", 32_000},
	{"mixtral-8x7b", 32_000},
	{"open-mixtral-8x7b", 32_000},
	{"mixtral-8x22b", 64_000},
	{"open-mixtral-8x22b", 64_000},
	// Meta Llama 3, as hosted APIs name it (Groq, Together, OpenRouter,
	// Fireworks): Llama 3 has 8,192 (its model card), Llama 3.1, 3.2 and 3.3
	// 128k (their model cards). Ollama's "llama3.1:8b" is not matched: Ollama
	// runs a model with a window of its own.
	{"llama-3", 8_192},
	{"meta-llama-3", 8_192},
	{"llama-3.1", 128_000},
	{"llama-3.2", 128_000},
	{"llama-3.3", 128_000},
	{"meta-llama-3.1", 128_000},
	// Qwen2.5, as hosted APIs name it: its model cards give 32,768 as
	// configured (131,072 only with YaRN scaling turned on). Ollama's
	// "qwen2.5:7b" is not matched.
	{"qwen2.5", 32_768},
	{"qwen-2.5", 32_768},
}
