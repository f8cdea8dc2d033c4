package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// inputFlags are the -f flags every offline command takes.
type inputFlags struct {
	files   []string
	output  string
	region  string
	signals string
	// signalsMaxAge judges --signals as the manager's --signals-max-age judges its
	// ConfigMap.
	signalsMaxAge time.Duration
	// extraKinds are kinds besides Baseline and WorkloadClass the command reads.
	extraKinds map[string]bool
	// commitments is --commitments: a bare commitments.json, instead of the --signals
	// ConfigMap's.
	commitments string
	// keepUnresolved renders a Baseline whose commitment entries lack facts, leaving them
	// out (lint reports them) instead of refusing it.
	keepUnresolved bool
	// headroom is the manager's --headroom and --headroom-namespace, for the commands that
	// register them (off for the others).
	headroom headroomFlags
}

func (f *inputFlags) register(c *cobra.Command, outputs string) {
	f.registerInput(c, outputs)
	c.Flags().StringVar(&f.region, "region", catalog.DefaultRegion, "AWS region whose prices and spot signals cost weights use")
	c.Flags().StringVar(&f.signals, "signals", "", "spot signals to price with: the signals ConfigMap (YAML) or the Spot Instance Advisor feed (spot-advisor-data.json)")
	c.Flags().DurationVar(&f.signalsMaxAge, "signals-max-age", operator.DefaultSignalsMaxAge, "as the manager's --signals-max-age: a --signals ConfigMap fetched longer ago (or undated, or dated more than 5m ahead) is Stale, and the embedded catalog prices instead")
	f.registerCommitments(c)
}

// registerCommitments registers --commitments FILE, the export the Baselines' commitments
// take the facts they leave out from.
func (f *inputFlags) registerCommitments(c *cobra.Command) {
	c.Flags().StringVar(&f.commitments, "commitments-file", "", "a `FILE` holding the signals' commitments.json as poolsmith signals commitments writes it (bare, or in the signals ConfigMap): the facts a Baseline's commitment entries leave out, by id; default: the --signals ConfigMap's key, if any")
}

// registerInput registers -f and -o only.
func (f *inputFlags) registerInput(c *cobra.Command, outputs string) {
	c.Flags().StringSliceVarP(&f.files, "filename", "f", nil, "file, directory or - (stdin) of multi-document YAML with Baselines and WorkloadClasses; repeatable")
	c.Flags().StringVarP(&f.output, "output", "o", "", "output format: "+outputs)
}

// options are the render options the flags give: region, and the catalog with any
// signals applied. Signals the manager would judge not Fresh are not applied, as the
// manager does not apply them, and stderr says why.
func (f *inputFlags) options(stderr io.Writer) (render.Options, error) {
	cat, err := catalog.Load()
	if err != nil {
		return render.Options{}, err
	}
	// Offline no node is known, so every commitment has room (docs/commitments.md).
	opts := render.Options{Region: f.region, Catalog: cat, Commitments: render.CommitmentOptions{Offline: true}}
	if err := f.headroom.apply(&opts.Capabilities); err != nil {
		return opts, err
	}
	if opts.Capabilities.HeadroomOn() {
		// The schedule is read now, as the manager reads it.
		opts.Headroom.Now = time.Now()
	}
	if opts.Commitments.Export, err = f.export(cat); err != nil {
		return opts, err
	}
	if f.signals == "" {
		return opts, nil
	}
	if f.signalsMaxAge <= 0 {
		return opts, usageError{fmt.Errorf("--signals-max-age %s must be positive", f.signalsMaxAge)}
	}
	data, err := manifest.ReadFile(f.signals)
	if err != nil {
		return opts, inputError{fmt.Sprintf("--signals: %v", err)}
	}
	if cm := signalsConfigMap(data); cm != nil && cm.Data[signals.AdvisorKey] == "" && cm.Data[signals.CommitmentsKey] != "" {
		// What `signals commitments --dry-run` prints: the export, no spot signals.
		return opts, nil
	}
	s, err := signals.FromFile(data, f.signals, f.region)
	if err != nil {
		return opts, inputError{fmt.Sprintf("--signals: %v", err)}
	}
	if s == nil {
		return opts, inputError{fmt.Sprintf("--signals %s has no Linux data for region %s", f.signals, f.region)}
	}
	// A bare feed has no fetched-at: signals publish dates it when it publishes it, so the
	// manager would use it as it is now.
	if !s.BareFeed {
		if fresh := signals.Assess(s, "", time.Now(), f.signalsMaxAge); fresh.Reason != v1alpha1.ReasonFresh {
			fmt.Fprintf(stderr, "warning: --signals: %s: %s\n", fresh.Reason, fresh.Message)
			return opts, nil
		}
	}
	opts.Catalog = s.Apply(cat)
	return opts, nil
}

// export is the commitments.json the Baselines' entries take their facts from:
// --commitments-file, else the --signals ConfigMap's key (none in a bare advisor feed). An
// export that cannot be read is refused, naming the file and the field: offline there is
// nothing to keep running.
func (f *inputFlags) export(cat *catalog.Catalog) (commitment.Export, error) {
	flag, file := "--commitments-file", f.commitments
	if file == "" {
		flag, file = "--signals", f.signals
	}
	if file == "" {
		return commitment.Export{}, nil
	}
	data, err := manifest.ReadFile(file)
	if err != nil {
		return commitment.Export{}, inputError{fmt.Sprintf("%s: %v", flag, err)}
	}
	if flag == "--signals" && signalsConfigMap(data) == nil {
		return commitment.Export{}, nil
	}
	facts, err := signals.CommitmentsFromFile(data, file, cat)
	if err != nil {
		return commitment.Export{}, inputError{fmt.Sprintf("%s: %v", flag, err)}
	}
	return commitment.Export{Facts: facts}, nil
}

// signalsConfigMap is the ConfigMap a --signals file holds, nil when it holds a bare feed
// (or is not a ConfigMap FromFile would read).
func signalsConfigMap(data []byte) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, cm); err != nil || cm.Kind != "ConfigMap" {
		return nil
	}
	return cm
}

// load checks -o against the allowed formats and reads the input.
func (f *inputFlags) load(c *cobra.Command, allowed ...string) (*input, error) {
	if !slices.Contains(allowed, f.output) {
		return nil, usageError{fmt.Errorf("unknown output format %q (allowed: %v)", f.output, allowed[1:])}
	}
	opts, err := f.options(c.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	in, err := loadInput(f.files, c.InOrStdin(), c.ErrOrStderr(), f.extraKinds, opts.Commitments.Export, f.keepUnresolved)
	if err != nil {
		return nil, err
	}
	in.opts = opts
	return in, nil
}

// renderAll loads the input and renders it, failing on any class that cannot render.
func (f *inputFlags) renderAll(c *cobra.Command, allowed ...string) ([]*render.Result, error) {
	in, err := f.load(c, allowed...)
	if err != nil {
		return nil, err
	}
	return in.renderAll()
}

func newRenderCommand() *cobra.Command {
	var flags inputFlags
	c := &cobra.Command{
		Use:   "render -f PATH [-f PATH ...]",
		Short: "Print the EC2NodeClasses, NodePools, AccessRules and headroom the classes render to",
		Long: `Render every WorkloadClass on top of its Baseline and print the generated
EC2NodeClasses, then NodePools, then NodeOverlays, then the AccessRules by which the
admission policies the chart installs enforce spec.access and namespace default classes,
then, with --headroom=pods, the placeholder Deployments of spec.headroom, or with
--headroom=capacitybuffer its PodTemplates and then CapacityBuffers, sorted by name,
as the controller would apply them
(without the ownerReference only the cluster can set). Other kinds are ignored with a
warning. Invalid input prints nothing on stdout, names the file, object and field on
stderr, and exits 1.`,
		Example: `  poolsmith render -f config/samples/
  cat classes.yaml | poolsmith render -f - -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			results, err := flags.renderAll(c, "", "yaml", "json")
			if err != nil {
				return err
			}
			return writeObjects(c.OutOrStdout(), results, flags.output)
		},
	}
	flags.register(c, "yaml (default) or json (a v1 List)")
	flags.headroom.register(c.Flags(), "print each class's headroom children")
	return c
}

// sortedObjects are every rendered object: EC2NodeClasses, then NodePools, then
// NodeOverlays, then the AccessRules, then the headroom Deployments, PodTemplates and
// CapacityBuffers (each after the template it refers to), each by name.
func sortedObjects(results []*render.Result) ([]map[string]any, error) {
	var docs []map[string]any
	for _, r := range results {
		objs, err := r.Objects()
		if err != nil {
			return nil, err
		}
		docs = append(docs, objs...)
	}
	rank := map[string]int{"EC2NodeClass": 0, "NodePool": 1, "NodeOverlay": 2, render.KindAccessRule: 3, "Deployment": 4, "PodTemplate": 5, "CapacityBuffer": 6}
	sort.SliceStable(docs, func(i, j int) bool {
		ki, kj := rank[docs[i]["kind"].(string)], rank[docs[j]["kind"].(string)]
		if ki != kj {
			return ki < kj
		}
		return name(docs[i]) < name(docs[j])
	})
	return docs, nil
}

func name(doc map[string]any) string {
	md, _ := doc["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

func writeObjects(w io.Writer, results []*render.Result, format string) error {
	docs, err := sortedObjects(results)
	if err != nil {
		return err
	}
	if format == "json" {
		items := make([]any, len(docs))
		for i, d := range docs {
			items[i] = d
		}
		return writeJSON(w, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	return writeDocs(w, docs)
}

// writeDocs writes objects as multi-document YAML.
func writeDocs(w io.Writer, docs []map[string]any) error {
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
