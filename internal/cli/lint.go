package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

func newLintCommand() *cobra.Command {
	var flags inputFlags
	var reservationsFile string
	c := &cobra.Command{
		Use:   "lint -f PATH [-f PATH ...]",
		Short: "Check classes across rungs and classes for mistakes Karpenter accepts silently",
		Long: `Render every class and check: overlapping rungs; classes that can take the same
pods with overlapping weight bands; rungs that select no instance type; Baseline labels
or tags a class contradicts; taints pods must tolerate; fallback expiry without a
terminationGracePeriod; spot rungs that allow types whose spot discount is an outlier in
their category (a warning when they decide the ranking, else a note); access rules: a
class with taints but no spec.access, an access rule whose taints are all shared with
another class, and, against the Namespaces in the input, a namespace given two default
classes, a default class whose access rule excludes the namespace, and an access rule
naming a namespace whose default is another class; and open capacity reservations a
class's on-demand rungs could use but leave unused because the class has no reserved
rung (Karpenter launches them with CapacityReservationPreference: none): those its
Baseline selects with instanceMatchCriteria: open, and, with --capacity-reservations,
the open ones with room that aws ec2 describe-capacity-reservations printed; a Baseline's
commitment entry with no facts in the Baseline or the signals' commitments.json
(commitment-unresolved, an error), and an export older than 30 days
(commitments-export-old). Each finding is an
error, a warning or a note (info), one a line. Exits 1 when there is an error.`,
		Example: `  poolsmith lint -f config/samples/
  poolsmith lint -f classes/ -o json
  aws ec2 describe-capacity-reservations --filters Name=state,Values=active > cr.json
  poolsmith lint -f classes/ --capacity-reservations cr.json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			flags.extraKinds = map[string]bool{"Namespace": true}
			// An entry without facts is a finding (commitment-unresolved), not a refusal.
			flags.keepUnresolved = true
			in, err := flags.load(c, "", "text", "json")
			if err != nil {
				return err
			}
			var reservations []lint.Reservation
			if reservationsFile != "" {
				data, err := manifest.ReadFile(reservationsFile)
				if err != nil {
					return inputError{"--capacity-reservations: " + err.Error()}
				}
				if reservations, err = lint.ParseReservations(reservationsFile, data); err != nil {
					return inputError{"--capacity-reservations " + err.Error()}
				}
			}
			classes := in.renderEach()
			findings := append(lint.Lint(classes, in.opts), lint.Access(classes, in.namespaces())...)
			findings = append(findings, lint.OpenReservations(classes, reservations, in.opts, time.Time{})...)
			out := c.OutOrStdout()
			if flags.output == "json" {
				if findings == nil {
					findings = []lint.Finding{}
				}
				if err := writeJSON(out, findings); err != nil {
					return err
				}
			} else {
				w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				for _, f := range findings {
					fmt.Fprintln(w, f.String())
				}
				if err := w.Flush(); err != nil {
					return err
				}
				count := map[lint.Severity]int{}
				for _, f := range findings {
					count[f.Severity]++
				}
				fmt.Fprintf(c.ErrOrStderr(), "%d classes, %d errors, %d warnings, %d notes\n", len(in.classes), count[lint.Error], count[lint.Warning], count[lint.Info])
			}
			if lint.HasErrors(findings) {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	flags.register(c, "text (default) or json")
	c.Flags().StringVar(&reservationsFile, "capacity-reservations", "", "a file with what `aws ec2 describe-capacity-reservations` printed (JSON): open reservations with room that a class without a reserved rung leaves unused")
	return c
}
