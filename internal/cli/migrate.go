package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/migrate"
	"github.com/poolsmith/poolsmith/internal/render"
)

func newMigrateCommand() *cobra.Command {
	var files []string
	var to, reportFile, reportFormat string
	var check, noLegacy bool
	c := &cobra.Command{
		Use:   "migrate -f PATH... [--to poolsmith|v1] [--check] [--report FILE]",
		Short: "Migrate old Karpenter objects to Baselines and WorkloadClasses (or plain v1), reporting every difference",
		Long: `Read any mix of karpenter.sh/v1alpha5 Provisioners, karpenter.k8s.aws/v1alpha1
AWSNodeTemplates, v1beta1 NodePools and EC2NodeClasses and v1 objects. --to poolsmith (the
default) prints Baselines (one per distinct identity and network) and a WorkloadClass per
NodePool, each checked against its plain v1 conversion by rendering it; --to v1 prints
Karpenter v1 EC2NodeClasses and NodePools. The report (stderr, or --report FILE) lists every
semantic difference with its source object and field: errors (no equivalent: nothing is
printed), warnings (behaviour changes, something dropped, or an equivalence difference)
and info (an old default written out, a choice made).`,
		Example: `  poolsmith migrate -f provisioners.yaml > poolsmith.yaml
  poolsmith migrate -f old/ --to v1 --check --report report.json --report-format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if to != "v1" && to != "poolsmith" {
				return usageError{fmt.Errorf("--to %s: poolsmith or v1", to)}
			}
			if reportFormat != "text" && reportFormat != "json" {
				return usageError{fmt.Errorf("--report-format %q: text or json", reportFormat)}
			}
			if len(files) == 0 {
				return usageError{fmt.Errorf("no input: give -f PATH")}
			}
			objs, err := manifest.Load(files, c.InOrStdin())
			if err != nil {
				return inputError{err.Error()}
			}
			res := migrate.ToV1(objs, migrate.Options{LegacyDefaults: !noLegacy})
			report, objects := res.Report, append(objectsOf(res.NodeClasses), objectsOf(res.NodePools)...)
			if to == "poolsmith" && !res.Report.HasErrors() {
				ps := migrate.ToPoolsmith(res)
				report = append(report, ps.Report...)
				objects = append(objectsOf(ps.Baselines), objectsOf(ps.Classes)...)
			}
			if err := writeReport(c, report, reportFile, reportFormat); err != nil {
				return err
			}
			if report.HasErrors() {
				return exitError{ExitFindings}
			}
			if err := writeMigrated(c.OutOrStdout(), objects); err != nil {
				return err
			}
			if check && len(report.Losses()) > 0 {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	c.Flags().StringSliceVarP(&files, "filename", "f", nil, "file, directory or - (stdin) of old Karpenter objects; repeatable")
	c.Flags().StringVar(&to, "to", "poolsmith", "what to produce: poolsmith (Baselines and WorkloadClasses) or v1 (Karpenter v1 NodePools and EC2NodeClasses)")
	c.Flags().BoolVar(&check, "check", false, "exit 1 when anything would be lost or change behaviour (any warning)")
	c.Flags().BoolVar(&noLegacy, "no-legacy-defaults", false, "do not write out the v1alpha5 webhook's defaults (on-demand, amd64, linux, c/m/r, generation > 2)")
	c.Flags().StringVar(&reportFile, "report", "", "write the report to FILE instead of stderr")
	c.Flags().StringVar(&reportFormat, "report-format", "text", "report format: text or json")
	return c
}

func writeReport(c *cobra.Command, report migrate.Report, file, format string) error {
	w := c.ErrOrStderr()
	if file != "" {
		f, err := os.Create(file)
		if err != nil {
			return fmt.Errorf("writing the report: %w", err) // I/O: exit 3
		}
		defer f.Close()
		w = f
	}
	if format == "json" {
		if report == nil {
			report = migrate.Report{}
		}
		return writeJSON(w, report)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range report {
		fmt.Fprintln(tw, f.String())
	}
	return tw.Flush()
}

func writeMigrated(w io.Writer, objects []any) error {
	var docs []map[string]any
	for _, o := range objects {
		doc, err := render.CleanJSON(o)
		if err != nil {
			return err
		}
		docs = append(docs, doc)
	}
	return writeDocs(w, docs)
}

func objectsOf[T any](items []T) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}
