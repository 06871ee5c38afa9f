package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// cliReferencePath is the CLI reference, generated from the commands' own
// help texts; `make docs` rewrites it (MARLOW_UPDATE_DOCS=1 on this test).
var cliReferencePath = filepath.Join("..", "..", "docs", "cli.md")

// cliReference renders every command's --help (the root's first, then each
// command and its subcommands in cobra's order), one section each.
func cliReference(t *testing.T) string {
	t.Helper()
	root := newRootCmd()
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	b.WriteString("# marlow CLI reference\n\n")
	b.WriteString("Generated from each command's `--help` by `make docs`; `go test ./cmd/marlow`\n")
	b.WriteString("(TestCLIReference) fails when a command's help and this page differ.\n")
	b.WriteString("Do not edit it by hand: change the command's help and run `make docs`.\n\n")
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		cmds = append(cmds, c)
		if c.Name() == "completion" {
			return // one page for the shells' scripts is enough
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	b.WriteString("Commands:")
	for _, c := range cmds[1:] {
		path := c.CommandPath()
		fmt.Fprintf(&b, " [%s](#%s)", strings.TrimPrefix(path, "marlow "), strings.ReplaceAll(path, " ", "-"))
	}
	b.WriteString(".\n")
	for _, c := range cmds {
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		if err := c.Help(); err != nil {
			t.Fatalf("%s --help: %v", c.CommandPath(), err)
		}
		text := strings.TrimRight(out.String(), "\n")
		if strings.Contains(text, "```") {
			t.Fatalf("%s --help holds a code fence, which would break the page", c.CommandPath())
		}
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s\n```\n", c.CommandPath(), text)
	}
	return b.String()
}

// TestCLIReference: docs/cli.md is what the commands' --help print now.
func TestCLIReference(t *testing.T) {
	want := cliReference(t)
	if os.Getenv("MARLOW_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(cliReferencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(cliReferencePath)
	if err != nil {
		t.Fatalf("%v: generate it with make docs", err)
	}
	if string(have) != want {
		hl, wl := strings.Split(string(have), "\n"), strings.Split(want, "\n")
		i := 0
		for i < len(hl) && i < len(wl) && hl[i] == wl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(end of text)"
		}
		t.Errorf("docs/cli.md differs from the commands' --help from line %d:\n  page: %s\n  help: %s\nrun make docs and commit docs/cli.md", i+1, line(hl), line(wl))
	}
}
