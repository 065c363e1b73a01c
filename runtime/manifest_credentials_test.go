package runtime

import (
	"reflect"
	"strings"
	"testing"
)

// networkSkill is a skill.toml with a network capability; credential
// sections are appended to it (line 9 is the first line after it).
const networkSkill = `[skill]
name = "gh"
version = "1.0.0"
description = "GitHub issues"
permission = "network"
[capabilities]
network = ["api.github.com", "*.example.com"]

`

func TestManifestCredentials(t *testing.T) {
	m, err := ParseManifest([]byte(networkSkill + `[credentials.github]
hosts = ["api.github.com"]
as = "bearer"

[credentials.example_key]
hosts = ["api.example.com", "API.example.com"]
as = "header"
name = "X-Api-Key"

[credentials.q]
hosts = ["*.example.com"]
as = "query"
name = "api_key"

[credentials.basic]
hosts = ["api.github.com"]
as = "basic"

[credentials.plain]
hosts = ["api.github.com"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Credential{
		{Name: "basic", Hosts: []string{"api.github.com"}, As: "basic"},
		{Name: "example_key", Hosts: []string{"api.example.com"}, As: "header", Param: "X-Api-Key"},
		{Name: "github", Hosts: []string{"api.github.com"}, As: "bearer"},
		{Name: "plain", Hosts: []string{"api.github.com"}, As: "bearer"},
		{Name: "q", Hosts: []string{"*.example.com"}, As: "query", Param: "api_key"},
	}
	if !reflect.DeepEqual(m.Credentials, want) {
		t.Errorf("credentials\n got %+v\nwant %+v", m.Credentials, want)
	}
}

func TestManifestCredentialsInvalid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []fieldWant
	}{
		{"no hosts", "[credentials.github]\nas = \"bearer\"\n", []fieldWant{{"credentials.github.hosts", 9, "required"}}},
		{"empty hosts", "[credentials.github]\nhosts = []\n", []fieldWant{{"credentials.github.hosts", 10, "required"}}},
		{"a host not declared", "[credentials.github]\nhosts = [\"evil.test\"]\n", []fieldWant{{"credentials.github.hosts[0]", 10, "not among capabilities.network"}}},
		{"a wildcard wider than declared", "[credentials.github]\nhosts = [\"*.github.com\"]\n", []fieldWant{{"credentials.github.hosts[0]", 10, "not among capabilities.network"}}},
		{"any host", "[credentials.github]\nhosts = [\"*\"]\n", []fieldWant{{"credentials.github.hosts[0]", 10, "is not a host"}}},
		{"a URL", "[credentials.github]\nhosts = [\"https://api.github.com/\"]\n", []fieldWant{{"credentials.github.hosts[0]", 10, ""}}},
		{"as unknown", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"cookie\"\n", []fieldWant{{"credentials.github.as", 11, `"cookie" must be "bearer", "basic", "header" or "query"`}}},
		{"header without name", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"header\"\n", []fieldWant{{"credentials.github.name", 9, "required for as = \"header\""}}},
		{"query without name", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"query\"\n", []fieldWant{{"credentials.github.name", 9, "required for as = \"query\""}}},
		{"bearer with a name", "[credentials.github]\nhosts = [\"api.github.com\"]\nname = \"X\"\n", []fieldWant{{"credentials.github.name", 11, "only for as"}}},
		{"a header buddy sets", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"header\"\nname = \"Host\"\n", []fieldWant{{"credentials.github.name", 12, "buddy sets itself"}}},
		{"Accept-Encoding", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"header\"\nname = \"accept-encoding\"\n", []fieldWant{{"credentials.github.name", 12, "buddy sets itself"}}},
		{"a Proxy- header", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"header\"\nname = \"Proxy-Token\"\n", []fieldWant{{"credentials.github.name", 12, "buddy sets itself"}}},
		{"a header name with a space", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"header\"\nname = \"X Key\"\n", []fieldWant{{"credentials.github.name", 12, "not an HTTP header name"}}},
		{"a query name with &", "[credentials.github]\nhosts = [\"api.github.com\"]\nas = \"query\"\nname = \"a&b=c\"\n", []fieldWant{{"credentials.github.name", 12, "not a plain query parameter"}}},
		{"a bad secret name", "[credentials.\"1x\"]\nhosts = [\"api.github.com\"]\n", []fieldWant{{"credentials.1x", 9, "not a secret name"}}},
		{"an unknown key", "[credentials.github]\nhosts = [\"api.github.com\"]\nvalue = \"ghp_inline\"\n", []fieldWant{{"credentials.github.value", 11, "unknown key"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(networkSkill + tt.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", m.Credentials)
			}
			got := manifestErrors(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(got), len(tt.want), err)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Path != w.path || g.Line != w.line || !strings.Contains(g.Msg, w.msg) {
					t.Errorf("error %d = {%q, line %d, %q}, want {%q, line %d, containing %q}", i, g.Path, g.Line, g.Msg, w.path, w.line, w.msg)
				}
			}
		})
	}
}

// TestManifestCredentialsNeedTheNetwork: a skill without the network may
// declare no credential (its hosts are within no declared network).
func TestManifestCredentialsNeedTheNetwork(t *testing.T) {
	doc := strings.Replace(networkSkill, `network = ["api.github.com", "*.example.com"]`, "", 1)
	doc = strings.Replace(doc, `"network"`, `"read_only"`, 1)
	_, err := ParseManifest([]byte(doc + "[credentials.github]\nhosts = [\"api.github.com\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "not among capabilities.network") {
		t.Fatalf("ParseManifest = %v", err)
	}
}
