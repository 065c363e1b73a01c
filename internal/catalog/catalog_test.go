package catalog_test

import (
	"testing"

	"github.com/buddy-run/buddy/internal/catalog"
)

func TestArgumentsHashIsCanonical(t *testing.T) {
	base := catalog.ArgumentsHash([]byte(`{"path":"a.txt","content":"x"}`))
	same := []string{
		`{"content":"x","path":"a.txt"}`,
		" {\n\"path\" : \"a.txt\",\t\"content\":\"x\"} ",
		`{"path":"a.txt","content":"\u0078"}`,
	}
	for _, s := range same {
		if got := catalog.ArgumentsHash([]byte(s)); got != base {
			t.Errorf("%q hashes to %s, want %s", s, got, base)
		}
	}
	different := []string{
		`{"path":"b.txt","content":"x"}`,
		`{"path":"a.txt","content":"x","mode":1}`,
		`{"path":"a.txt","content":"x "}`,
		`{"path":"a.txt"}`,
		`not json`,
	}
	for _, s := range different {
		if got := catalog.ArgumentsHash([]byte(s)); got == base {
			t.Errorf("%q hashes like the original", s)
		}
	}
	// Numbers keep their literal: 1 and 1.0 are different arguments.
	if catalog.ArgumentsHash([]byte(`{"n":1}`)) == catalog.ArgumentsHash([]byte(`{"n":1.0}`)) {
		t.Error("1 and 1.0 hash alike")
	}
}

func TestParsePolicy(t *testing.T) {
	for _, ok := range []string{"always", "once", "trust"} {
		if p, err := catalog.ParsePolicy(ok); err != nil || string(p) != ok {
			t.Errorf("ParsePolicy(%q) = %q, %v", ok, p, err)
		}
	}
	for _, bad := range []string{"", "Always", "never", "trust "} {
		if _, err := catalog.ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", bad)
		}
	}
	if catalog.DefaultPolicy(catalog.ReadOnly) != catalog.Trust || catalog.DefaultPolicy(catalog.Network) != catalog.Always {
		t.Error("wrong default policies")
	}
}
