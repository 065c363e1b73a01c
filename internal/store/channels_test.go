package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

func TestChannelInboxOnceAndInOrder(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	if c, err := s.ChannelCursor(ctx, "telegram"); err != nil || c != "" {
		t.Fatalf("cursor of a new channel = %q, %v", c, err)
	}
	ev := func(chat, id string) ChannelEvent {
		return ChannelEvent{Chat: chat, UpdateID: id, Event: json.RawMessage(`{"text":"` + id + `"}`)}
	}
	added, err := s.ReceiveChannelUpdates(ctx, "telegram", []ChannelEvent{ev("1", "10"), ev("2", "11")}, "12")
	if err != nil || len(added) != 2 {
		t.Fatalf("first poll: %d added, %v", len(added), err)
	}
	// The same poll again (a crash before the cursor was used): nothing new.
	added, err = s.ReceiveChannelUpdates(ctx, "telegram", []ChannelEvent{ev("1", "10"), ev("2", "11"), ev("1", "12")}, "13")
	if err != nil || len(added) != 1 || added[0].UpdateID != "12" {
		t.Fatalf("repeated poll: %+v, %v", added, err)
	}
	if c, _ := s.ChannelCursor(ctx, "telegram"); c != "13" {
		t.Errorf("cursor = %q, want 13", c)
	}
	open, err := s.OpenInbox(ctx, "telegram")
	if err != nil || len(open) != 3 {
		t.Fatalf("open inbox: %d, %v", len(open), err)
	}
	for i, want := range []string{"10", "11", "12"} {
		if open[i].UpdateID != want || open[i].State != InboxNew {
			t.Errorf("inbox[%d] = %+v", i, open[i])
		}
	}
	if err := s.SetInboxState(ctx, open[0].Seq, InboxRunning, "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetInboxState(ctx, open[1].Seq, InboxRefused, "not paired", true); err != nil {
		t.Fatal(err)
	}
	n, oldest, err := s.InboxBacklog(ctx, "telegram")
	if err != nil || n != 2 || oldest.IsZero() {
		t.Errorf("backlog = %d, %v, %v", n, oldest, err)
	}
	all, _ := s.Inbox(ctx, "telegram", 10)
	for _, it := range all {
		if it.UpdateID == "11" && (string(it.Event) != "{}" || it.Note != "not paired") {
			t.Errorf("a refused update keeps %s (%q)", it.Event, it.Note)
		}
		if it.UpdateID == "10" && (it.State != InboxRunning || it.StartedAt.IsZero()) {
			t.Errorf("running update = %+v", it)
		}
	}
	if err := s.SetInboxState(ctx, 999, InboxDone, "", false); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown seq: %v", err)
	}
	if _, err := s.ReceiveChannelUpdates(ctx, "telegram", []ChannelEvent{{Chat: "1", UpdateID: "x", Event: json.RawMessage(`{`)}}, ""); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("bad event JSON: %v", err)
	}
	if n, err := s.PruneChannelInbox(ctx, "telegram", time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("prune = %d, %v", n, err)
	}
}

func TestChannelInboxConcurrentPolls(t *testing.T) {
	// Two writers storing overlapping polls (a restart racing a poll
	// left over): every update is stored once.
	s := openTest(t, Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				var evs []ChannelEvent
				for j := range 5 {
					id := fmt.Sprint((i+w)*5 + j)
					evs = append(evs, ChannelEvent{Chat: "c" + id[len(id)-1:], UpdateID: id, Event: json.RawMessage(`{}`)})
				}
				added, err := s.ReceiveChannelUpdates(t.Context(), "tg", evs, fmt.Sprint(i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += len(added)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	open, _ := s.OpenInbox(t.Context(), "tg")
	if total != len(open) || len(open) != (49+3)*5+5 {
		t.Errorf("added %d, stored %d", total, len(open))
	}
}

func TestChannelOutbox(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	id, err := s.EnqueueOutbox(ctx, OutboxItem{Channel: "tg", Chat: "5", Kind: "answer", Body: json.RawMessage(`{"text":"Hel"}`)})
	if err != nil {
		t.Fatal(err)
	}
	pend, _ := s.PendingOutbox(ctx, "tg")
	if len(pend) != 1 || pend[0].Final || pend[0].InSync() {
		t.Fatalf("pending = %+v", pend)
	}
	if err := s.NoteOutboxAttempt(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.ConfirmOutbox(ctx, id, "42", json.RawMessage(`{"text":"Hel"}`)); err != nil {
		t.Fatal(err)
	}
	it, _ := s.Outbox(ctx, id)
	if !it.InSync() || it.State != OutboxPending || it.MessageID != "42" || it.Attempts != 0 {
		t.Fatalf("after the first send: %+v", it)
	}
	if err := s.UpdateOutbox(ctx, id, json.RawMessage(`{"text":"Hello"}`), true); err != nil {
		t.Fatal(err)
	}
	it, _ = s.Outbox(ctx, id)
	if it.InSync() || !it.Final {
		t.Fatalf("after the update: %+v", it)
	}
	// A confirmation of the older body leaves it pending.
	_ = s.ConfirmOutbox(ctx, id, "42", json.RawMessage(`{"text":"Hel"}`))
	if it, _ = s.Outbox(ctx, id); it.State != OutboxPending {
		t.Fatalf("confirmed an older body: %+v", it)
	}
	_ = s.ConfirmOutbox(ctx, id, "42", json.RawMessage(`{"text":"Hello"}`))
	if it, _ = s.Outbox(ctx, id); it.State != OutboxDone {
		t.Fatalf("confirmed the final body: %+v", it)
	}
	if n, _ := s.OutboxBacklog(ctx, "tg"); n != 0 {
		t.Errorf("backlog %d", n)
	}
	id2, _ := s.EnqueueOutbox(ctx, OutboxItem{Channel: "tg", Chat: "5", Kind: "notice", Body: json.RawMessage(`{}`), Final: true})
	if err := s.FailOutbox(ctx, id2, "forbidden: bot was blocked", true); err != nil {
		t.Fatal(err)
	}
	if it, _ = s.Outbox(ctx, id2); it.State != OutboxFailed || it.Error == "" {
		t.Errorf("failed = %+v", it)
	}
}

func TestChannelChats(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	if _, ok, err := s.ChannelChat(ctx, "tg", "5"); ok || err != nil {
		t.Fatalf("unknown chat: %v %v", ok, err)
	}
	if err := s.SetChannelChat(ctx, "tg", "5", "c_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetChannelChat(ctx, "tg", "5", "c_2"); err != nil {
		t.Fatal(err)
	}
	if c, ok, _ := s.ChannelChat(ctx, "tg", "5"); !ok || c != "c_2" {
		t.Errorf("conversation = %q", c)
	}
	if ch, chat, ok, _ := s.ChatOfConversation(ctx, "c_2"); !ok || ch != "tg" || chat != "5" {
		t.Errorf("chat of c_2 = %s %s %v", ch, chat, ok)
	}
}

func TestPairing(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	now := time.Now()
	req := func(user, code string) (Pairing, bool, error) {
		return s.RequestPairing(ctx, Pairing{Channel: "tg", User: user, Chat: user, Name: "u" + user, Code: code,
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 3)
	}
	p1, created, err := req("1", "AAAA2222")
	if err != nil || !created || p1.Status != PairingPending {
		t.Fatalf("first: %+v %v %v", p1, created, err)
	}
	if p, created, err := req("1", "BBBB3333"); err != nil || created || p.Code != "AAAA2222" {
		t.Fatalf("again: %+v %v %v", p, created, err)
	}
	req("2", "CCCC4444")
	req("3", "DDDD5555")
	if _, _, err := req("4", "EEEE6666"); !errors.Is(err, ErrTooManyPairings) || !errors.Is(err, errs.ErrTooLarge) {
		t.Fatalf("a fourth pending code: %v", err)
	}
	p, err := s.ApprovePairing(ctx, "AAAA2222", now)
	if err != nil || p.Status != PairingPaired || p.User != "1" {
		t.Fatalf("approve: %+v %v", p, err)
	}
	if ok, _ := s.Paired(ctx, "tg", "1"); !ok {
		t.Error("user 1 is not paired")
	}
	if _, err := s.ApprovePairing(ctx, "AAAA2222", now); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("approving twice: %v", err)
	}
	if p, created, _ := req("1", "FFFF7777"); created || p.Status != PairingPaired {
		t.Errorf("a paired user asking again: %+v", p)
	}
	// An hour later the two other codes have expired, and room is made.
	later := now.Add(time.Hour + time.Second)
	if _, err := s.ApprovePairing(ctx, "CCCC4444", later); !errors.Is(err, errs.ErrTimeout) {
		t.Errorf("an expired code: %v", err)
	}
	list, _ := s.Pairings(ctx, "tg", later)
	if len(list) != 1 || list[0].User != "1" {
		t.Errorf("pairings after the expiry = %+v", list)
	}
	if _, err := s.RevokePairing(ctx, "tg", "1", later); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Paired(ctx, "tg", "1"); ok {
		t.Error("user 1 is still paired")
	}
	if _, err := s.RevokePairing(ctx, "tg", "1", later); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
}

func TestChannelStateSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "buddy.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReceiveChannelUpdates(t.Context(), "tg", []ChannelEvent{{Chat: "1", UpdateID: "7", Event: json.RawMessage(`{}`)}}, "8"); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context())
	s, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	if c, _ := s.ChannelCursor(t.Context(), "tg"); c != "8" {
		t.Errorf("cursor after reopen = %q", c)
	}
	if open, _ := s.OpenInbox(t.Context(), "tg"); len(open) != 1 {
		t.Errorf("inbox after reopen: %d", len(open))
	}
}
