//go:build unix

package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// telegramToken is the bot token of the e2e tests (the shape of a real one).
const telegramToken = "987654321:AAE2eTOKENof-the_fake-bot-api-0123"

// tinyBot is the least of Telegram's Bot API that buddy serve's channel
// needs: getUpdates (long polling with offset), sendMessage, the rest
// answered true. The channels package's tests hold the full fake.
type tinyBot struct {
	srv *httptest.Server

	mu      sync.Mutex
	cond    *sync.Cond
	next    int64
	updates []string // JSON, not yet acknowledged
	sent    map[string][]string
	paths   []string
}

func newTinyBot(t *testing.T) *tinyBot {
	b := &tinyBot{next: 500, sent: map[string][]string{}}
	b.cond = sync.NewCond(&b.mu)
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
		b.srv.CloseClientConnections()
		b.srv.Close()
	})
	return b
}

func (b *tinyBot) serve(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &in)
	b.mu.Lock()
	b.paths = append(b.paths, r.URL.Path)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !strings.HasPrefix(r.URL.Path, "/bot"+telegramToken+"/") {
		w.WriteHeader(401)
		io.WriteString(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, "/bot"+telegramToken+"/") {
	case "getUpdates":
		offset, _ := in["offset"].(float64)
		deadline := time.Now().Add(300 * time.Millisecond)
		b.mu.Lock()
		kept := b.updates[:0]
		for i, u := range b.updates {
			if b.next-int64(len(b.updates))+int64(i)+1 >= int64(offset) {
				kept = append(kept, u)
			}
		}
		b.updates = kept
		for len(b.updates) == 0 && time.Now().Before(deadline) && r.Context().Err() == nil {
			t := time.AfterFunc(time.Until(deadline), func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
			b.cond.Wait()
			t.Stop()
		}
		body := `{"ok":true,"result":[` + strings.Join(b.updates, ",") + `]}`
		b.mu.Unlock()
		io.WriteString(w, body)
	case "sendMessage":
		chat := fmt.Sprint(in["chat_id"])
		b.mu.Lock()
		b.sent[chat] = append(b.sent[chat], fmt.Sprint(in["text"]))
		id := len(b.sent[chat])
		b.mu.Unlock()
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"chat":{"id":%s,"type":"private"},"date":1}}`, id, chat)
	default:
		io.WriteString(w, `{"ok":true,"result":true}`)
	}
}

// message queues a text message from user in their direct chat (the
// updates' ids are consecutive, as Telegram's).
func (b *tinyBot) message(user int64, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	t, _ := json.Marshal(text)
	b.updates = append(b.updates, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Ada"},`+
		`"chat":{"id":%d,"type":"private","first_name":"Ada"},"date":1,"text":%s}}`, b.next, b.next, user, user, t))
	b.cond.Broadcast()
}

func (b *tinyBot) texts(chat int64) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sent[fmt.Sprint(chat)]...)
}

// waitText waits until chat was sent a message matching re.
func (b *tinyBot) waitText(t *testing.T, chat int64, re *regexp.Regexp) []string {
	t.Helper()
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(20 * time.Millisecond) {
		for _, s := range b.texts(chat) {
			if m := re.FindStringSubmatch(s); m != nil {
				return m
			}
		}
	}
	t.Fatalf("chat %d never got a message matching %s; it got %q", chat, re, b.texts(chat))
	return nil
}

// TestServeTelegram: buddy serve refuses a channel whose credential is not
// in the secret store; with it (`buddy secret set telegram`), a stranger's
// message gets a pairing code, `buddy pair approve` pairs them while the
// server runs, a reminder reaches the paired chat, GET /api/channels shows
// the channel polling, and the token appears nowhere but in the Bot API's
// path.
func TestServeTelegram(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	bot := newTinyBot(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), fmt.Sprintf(`[channels.telegram]
api_base = %q
dm_policy = "pairing"
poll_timeout = "1s"
`, bot.srv.URL))
	d := s.run(t, "serve", "--listen", "127.0.0.1:0", "--config", cfg).fails(t, errs.KindConfig)
	if !strings.Contains(d, "channels.telegram") || !strings.Contains(d, "buddy secret set telegram") {
		t.Errorf("serve without the credential: %s", d)
	}
	out := s.do(t, job{args: []string{"secret", "set", "telegram", "--config", cfg}, stdin: telegramToken + "\n"}).ok(t)
	if !strings.Contains(out, "used by channels.telegram") {
		t.Errorf("secret set: %q", out)
	}
	sv := startServe(t, s, "--config", cfg)

	bot.message(4242, "hello?")
	code := bot.waitText(t, 4242, regexp.MustCompile(`Your pairing code: ([A-Z0-9]{8})`))[1]
	var list struct {
		Pending []struct{ User, Code string }
	}
	if err := json.Unmarshal([]byte(s.run(t, "pair", "list", "--json", "--config", cfg).ok(t)), &list); err != nil ||
		len(list.Pending) != 1 || list.Pending[0].User != "4242" || list.Pending[0].Code != code {
		t.Fatalf("pair list: %+v %v", list, err)
	}
	s.run(t, "pair", "approve", strings.ToLower(code), "--config", cfg).ok(t)
	bot.waitText(t, 4242, regexp.MustCompile(`^You're paired`))
	// No provider: a paired user's message is answered that no model is set.
	bot.message(4242, "what's up?")
	bot.waitText(t, 4242, regexp.MustCompile(`no language model configured`))
	s.run(t, "schedule", "add", "reminder", "--at", "+1s", "--text", "call the plumber", "--config", cfg).ok(t)
	bot.waitText(t, 4242, regexp.MustCompile(`^Reminder: call the plumber$`))

	req, _ := http.NewRequest("GET", sv.url("/api/channels"), nil)
	req.Header.Set("Authorization", "Bearer "+sv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Channels []struct {
			Name, State, Error string
			Paired             int
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Channels) != 1 || st.Channels[0].Name != "telegram" || st.Channels[0].State != "polling" ||
		st.Channels[0].Error != "" || st.Channels[0].Paired != 1 {
		t.Errorf("GET /api/channels: %+v %v", st, err)
	}
	if strings.Contains(sv.stderr.String(), "AAE2eTOKEN") {
		t.Error("buddy serve's log holds the bot's token")
	}
	bot.mu.Lock()
	defer bot.mu.Unlock()
	for _, texts := range bot.sent {
		for _, m := range texts {
			if strings.Contains(m, "AAE2eTOKEN") {
				t.Errorf("a chat was sent the token: %q", m)
			}
		}
	}
}

// TestServeChannelAdapterFromFile: [channels.NAME] adapter runs an adapter
// from its module and the skill.toml beside it, for a channel buddy has no
// built-in adapter for (here Telegram's own adapter, copied, serving a
// channel called "mychat"): an allowed user's message is answered, and the
// channel is listed under its name. An adapter whose skill.toml declares a
// capability stops the start (forbidden), naming the channel.
func TestServeChannelAdapterFromFile(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	bot := newTinyBot(t)
	b, ok := builtins.Adapter("telegram")
	if !ok {
		t.Fatal("no built-in telegram adapter")
	}
	mod := write(t, filepath.Join(s.dir, "mychat", "adapter.wasm"), string(b.Wasm))
	write(t, filepath.Join(s.dir, "mychat", "skill.toml"), string(b.Manifest))
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), fmt.Sprintf(`[channels.mychat]
adapter = %q
api_base = %q
dm_policy = "allowlist"
allow_from = [4242]
poll_timeout = "1s"
`, mod, bot.srv.URL))
	s.do(t, job{args: []string{"secret", "set", "mychat", "--config", cfg}, stdin: telegramToken + "\n"}).ok(t)
	sv := startServe(t, s, "--config", cfg)
	bot.message(4242, "hello?")
	bot.waitText(t, 4242, regexp.MustCompile(`no language model configured`))
	req, _ := http.NewRequest("GET", sv.url("/api/channels"), nil)
	req.Header.Set("Authorization", "Bearer "+sv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"mychat"`) {
		t.Errorf("GET /api/channels: %s", body)
	}
	sv.stop(t)

	write(t, filepath.Join(s.dir, "mychat", "skill.toml"), strings.Replace(string(b.Manifest), `"read_only"`, `"network"`, 1)+"\n[capabilities]\nnetwork = [\"*\"]\n")
	d := s.run(t, "serve", "--listen", "127.0.0.1:0", "--config", cfg).fails(t, errs.KindForbidden)
	if !strings.Contains(d, "mychat") || !strings.Contains(d, "capabilities") {
		t.Errorf("serve with an adapter declaring network: %s", d)
	}
}
