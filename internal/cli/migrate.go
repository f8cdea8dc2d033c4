package cli

import (
	"encoding/json"
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
		Use:   "migrate -f PATH... [--to v1] [--check] [--report FILE]",
		Short: "Migrate v1alpha5 Provisioners and v1beta1 objects to Karpenter v1, reporting every difference",
		Long: `Read any mix of karpenter.sh/v1alpha5 Provisioners, karpenter.k8s.aws/v1alpha1
AWSNodeTemplates, v1beta1 NodePools and EC2NodeClasses and v1 objects, and print Karpenter v1
EC2NodeClasses and NodePools. The report (stderr, or --report FILE) lists every semantic
difference with its source object and field: errors (no v1 equivalent: nothing is printed),
warnings (behaviour changes or something dropped) and info (an old default written out).
Migrating to Baselines and WorkloadClasses (--to poolsmith) is not available yet.`,
		Example: `  poolsmith migrate -f provisioners.yaml --to v1 > v1.yaml
  poolsmith migrate -f old/ --check --report report.json --report-format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if to != "v1" {
				return usageError{fmt.Errorf("--to %s: only v1 is available (migrating to Baselines and WorkloadClasses is not built yet)", to)}
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
			if err := writeReport(c, res.Report, reportFile, reportFormat); err != nil {
				return err
			}
			if res.Report.HasErrors() {
				return exitError{ExitFindings}
			}
			if err := writeMigrated(c.OutOrStdout(), res); err != nil {
				return err
			}
			if check && len(res.Report.Losses()) > 0 {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	c.Flags().StringSliceVarP(&files, "filename", "f", nil, "file, directory or - (stdin) of old Karpenter objects; repeatable")
	c.Flags().StringVar(&to, "to", "v1", "what to produce: v1 (Karpenter v1 NodePools and EC2NodeClasses)")
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
			return inputError{err.Error()}
		}
		defer f.Close()
		w = f
	}
	if format == "json" {
		if report == nil {
			report = migrate.Report{}
		}
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range report {
		fmt.Fprintln(tw, f.String())
	}
	return tw.Flush()
}

func writeMigrated(w io.Writer, res *migrate.Result) error {
	var docs []map[string]any
	for _, o := range append(objectsOf(res.NodeClasses), objectsOf(res.NodePools)...) {
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
