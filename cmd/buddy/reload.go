package main

import (
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/buddy-run/buddy/internal/config"
)

// liveKeys are the buddy.toml keys (besides every [skills.*] section) that
// a reload (SIGHUP) applies to the next call: the registry is rebuilt with
// the new grants and limits, the gate reads [approval] at every call, and
// the budget reads [budget] before every model request.
// Any other key that changed is named in the reload's log line as needing a
// restart (docs/CONFIG.md, "Reloading").
var liveKeys = []string{
	"approval.after_private_read",
	"approval.timeout",
	"budget.tokens_per_day",
	"budget.tokens_per_job_per_day",
	"budget.tokens_per_month",
	"budget.tokens_per_turn",
	"budget.usd_per_day",
	"budget.usd_per_job_per_day",
	"budget.usd_per_month",
	"budget.usd_per_turn",
	"limits.fetch_timeout",
	"limits.max_fetch_bytes",
	"limits.max_fuel",
	"limits.max_memory_mb",
	"limits.max_read_bytes",
	"limits.max_timeout",
	"limits.max_write_bytes",
}

// restartKeys lists the keys of the sections of buddy.toml whose values
// differ between was and now and that only a restart applies, sorted.
func restartKeys(was, now *config.Config) []string {
	var out []string
	forEachKey(func(key string, get func(*config.Config) reflect.Value) {
		if !slices.Contains(liveKeys, key) && !reflect.DeepEqual(get(was).Interface(), get(now).Interface()) {
			out = append(out, key)
		}
	})
	// The channels run from start to stop: a change takes a restart.
	if !reflect.DeepEqual(was.Channels, now.Channels) {
		out = append(out, "channels")
	}
	slices.Sort(out)
	return out
}

// forEachKey calls fn with every key of the sections of a configuration
// ("server.listen", …) and a way to read its value.
func forEachKey(fn func(key string, get func(*config.Config) reflect.Value)) {
	t := reflect.TypeFor[config.Config]()
	for i := range t.NumField() {
		sec := t.Field(i)
		if sec.Type.Kind() != reflect.Struct || !sec.IsExported() {
			continue // Path, the [skills] map
		}
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			if !f.IsExported() {
				continue
			}
			si, fj := i, j
			fn(snake(sec.Name)+"."+snake(f.Name), func(c *config.Config) reflect.Value {
				return reflect.ValueOf(c).Elem().Field(si).Field(fj)
			})
		}
	}
}

// snake turns a Go field name into its buddy.toml key: MaxMessageBytes →
// max_message_bytes, APIKeyEnv → api_key_env, BaseURL → base_url.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
