package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's generated command section")

const (
	readmeBegin = "<!-- BEGIN generated command section: go test ./cmd/ctrkit -run TestREADME -update-readme -->\n"
	readmeEnd   = "<!-- END generated command section -->\n"
)

// TestREADME: README.md's command table, flag vocabulary and exit statuses
// are the ones the commands and the vocabulary define (.ci/run fails
// when they drift).
func TestREADME(t *testing.T) {
	p := filepath.Join("..", "..", "README.md")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, readmeBegin), strings.Index(s, readmeEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q … %q", p, readmeBegin, readmeEnd)
	}
	want := readmeCommands(newApp())
	got := s[i+len(readmeBegin) : j]
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(p, []byte(s[:i+len(readmeBegin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's command section differs from the commands (go test ./cmd/ctrkit -run TestREADME -update-readme):\n--- README\n%s--- commands\n%s", got, want)
}
