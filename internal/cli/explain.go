package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/poolsmith/poolsmith/internal/render"
)

func newExplainCommand() *cobra.Command {
	var flags inputFlags
	var object string
	c := &cobra.Command{
		Use:   "explain -f PATH [--object KIND/NAME]",
		Short: "Show every generated field with its value and where it came from",
		Long: `Print each field of each generated object with its value and origin:
karpenter-default, baseline, profile:<Name>, class or computed:<what>. Paths are
JSONPath-like; map entries and list items are named by key, e.g.
spec.template.spec.requirements[kubernetes.io/arch].

Then a rebalance section: each class's spec.rebalance as the rebalance controller
resolves it, one setting a line (WorkloadClass/NAME, spec.rebalance.FIELD), from the
class, else its Baseline (baseline), else Poolsmith's default (poolsmith-default).
Then a limits section: each class's class-wide limits (spec.limits[NAME]), from the
class, else its Baseline's guardrails.ceilings (baseline:guardrail). Then, when its
Baseline declares commitments, a commitments section: the class's
spec.weighting.commitments, and each commitment (commitments[ID]) with its share and
state: offline, no nodes are known, so every commitment is Open; an expired one is
refused. Then each of its facts (commitments[ID].FIELD) with its origin: the Baseline
(baseline), or the --signals or --commitments-file export (signals:commitments
EXPORTED-AT). A rung a commitment ranked names it in its spec.weight origin.
With -o json these are more entries of the same list. --object WorkloadClass/NAME (or
NAME) selects a class's section.`,
		Example: `  poolsmith explain -f config/samples/ --object NodePool/ci-spot-amd64
  poolsmith explain -f config/samples/ --object WorkloadClass/ci
  poolsmith explain -f config/samples/ --object gpu -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			results, err := flags.renderAll(c, "", "table", "json")
			if err != nil {
				return err
			}
			// The class's resolved settings, each section aligned on its own: they are not
			// fields of a generated object.
			sections := []struct {
				title  string
				match  func(path string) bool
				fields render.Provenance
			}{
				{title: "REBALANCE (spec.rebalance as resolved: class, else baseline, else poolsmith-default)",
					match: func(p string) bool { return strings.HasPrefix(p, "spec.rebalance.") }},
				{title: "LIMITS (class-wide, split across rungs: the class's, else its Baseline's ceiling, baseline:guardrail)",
					match: func(p string) bool { return strings.HasPrefix(p, "spec.limits[") }},
				{title: "COMMITMENTS (the Baseline's Savings Plans and Reserved Instances as they price the class's rungs: the class's use, each commitment's share, state and entitlement, and what was left out)",
					match: func(p string) bool { return p == "spec.weighting.commitments" || strings.HasPrefix(p, "commitments[") }},
			}
			var fields, settings render.Provenance
			for _, r := range results {
				for _, f := range r.Provenance {
					if matchesObject(f.Object, object) {
						fields = append(fields, f)
					}
				}
				for _, f := range r.Settings.Fields {
					for i := range sections {
						if matchesObject(f.Object, object) && sections[i].match(f.Path) {
							sections[i].fields = append(sections[i].fields, f)
							break
						}
					}
				}
			}
			for _, s := range sections {
				settings = append(settings, s.fields...)
			}
			if object != "" && len(fields) == 0 && len(settings) == 0 {
				return inputError{fmt.Sprintf("--object %s: no generated object has that name", object)}
			}
			if flags.output == "json" {
				return writeJSON(c.OutOrStdout(), append(fields, settings...))
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 0, 2, ' ', 0)
			printed := len(fields) > 0
			if printed {
				fmt.Fprintln(w, "OBJECT\tPATH\tVALUE\tORIGIN")
				for _, f := range fields {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Object, f.Path, oneLine(f.Value), f.Origin)
				}
			}
			for _, s := range sections {
				if len(s.fields) == 0 {
					continue
				}
				if printed {
					fmt.Fprintln(w)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), s.title)
				fmt.Fprintln(w, "OBJECT\tSETTING\tVALUE\tORIGIN")
				for _, f := range s.fields {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Object, f.Path, f.Value, f.Origin)
				}
				printed = true
			}
			return w.Flush()
		},
	}
	flags.register(c, "table (default) or json")
	flags.headroom.register(c.Flags(), "explain each class's headroom children, field by field")
	c.Flags().StringVar(&object, "object", "", "only this object: KIND/NAME, or NAME for every kind with that name")
	return c
}

// matchesObject matches KIND/NAME exactly (kind case-insensitively), or NAME alone.
func matchesObject(object, filter string) bool {
	if filter == "" {
		return true
	}
	kind, name, _ := strings.Cut(object, "/")
	if fk, fn, ok := strings.Cut(filter, "/"); ok {
		return strings.EqualFold(fk, kind) && fn == name
	}
	return filter == name
}

func oneLine(s string) string {
	const max = 80
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}
