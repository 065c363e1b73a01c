package agent

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/buddy-run/buddy/internal/catalog"
)

// Progressive disclosure of SKILL.md instruction skills: the system prompt
// lists each one's name and description only (capped by a token budget);
// the model loads one with the tool "skill_" + name, which returns its
// content, source, description and type. Loading a skill that declares
// permissions binds the conversation to them (the gate's guard).

// InstructionToolPrefix prefixes the tool that loads an instruction skill.
const InstructionToolPrefix = "skill_"

// DefaultInstructionTokens caps the skill list in the system prompt.
const DefaultInstructionTokens = 2000

// maxListedDescription caps one description in the list (Agent Skills asks
// for at most 1,024 characters; longer ones are cut there).
const maxListedDescription = 1024

// loadSchema is the input schema of every skill_ tool (no arguments); its
// identity marks the tools instructionTools made.
var loadSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// maxToolName is the longest tool name the providers accept.
const maxToolName = 64

// instructionTools are the skill_ tools of the ready instruction skills,
// leaving out any whose tool name another tool already has.
func instructionTools(infos []catalog.Info, offered []Tool) []Tool {
	taken := make(map[string]bool, len(offered))
	for _, t := range offered {
		taken[t.Name] = true
	}
	var out []Tool
	for _, i := range infos {
		name := InstructionToolPrefix + i.Name
		if !i.Ready() || i.Type != catalog.TypeInstruction || taken[name] || len(name) > maxToolName {
			continue
		}
		desc := i.Description
		if strings.TrimSpace(desc) == "" {
			desc = "Reference guide for " + i.Name
		}
		out = append(out, Tool{Name: name, Description: desc, InputSchema: loadSchema})
	}
	return out
}

// skillList is the part of the system prompt that lists the instruction
// skills offered ("" when none is), within the token budget (about four
// characters a token).
func (a *Agent) skillList(tools []Tool) string {
	budget := a.opts.InstructionTokens
	if budget <= 0 {
		budget = DefaultInstructionTokens
	}
	maxChars := budget * 4
	var listed []Tool
	for _, t := range tools {
		if isInstructionTool(t) {
			listed = append(listed, t) // made by instructionTools
		}
	}
	if len(listed) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nSkills (reference guides): before a task one of them covers, load it by calling its tool " +
		"(skill_ + its name) and follow it. A loaded skill that declares permissions limits what tools may touch " +
		"for the rest of this conversation.\n")
	head := b.Len()
	for n, t := range listed {
		desc := strings.Join(strings.Fields(t.Description), " ")
		if len(desc) > maxListedDescription {
			desc = clip(desc, maxListedDescription)
		}
		line := fmt.Sprintf("- %s: %s\n", strings.TrimPrefix(t.Name, InstructionToolPrefix), desc)
		if b.Len()-head+len(line) > maxChars {
			fmt.Fprintf(&b, "(%d more skills are not listed here; their skill_ tools still load them)\n", len(listed)-n)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// toolTarget is the catalog skill a tool call names: "skill_NAME" loads the
// instruction skill NAME, unless a skill is itself called "skill_NAME".
func (a *Agent) toolTarget(ctx context.Context, tool string) string {
	base, ok := strings.CutPrefix(tool, InstructionToolPrefix)
	if !ok || base == "" {
		return tool
	}
	if _, err := a.opts.Skills.Lookup(ctx, tool); err == nil {
		return tool
	}
	if i, err := a.opts.Skills.Lookup(ctx, base); err == nil && i.Type == catalog.TypeInstruction {
		return base
	}
	return tool
}

// sameSchema reports whether two schemas are the same map (loadSchema's
// identity marks the tools instructionTools made).
func sameSchema(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
