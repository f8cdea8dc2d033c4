// Package demo runs Poolsmith's main job on an embedded control plane: a real
// kube-apiserver and etcd with Poolsmith's and Karpenter's CRDs, the manager running
// in-process, the samples applied, and a report of the classes and the NodePools they
// produced. `make demo` and its smoke test call Run.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/testenv"
)

// FieldManager is the server-side apply field manager the demo applies samples with,
// as a user's kubectl or Argo CD would.
const FieldManager = "poolsmith-demo"

// Options configure Run.
type Options struct {
	// SamplesDir holds the manifests to apply.
	SamplesDir string
	// Hold keeps the control plane running until ctx is done, and writes a kubeconfig.
	Hold bool
	// Timeout bounds the wait for every class to be Synced.
	Timeout time.Duration
	// Log receives the manager's logs; nil discards them.
	Log io.Writer
}

// Run starts the control plane and the manager, applies the samples, waits until every
// class is Synced and prints what Poolsmith generated.
func Run(ctx context.Context, out io.Writer, opts Options) error {
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	logTo := opts.Log
	if logTo == nil {
		logTo = io.Discard
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logTo)))

	start := time.Now()
	fmt.Fprintf(out, "Starting kube-apiserver and etcd from %s ...\n", os.Getenv("KUBEBUILDER_ASSETS"))
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(out, "stopping the control plane: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "Control plane up in %s, with Poolsmith's CRDs and Karpenter's (karpenter-provider-aws %s).\n",
		time.Since(start).Round(100*time.Millisecond), karpenterVersion())

	mgrCtx, stop := context.WithCancel(ctx)
	defer stop()
	mgr, err := operator.New(mgrCtx, env.Config, operator.Options{MetricsAddr: "0", ProbeAddr: "0", MaxConcurrentReconciles: 4})
	if err != nil {
		return err
	}
	mgrErr := make(chan error, 1)
	go func() { mgrErr <- mgr.Start(mgrCtx) }()
	fmt.Fprintln(out, "Poolsmith manager running in-process (leader election off).")

	objs, err := manifest.Load([]string{opts.SamplesDir}, nil)
	if err != nil {
		return err
	}
	var classes []string
	for _, o := range objs {
		if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", o.Where(), err)
		}
		if o.GetKind() == "WorkloadClass" {
			classes = append(classes, o.GetName())
		}
	}
	fmt.Fprintf(out, "Applied %d objects from %s; waiting for %d WorkloadClasses to be Synced ...\n\n", len(objs), opts.SamplesDir, len(classes))

	waitCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := waitSynced(waitCtx, env.Client, classes, mgrErr); err != nil {
		return err
	}
	fmt.Fprintf(out, "All classes Synced %s after start.\n\n", time.Since(start).Round(100*time.Millisecond))
	if err := printTables(ctx, out, env.Client); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nReady stays Unknown (AwaitingKarpenter): no Karpenter runs on this control plane to report on the children.")
	if err := showAccess(ctx, out, env.Client, mgrErr, opts.Timeout); err != nil {
		return err
	}

	if !opts.Hold {
		return nil
	}
	kubeconfig, err := writeKubeconfig(env.Environment)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDEMO_HOLD=1: the control plane and manager keep running until Ctrl-C. Try:\n  export KUBECONFIG=%s\n  %s get workloadclasses\n",
		kubeconfig, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"))
	select {
	case <-ctx.Done():
		return nil
	case err := <-mgrErr:
		return fmt.Errorf("manager stopped: %w", err)
	}
}

// waitSynced polls until every class is Synced=True for its current generation, and says
// which are not when it gives up.
func waitSynced(ctx context.Context, c client.Client, classes []string, mgrErr <-chan error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var pending []string
		for _, name := range classes {
			wc := &v1alpha1.WorkloadClass{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
				pending = append(pending, fmt.Sprintf("%s (%v)", name, err))
				continue
			}
			cond := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != wc.Generation {
				msg := "not reconciled yet"
				if cond != nil {
					msg = fmt.Sprintf("Synced=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
				pending = append(pending, fmt.Sprintf("%s (%s)", name, msg))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for classes to be Synced: %s", strings.Join(pending, "; "))
		case err := <-mgrErr:
			return fmt.Errorf("manager stopped: %v", err)
		case <-tick.C:
		}
	}
}

func printTables(ctx context.Context, out io.Writer, c client.Client) error {
	classes := &v1alpha1.WorkloadClassList{}
	if err := c.List(ctx, classes); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "WORKLOADCLASS\tSYNCED\tREADY\tPROFILE\tPOOLS\tEC2NODECLASS")
	for _, wc := range classes.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", wc.Name, conditionStatus(wc, v1alpha1.ConditionSynced), conditionStatus(wc, v1alpha1.ConditionReady),
			wc.Status.Profile, wc.Status.PoolCount, wc.Status.NodeClass)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	pools := &karpv1.NodePoolList{}
	if err := c.List(ctx, pools, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return err
	}
	sort.Slice(pools.Items, func(i, j int) bool {
		a, b := pools.Items[i], pools.Items[j]
		if a.Labels[v1alpha1.LabelClass] != b.Labels[v1alpha1.LabelClass] {
			return a.Labels[v1alpha1.LabelClass] < b.Labels[v1alpha1.LabelClass]
		}
		return *a.Spec.Weight > *b.Spec.Weight
	})
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODEPOOL\tCLASS\tWEIGHT\tCAPACITY\tARCH\tSLICE\tEXPIRE\tLIMITS")
	for _, np := range pools.Items {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", np.Name, np.Labels[v1alpha1.LabelClass], *np.Spec.Weight,
			requirement(np, karpv1.CapacityTypeLabelKey), requirement(np, "kubernetes.io/arch"), slice(np),
			np.Spec.Template.Spec.ExpireAfter.String(), limits(np))
	}
	return w.Flush()
}

func conditionStatus(wc v1alpha1.WorkloadClass, typ string) string {
	if c := meta.FindStatusCondition(wc.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return "-"
}

func requirement(np karpv1.NodePool, key string) string {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == "In" {
			return strings.Join(r.Values, ",")
		}
	}
	return "-"
}

func slice(np karpv1.NodePool) string {
	for _, key := range []string{"karpenter.k8s.aws/instance-family", "node.kubernetes.io/instance-type"} {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == key && r.Operator == "In" && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return "-"
}

func limits(np karpv1.NodePool) string {
	if len(np.Spec.Limits) == 0 {
		return "-"
	}
	var parts []string
	for name, q := range np.Spec.Limits {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func karpenterVersion() string {
	dir, err := testenv.ModuleDir(testenv.KarpenterProviderModule)
	if err != nil {
		return "?"
	}
	_, version, _ := strings.Cut(filepath.Base(dir), "@")
	return version
}

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding a demo user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("writing a kubeconfig: %w", err)
	}
	path := filepath.Join(os.TempDir(), "poolsmith-demo.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
