package skills_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

func TestBuiltinAdapter(t *testing.T) {
	rt, err := runtime.New(t.Context(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(t.Context())
	a, err := skills.LoadBuiltinAdapter(t.Context(), rt, "telegram")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(t.Context())
	out, err := a.Render(t.Context(), []byte(`{"action":"message","chat":"42","text":"**hi**"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Request struct{ Method, Path, Body string }
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Request.Path != "/bot{credential}/sendMessage" || !strings.Contains(r.Request.Body, "<b>hi</b>") {
		t.Fatalf("render = %s, %v", out, err)
	}
	out, err = a.Parse(t.Context(), []byte(`{"action":"poll","status":200,"body":"{\"ok\":true,\"result\":[{\"update_id\":5,\"message\":{\"message_id\":1,\"from\":{\"id\":9,\"first_name\":\"A\"},\"chat\":{\"id\":9,\"type\":\"private\"},\"text\":\"hello\"}}]}"}`))
	if err != nil || !strings.Contains(string(out), `"cursor":"6"`) || !strings.Contains(string(out), `"text":"hello"`) {
		t.Fatalf("parse = %s, %v", out, err)
	}
	if _, err := a.Render(t.Context(), []byte(`{"action":"nope"}`)); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("a bad action: %v", err)
	}
	// An adapter is not a skill.
	if _, ok := builtins.Get("telegram"); ok {
		t.Error("builtins.Get finds the adapter")
	}
	for _, b := range builtins.All() {
		if b.Name == "telegram" {
			t.Error("builtins.All lists the adapter")
		}
	}
	if builtins.Reserved("telegram") == "" {
		t.Error("the adapter's name is not reserved")
	}
}

func TestAdapterRefusesCapabilities(t *testing.T) {
	rt, err := runtime.New(t.Context(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(t.Context())
	b, _ := builtins.Adapter("telegram")
	manifest := strings.Replace(string(b.Manifest), `"read_only"`, `"network"`, 1) + "\n[capabilities]\nnetwork = [\"*\"]\n"
	if _, err := skills.LoadAdapter(t.Context(), rt, "x", b.Wasm, []byte(manifest)); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("an adapter declaring network: %v", err)
	}
	rf, _ := builtins.Get("read_file")
	if _, err := skills.LoadAdapter(t.Context(), rt, "x", rf.Wasm, b.Manifest); err == nil {
		t.Error("a module without parse and render loaded as an adapter")
	}
}
