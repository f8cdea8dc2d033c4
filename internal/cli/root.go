// Package cli is Poolsmith's command line: the manager (the default command) and the
// offline commands that share the renderer with it.
package cli

import (
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
	fmt.Fprintf(stderr, "poolsmith: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	// cobra's own flag and argument errors are usage errors.
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
	return root
}
