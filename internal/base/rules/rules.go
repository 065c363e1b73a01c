// Package rules holds the rules a skill's manifest (skill.toml, package
// runtime) and the operator's configuration (buddy.toml, internal/config)
// share, in one place: what a skill name and an environment variable name
// may be, and the bounds of a skill's resources. It imports nothing.
//
//	if !rules.ValidSkillName(name) { ... }
//	if fuel > rules.MaxFuel { ... }
package rules

import (
	"regexp"
	"time"
)

// Bounds of a skill's resources, whoever sets them (a manifest's
// [resources], an operator's [skills.NAME] or [limits]).
const (
	MaxFuel     = 1 << 50
	MinMemoryMB = 2    // the Extism kernel alone takes 1 MiB of the cap
	MaxMemoryMB = 4096 // 65536 wasm pages, wazero's limit
	MaxTimeout  = time.Hour
)

var (
	skillNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// SkillNamePattern is the grammar of a skill name, for messages.
const SkillNamePattern = "[a-z][a-z0-9_]{0,63}"

// ValidSkillName reports whether s is a valid skill name: a lowercase
// letter, then up to 63 lowercase letters, digits or underscores.
func ValidSkillName(s string) bool { return skillNameRE.MatchString(s) }

// ValidEnvName reports whether s is a valid environment variable name: a
// letter or underscore, then up to 127 letters, digits or underscores.
func ValidEnvName(s string) bool { return envNameRE.MatchString(s) }
