// Package cli is Poolsmith's command line: the manager (the default command) and the
// offline commands that share the renderer with it.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes, as the README documents them.
const (
	ExitOK       = 0
	ExitFindings = 1 // invalid input, lint errors, changes found
	ExitUsage    = 2
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
	// Everything else is a bad invocation: unknown flags or commands, missing -f.
	fmt.Fprintf(stderr, "poolsmith: %v\nRun 'poolsmith --help' for usage.\n", err)
	return ExitUsage
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
	root.AddCommand(manager, newRenderCommand(), newExplainCommand(), newLintCommand(), newDiffCommand(), newCatalogCommand(), newSignalsCommand(), newSimulateCommand(), newMigrateCommand())
	// With no command, poolsmith runs the manager, with the manager's flags.
	root.Flags().AddFlagSet(manager.Flags())
	root.Args = cobra.NoArgs
	root.RunE = manager.RunE
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
