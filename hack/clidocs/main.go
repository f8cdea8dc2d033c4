// Command clidocs writes the CLI reference, one Markdown page per command, from the cobra
// command tree itself, so the reference cannot drift from the flags the binary takes.
//
//	go run ./hack/clidocs docs/reference/cli
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/poolsmith/poolsmith/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: clidocs DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "clidocs:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	// Pages of commands that no longer exist must not survive a regeneration.
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := cli.Command()
	// No date footer: the pages are committed and `make verify` compares them.
	var disable func(*cobra.Command)
	disable = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, s := range c.Commands() {
			disable(s)
		}
	}
	disable(root)
	return doc.GenMarkdownTree(root, dir)
}
