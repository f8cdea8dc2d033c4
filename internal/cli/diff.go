package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// diffFlags are what the manager would be run with: the plan depends on them.
type diffFlags struct {
	inputFlags
	kubeconfig       string
	signalsConfigMap string
	signalsMaxAge    time.Duration
	nodeOverlays     bool
	accessPolicies   bool
	openDwell        time.Duration
}

func newDiffCommand() *cobra.Command {
	var flags diffFlags
	c := &cobra.Command{
		Use:   "diff -f PATH [--kubeconfig FILE]",
		Short: "Show what the controller would write for the classes in a live cluster, and what would drift",
		Long: `Plan every class against the live cluster exactly as the controller's next reconcile
would: the same Baseline lookup (the input's Baseline, else the cluster's), the same spot
signals (the cluster's signals ConfigMap, judged by --signals-max-age), the same usage
(each NodePool's status.resources), the same ownership (a controller ownerReference to the
class as the cluster holds it) and the same validation against Karpenter's CRDs. It prints
one line per object: create; update (with each field set, changed or removed, and "will
drift" when Karpenter's own hash changes, "may drift" when AMI, subnet or security-group
selectors change); unchanged; conflict (a name held by an object the class does not
control: then nothing of the class is written); and, for NodePools the class no longer
renders, delete, retire, retiring or orphan by its prunePolicy. Exits 1 when anything
would be written, a conflict blocks the class or a write would be refused.`,
		Example: `  poolsmith diff -f config/samples/ --kubeconfig ~/.kube/config`,
		Args:    cobra.NoArgs,
		RunE:    func(c *cobra.Command, _ []string) error { return runDiff(c, &flags) },
	}
	flags.registerInput(c, "text")
	c.Flags().StringVar(&flags.region, "region", catalog.DefaultRegion, "the cluster's AWS region, as the manager's --region")
	c.Flags().StringVar(&flags.kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config")
	c.Flags().StringVar(&flags.signalsConfigMap, "signals-configmap", operator.DefaultSignalsConfigMap.String(), "NAMESPACE/NAME of the signals ConfigMap, as the manager's --signals-configmap")
	c.Flags().DurationVar(&flags.signalsMaxAge, "signals-max-age", operator.DefaultSignalsMaxAge, "as the manager's --signals-max-age")
	c.Flags().BoolVar(&flags.nodeOverlays, "node-overlays", false, "as the manager's --node-overlays")
	c.Flags().BoolVar(&flags.accessPolicies, "access-policies", true, "as the manager's --access-policies")
	c.Flags().DurationVar(&flags.openDwell, "commitment-open-dwell", commitment.DefaultOpenDwell, "as the manager's --commitment-open-dwell: with the classes' status.commitments and NodeClaims, it decides which commitments still rank each class's rungs")
	flags.headroom.register(c.Flags(), "plan each class's headroom children as the manager would")
	return c
}

func runDiff(c *cobra.Command, flags *diffFlags) error {
	ns, name, ok := strings.Cut(flags.signalsConfigMap, "/")
	if !ok || ns == "" || name == "" {
		return usageError{fmt.Errorf("--signals-configmap %q must be NAMESPACE/NAME", flags.signalsConfigMap)}
	}
	if flags.output != "" && flags.output != "text" {
		return usageError{fmt.Errorf("unknown output format %q (allowed: [text])", flags.output)}
	}
	if flags.openDwell < 0 {
		return usageError{fmt.Errorf("--commitment-open-dwell %s is negative: it is how long room must hold before a commitment opens again, e.g. 5m", flags.openDwell)}
	}
	var headroom capabilities.Capabilities
	if err := flags.headroom.apply(&headroom); err != nil {
		return err
	}
	// Entries without facts are left to the render, which resolves them with the cluster's
	// export as the manager does.
	in, err := loadInput(flags.files, c.InOrStdin(), c.ErrOrStderr(), nil, commitment.Export{}, true)
	if err != nil {
		return err
	}
	signalsCM := types.NamespacedName{Namespace: ns, Name: name}
	cl, ctx, cat, err := liveCatalog(c, flags.kubeconfig, signalsCM, flags.region, flags.signalsMaxAge)
	if err != nil {
		return err
	}
	export, err := observe.ReadExport(ctx, &signals.Provider{ConfigMap: signalsCM, Region: flags.region}, cl)
	if err != nil {
		return err
	}
	caps := capabilities.Capabilities{NodeOverlays: flags.nodeOverlays, NoAccessPolicies: !flags.accessPolicies,
		Headroom: headroom.Headroom, HeadroomNamespace: headroom.HeadroomNamespace}
	cluster := observe.Cluster{Cached: cl, Direct: cl, Capabilities: caps}
	// The signals are read once for every class: the catalog is given, not priced per class.
	// Commitments rank as the manager ranks them: each one's state follows from the class's
	// status.commitments (read below) and its NodeClaims, and its part of the share from the
	// Baseline's classes, the input's in place of the cluster's.
	source := observe.Source{Baselines: in.baselines, Reader: inputClasses{lenientReader{cl}, in.classes},
		Options:  render.Options{Region: flags.region, Catalog: cat, Capabilities: caps, Commitments: render.CommitmentOptions{Export: export}},
		Tracking: &observe.Tracking{Now: time.Now(), Dwell: flags.openDwell}}
	if caps.HeadroomOn() {
		// A percentage is of the same live requests the manager reads.
		source.Usage = &observe.Usage{NodeClaims: cl, Pods: cl, Namespace: caps.HeadroomNamespaceOrDefault()}
	}
	d := differ{cluster: cluster, source: source, reader: cl, in: in, w: c.OutOrStdout()}
	changed, err := d.run(ctx)
	if err != nil {
		return err
	}
	if changed {
		return exitError{ExitFindings}
	}
	return nil
}

// differ plans each input class against the cluster and prints the plans.
type differ struct {
	cluster observe.Cluster
	// source gathers each class's inputs as the controller does: the input's Baseline,
	// else the cluster's.
	source observe.Source
	reader client.Reader
	in     *input
	w      io.Writer
}

// run reports whether the controller would write anything or be blocked.
func (d differ) run(ctx context.Context) (bool, error) {
	changed := false
	var invalid inputError
	for _, wc := range d.in.classes {
		ref := "WorkloadClass/" + wc.Name
		owner := wc.DeepCopy()
		// Ownership is by the class's UID as the cluster holds it (a class not created yet
		// owns nothing), and commitments rank from its status.commitments. Only those are
		// read, so a live class that does not decode (internal/decode) does not stop the
		// diff of the input's.
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("WorkloadClass"))
		switch err := d.reader.Get(ctx, client.ObjectKey{Name: wc.Name}, live); {
		case err == nil:
			owner.UID = live.GetUID()
			owner.Status.Commitments = liveCommitments(live)
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("reading %s: %w", ref, err)
		}
		inputs, err := d.source.Assemble(ctx, owner)
		if err != nil {
			return false, err
		}
		baseline := inputs.Baseline
		if baseline == nil {
			fmt.Fprintf(d.w, "%s: Baseline %q is neither in the input nor in the cluster: the controller leaves its children as they are\n", ref, wc.BaselineName())
			changed = true
			continue
		}
		if why := decode.Error(baseline); why != "" {
			fmt.Fprintf(d.w, "%s: Baseline %q in the cluster does not decode (%s): the controller reports InvalidSpec and leaves its children as they are\n", ref, wc.BaselineName(), why)
			changed = true
			continue
		}
		out, err := d.cluster.Plan(ctx, inputs.Inputs)
		var rerrs render.Errors
		if errors.As(err, &rerrs) {
			where := d.in.where[ref]
			for _, e := range rerrs {
				invalid = append(invalid, fmt.Sprintf("%s: %s (%s)", where, e.Error(), e.Reason))
			}
			continue
		}
		if err != nil {
			return false, err
		}
		if printPlan(d.w, out) {
			changed = true
		}
	}
	if len(invalid) > 0 {
		return false, invalid
	}
	return changed, nil
}

// liveCommitments is a live class's status.commitments, or none when they do not decode
// (the states then start afresh, as for a new class).
func liveCommitments(live *unstructured.Unstructured) []v1alpha1.ClassCommitmentStatus {
	raw, ok, err := unstructured.NestedFieldNoCopy(live.Object, "status", "commitments")
	if !ok || err != nil {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out []v1alpha1.ClassCommitmentStatus
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// inputClasses lists WorkloadClasses as the cluster will hold them once the input is
// applied: the input's in place of the live ones of the same name, and the new ones too,
// so each class's part of a commitment is split as the manager will split it.
type inputClasses struct {
	client.Reader
	classes []*v1alpha1.WorkloadClass
}

func (r inputClasses) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	l, ok := list.(*v1alpha1.WorkloadClassList)
	if !ok {
		return nil
	}
	for _, wc := range r.classes {
		i := slices.IndexFunc(l.Items, func(live v1alpha1.WorkloadClass) bool { return live.Name == wc.Name })
		if i < 0 {
			l.Items = append(l.Items, *wc.DeepCopy())
			continue
		}
		l.Items[i] = *wc.DeepCopy()
	}
	return nil
}

// lenientReader reads Baselines as the manager's cache does (internal/decode), so one
// that does not decode whole is reported, not fatal; it reads other kinds as they are.
type lenientReader struct{ client.Reader }

func (r lenientReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	b, ok := obj.(*v1alpha1.Baseline)
	if !ok {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Baseline"))
	if err := r.Reader.Get(ctx, key, u, opts...); err != nil {
		return err
	}
	return decode.Unstructured(u, b)
}

// printPlan prints one line per step, with the fields of updates; it reports whether the
// controller would write anything or be held back.
func printPlan(w io.Writer, out *observe.Outcome) bool {
	p := out.Plan
	for _, s := range p.Steps {
		switch s.Action {
		case plan.Update, plan.Revive:
			note := ""
			if s.Drift != "" {
				note = " (" + string(s.Drift) + ")"
			}
			if s.Action == plan.Revive {
				note += " (revive: undo its retirement)"
			}
			fmt.Fprintf(w, "%s: update%s\n", s.Ref(), note)
			for _, ch := range append(append([]diff.Change{}, s.Changes...), s.Removed...) {
				fmt.Fprintf(w, "    %s\n", ch)
			}
		case plan.Conflict:
			fmt.Fprintf(w, "%s: conflict: exists and is not controlled by class %s; the controller leaves it untouched\n", s.Ref(), p.Class)
		case plan.Delete:
			fmt.Fprintf(w, "%s: delete: no longer rendered by class %s\n", s.Ref(), p.Class)
		case plan.Retire:
			fmt.Fprintf(w, "%s: retire: no longer rendered by class %s; limits set to zero, deleted once Karpenter reports no nodes\n", s.Ref(), p.Class)
		case plan.Retiring:
			fmt.Fprintf(w, "%s: retiring: no longer rendered by class %s; waiting for Karpenter to drain it (no write)\n", s.Ref(), p.Class)
		case plan.Orphan:
			fmt.Fprintf(w, "%s: orphan: no longer rendered by class %s; released, left in place\n", s.Ref(), p.Class)
		default:
			fmt.Fprintf(w, "%s: %s\n", s.Ref(), s.Action)
		}
	}
	switch {
	case p.Blocked():
		fmt.Fprintf(w, "WorkloadClass/%s: blocked: nothing of the class is written while %s exist\n", p.Class, strings.Join(p.Conflicts(), ", "))
		return true
	case len(out.Invalid) > 0:
		fmt.Fprintf(w, "WorkloadClass/%s: invalid: Karpenter's CRDs would refuse these writes, so nothing of the class is written:\n", p.Class)
		for _, in := range out.Invalid {
			for _, cause := range validate.Causes(in.Err) {
				fmt.Fprintf(w, "    %s: %s\n", in.Step.Ref(), cause)
			}
		}
		return true
	}
	return p.Changed()
}
