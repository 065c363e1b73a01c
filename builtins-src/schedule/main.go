// Command schedule is buddy's built-in skill that creates, lists and removes
// scheduled jobs — reminders delivered verbatim at a time, and checks (a
// prompt run as an agent turn at a time, an interval or a cron expression)
// — through the schedule host function, the only way a skill reaches the
// scheduler. It is mutating: every call is approved like a write.
package main

import (
	"encoding/json"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Action string `json:"action"`
	Kind   string `json:"kind,omitempty"`
	At     string `json:"at,omitempty"`
	Every  string `json:"every,omitempty"`
	Cron   string `json:"cron,omitempty"`
	Text   string `json:"text,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	ID     string `json:"id,omitempty"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		switch in.Action {
		case "add", "list", "remove":
		default:
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "action must be add, list or remove")
		}
		if in.Action == "remove" && in.ID == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "remove needs the job's id (list shows them)")
		}
		out, err := skillkit.Schedule(in)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(out), nil
	})
}

func main() {}
