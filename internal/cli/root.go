// Package cli is Poolsmith's command line: the manager (the default command) and the
// offline commands that share the renderer with it.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes, one scheme for every command, as docs/cli.md documents them.
const (
	ExitOK       = 0
	ExitFindings = 1 // invalid input, lint errors, changes found
	ExitUsage    = 2 // a bad invocation: unknown command or flag, missing -f
	// ExitRuntime is a failure to do the work the input asked for: an unreachable or
	// refusing API server (RBAC included), an I/O error, a manager that stopped.
	ExitRuntime = 3
)

// exitError carries an exit code out of a command; its message is already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError marks a bad invocation: exit 2.
type usageError struct{ error }

// Execute runs the command line and returns the process exit code.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ie inputError
	if errors.As(err, &ie) {
		for _, msg := range ie {
			fmt.Fprintf(stderr, "error: %s\n", msg)
		}
		return ExitFindings
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "poolsmith: %v\nRun 'poolsmith --help' for usage.\n", err)
		return ExitUsage
	}
	// Everything else happened while doing the work: help would not help.
	fmt.Fprintf(stderr, "poolsmith: %v\n", err)
	return ExitRuntime
}

// exitCodesHelp ends every command's --help: one scheme for every command.
const exitCodesHelp = `Exit status: 0 success; 1 findings (lint errors, changes, migrate errors or, with
--check, warnings) or invalid input (stderr names the file, object and field); 2 usage
error (unknown command or flag, missing -f); 3 runtime failure (API server unreachable or
refusing the request, RBAC included; I/O error; the manager stopped with an error).`

// usageArgs makes every command's positional-argument errors (and the root's unknown
// commands) usage errors, and appends the exit codes to every command's help.
func usageArgs(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	if c.Long != "" {
		c.Long += "\n\n" + exitCodesHelp
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "poolsmith",
		Short: "Poolsmith renders WorkloadClasses into Karpenter NodePools and EC2NodeClasses",
		Long: `Poolsmith turns a Baseline (what every node must have) and WorkloadClasses (what a
workload needs) into fully expanded Karpenter NodePools and EC2NodeClasses.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	manager := newManagerCommand()
	root.AddCommand(manager, newRenderCommand(), newExplainCommand(), newLintCommand(), newDiffCommand(), newCostCommand(), newCatalogCommand(), newSignalsCommand(), newSimulateCommand(), newMigrateCommand())
	// With no command, poolsmith runs the manager, with the manager's flags.
	root.Flags().AddFlagSet(manager.Flags())
	root.Args = cobra.NoArgs
	root.RunE = manager.RunE
	usageArgs(root)
	return root
}

// writeJSON writes v as indented JSON and a newline, the shape of every --output json.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Command is the command tree as `poolsmith` runs it, for tools that document it
// (hack/clidocs writes docs/reference/cli from it).
func Command() *cobra.Command { return newRootCommand(os.Stdin, os.Stdout, os.Stderr) }
