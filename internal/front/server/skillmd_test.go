package server_test

import (
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
)

// TestAPISkillsTypes: GET /api/skills lists SKILL.md skills with their type
// (and the description fallback) when the gate serves them.
func TestAPISkillsTypes(t *testing.T) {
	cat := skillmd.NewCatalog([]*skillmd.Skill{
		skillmd.BuildInstructionSkill("doc-coauthoring", "", "x", ""),
		skillmd.BuildFromSteps("backup", "Back up.", []skillmd.Step{{Tool: "read_file"}}),
	}, skillmd.CatalogOptions{})
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.NewGate = func(a approval.Asker) server.Gate { return approval.New(cat, approval.Options{Asker: a}) }
	}})
	var out struct {
		Skills []struct {
			Name, Type, Description, Approval string
			Permission                        string `json:"permission_level"`
		}
	}
	s.getJSON(t, "/api/skills", &out)
	if len(out.Skills) != 2 {
		t.Fatalf("skills = %+v", out.Skills)
	}
	b, d := out.Skills[0], out.Skills[1]
	if b.Name != "backup" || b.Type != "composite" || d.Name != "doc-coauthoring" || d.Type != "instruction" ||
		d.Description != "Reference guide for doc-coauthoring" || d.Permission != "read_only" || d.Approval != "trust" {
		t.Errorf("skills = %+v", out.Skills)
	}
}
