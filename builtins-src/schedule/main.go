// Command schedule is buddy's built-in skill that creates, lists and removes
// scheduled jobs — reminders delivered verbatim at a time, and checks (a
// prompt run as an agent turn at a time, an interval or a cron expression)
// — through the schedule host function, the only way a skill reaches the
// scheduler. It is mutating: every call is approved like a write.
package main

import "github.com/buddy-run/buddy/skillkit"

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

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{
		skillkit.StringField("action", &in.Action),
		skillkit.StringField("kind", &in.Kind),
		skillkit.StringField("at", &in.At),
		skillkit.StringField("every", &in.Every),
		skillkit.StringField("cron", &in.Cron),
		skillkit.StringField("text", &in.Text),
		skillkit.StringField("prompt", &in.Prompt),
		skillkit.StringField("id", &in.ID),
	}
}

// request is the input as encoding/json wrote it with its tags (empty
// fields left out), without reflection.
func (in *input) request() skillkit.RawJSON {
	var o skillkit.Object
	o.String("action", in.Action)
	for _, f := range [...]struct{ k, v string }{{"kind", in.Kind}, {"at", in.At}, {"every", in.Every},
		{"cron", in.Cron}, {"text", in.Text}, {"prompt", in.Prompt}, {"id", in.ID}} {
		if f.v != "" {
			o.String(f.k, f.v)
		}
	}
	return o.JSON()
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		switch in.Action {
		case "add", "list", "remove":
		default:
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "action must be add, list or remove")
		}
		if in.Action == "remove" && in.ID == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "remove needs the job's id (list shows them)")
		}
		return skillkit.ScheduleJSON(in.request())
	})
}

func main() {}
