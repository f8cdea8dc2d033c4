// Package demo runs Poolsmith's whole loop on a local cluster (internal/localcluster):
// a real kube-apiserver, etcd, kube-scheduler and kube-controller-manager, Karpenter
// v1.15.0's operator and AWS provider on a simulated EC2 account, and Poolsmith's manager.
// It applies the samples, waits until Karpenter reports every class Ready, creates the
// sample workloads (and the node agents' DaemonSets among them, which Karpenter counts
// when it sizes nodes), waits until every pod runs and every DaemonSet has a ready pod on
// every node, and prints the classes, the NodePools and the nodes Karpenter launched for
// the pods, rung by rung. `make demo` and its smoke test call Run.
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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
	"github.com/poolsmith/poolsmith/internal/harness/localcluster"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

// FieldManager is the server-side apply field manager the demo applies samples with,
// as a user's kubectl or Argo CD would.
const FieldManager = "poolsmith-demo"

// Options configure Run.
type Options struct {
	// SamplesDir holds the Baseline and WorkloadClasses to apply (its files, not its
	// subdirectories).
	SamplesDir string
	// WorkloadsDir holds the workloads to run once the classes are Ready; none when empty.
	WorkloadsDir string
	// Hold keeps the cluster running until ctx is done.
	Hold bool
	// Timeout bounds each wait: classes Ready, then workloads Running.
	Timeout time.Duration
	// LogDir receives the components' logs; a temporary directory when empty.
	LogDir string
}

// Run starts the local cluster, applies the samples and the workloads and prints what
// Poolsmith generated and what Karpenter launched.
func Run(ctx context.Context, out io.Writer, opts Options) error {
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Minute
	}
	start := time.Now()
	since := func() string { return time.Since(start).Round(100 * time.Millisecond).String() }
	fmt.Fprintf(out, "Starting kube-apiserver, etcd, kube-scheduler and kube-controller-manager from %s,\n", os.Getenv("KUBEBUILDER_ASSETS"))
	fmt.Fprintf(out, "Karpenter %s with its AWS provider on a simulated EC2 account, and Poolsmith's manager ...\n", karpenterVersion())
	cluster, err := localcluster.Start(ctx, localcluster.Options{LogDir: opts.LogDir})
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(out, "stopping the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "Cluster up in %s (logs in %s). EC2 offers %d instance types in %s.\n",
		since(), cluster.LogDir, len(cluster.Cloud.Types()), strings.Join(cluster.Cloud.Zones(), ", "))

	classes, n, err := apply(ctx, cluster.Client, opts.SamplesDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Applied %d objects from %s; waiting for Karpenter to report %d WorkloadClasses Ready ...\n", n, opts.SamplesDir, len(classes))
	if err := waitFor(ctx, opts.Timeout, cluster.ManagerErr(), func() []string { return notReady(ctx, cluster.Client, classes) }); err != nil {
		return fmt.Errorf("waiting for the classes to be Ready: %w", err)
	}
	fmt.Fprintf(out, "All classes Ready %s after start.\n", since())

	if opts.WorkloadsDir != "" {
		_, n, err := apply(ctx, cluster.Client, opts.WorkloadsDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Applied %d workloads from %s; waiting for their pods to run on nodes Karpenter launches ...\n", n, opts.WorkloadsDir)
		running := func() []string {
			return append(notRunning(ctx, cluster.Client), daemonSetsPending(ctx, cluster.Client)...)
		}
		if err := waitFor(ctx, opts.Timeout, cluster.ManagerErr(), running); err != nil {
			return fmt.Errorf("waiting for the workloads' pods to run: %w", err)
		}
		fmt.Fprintf(out, "Every pod Running %s after start", since())
		daemonSets, nodes := &appsv1.DaemonSetList{}, &corev1.NodeList{}
		if cluster.Client.List(ctx, daemonSets) == nil && cluster.Client.List(ctx, nodes) == nil && len(daemonSets.Items) > 0 {
			fmt.Fprintf(out, "; %d DaemonSets run a pod on each of the %d nodes", len(daemonSets.Items), len(nodes.Items))
		}
		fmt.Fprintln(out, ".")
		// New nodes change the usage each rung's share of a class limit is split by, so
		// Poolsmith updates those NodePools, and Karpenter reports each one Unknown until it
		// has looked at the new generation: the tables show the classes settled.
		if err := waitFor(ctx, opts.Timeout, cluster.ManagerErr(), func() []string { return notReady(ctx, cluster.Client, classes) }); err != nil {
			return fmt.Errorf("waiting for the classes to be Ready with their nodes: %w", err)
		}
	}
	fmt.Fprintln(out)
	if err := printTables(ctx, out, cluster); err != nil {
		return err
	}
	if err := showAccess(ctx, out, cluster.Client, cluster.ManagerErr(), opts.Timeout); err != nil {
		return err
	}

	if !opts.Hold {
		return nil
	}
	fmt.Fprintf(out, "\nDEMO_HOLD=1: everything keeps running until Ctrl-C. Try:\n  export KUBECONFIG=%s\n  %s get workloadclasses,nodepools,nodeclaims,nodes\n",
		cluster.Kubeconfig, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"))
	select {
	case <-ctx.Done():
		return nil
	case err := <-cluster.ManagerErr():
		return fmt.Errorf("manager stopped: %w", err)
	}
}

// apply server-side applies every object of dir's files, creating the namespaces they
// name, and returns the WorkloadClasses' names and the number of objects.
func apply(ctx context.Context, c client.Client, dir string) ([]string, int, error) {
	objs, err := manifest.Load([]string{dir}, nil)
	if err != nil {
		return nil, 0, err
	}
	var classes []string
	for _, o := range objs {
		if namespaced, err := c.IsObjectNamespaced(o.Unstructured); err == nil && namespaced && o.GetNamespace() == "" {
			o.SetNamespace(metav1.NamespaceDefault)
		}
		if ns := o.GetNamespace(); ns != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, 0, fmt.Errorf("creating namespace %s for %s: %w", ns, o.Where(), err)
			}
		}
		if err := c.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return nil, 0, fmt.Errorf("applying %s: %w", o.Where(), err)
		}
		if o.GetKind() == "WorkloadClass" {
			classes = append(classes, o.GetName())
		}
	}
	return classes, len(objs), nil
}

// waitFor polls pending until it returns nothing, and says what is still pending when
// it gives up.
func waitFor(ctx context.Context, timeout time.Duration, mgrErr <-chan error, pending func() []string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		left := pending()
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %s", timeout, strings.Join(left, "; "))
		case err := <-mgrErr:
			return fmt.Errorf("manager stopped: %v", err)
		case <-tick.C:
		}
	}
}

// notReady names the classes that are not Ready=True for their current generation.
func notReady(ctx context.Context, c client.Client, classes []string) []string {
	var pending []string
	for _, name := range classes {
		wc := &v1alpha1.WorkloadClass{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
			pending = append(pending, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		cond := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != wc.Generation {
			msg := "not reconciled yet"
			if cond != nil {
				msg = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
			pending = append(pending, fmt.Sprintf("%s (%s)", name, msg))
		}
	}
	return pending
}

// daemonSetsPending names the DaemonSets whose pods do not run on every node yet: the
// DaemonSet controller creates them once a node exists, after the workloads' pods run.
func daemonSetsPending(ctx context.Context, c client.Client) []string {
	list := &appsv1.DaemonSetList{}
	if err := c.List(ctx, list); err != nil {
		return []string{err.Error()}
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return []string{err.Error()}
	}
	var pending []string
	for _, d := range list.Items {
		st := d.Status
		// A DaemonSet that selects no nodes must run on all of them.
		everywhere := len(d.Spec.Template.Spec.NodeSelector) == 0 && d.Spec.Template.Spec.Affinity == nil
		if st.ObservedGeneration < d.Generation || everywhere && int(st.DesiredNumberScheduled) < len(nodes.Items) || st.NumberReady < st.DesiredNumberScheduled {
			pending = append(pending, fmt.Sprintf("DaemonSet %s/%s (%d of %d nodes ready)", d.Namespace, d.Name, st.NumberReady, len(nodes.Items)))
		}
	}
	return pending
}

// notRunning names the pods that do not run yet.
func notRunning(ctx context.Context, c client.Client) []string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return []string{err.Error()}
	}
	var pending []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			pending = append(pending, fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, p.Status.Phase))
		}
	}
	if len(pods.Items) == 0 {
		pending = append(pending, "no pods yet")
	}
	return pending
}

func printTables(ctx context.Context, out io.Writer, cluster *localcluster.Cluster) error {
	c := cluster.Client
	classes := &v1alpha1.WorkloadClassList{}
	if err := c.List(ctx, classes); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "WORKLOADCLASS\tSYNCED\tREADY\tREASON\tPROFILE\tPOOLS\tEC2NODECLASS")
	for _, wc := range classes.Items {
		ready := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionReady)
		reason := "-"
		if ready != nil {
			reason = ready.Reason
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", wc.Name, conditionStatus(wc, v1alpha1.ConditionSynced), conditionStatus(wc, v1alpha1.ConditionReady),
			reason, wc.Status.Profile, wc.Status.PoolCount, wc.Status.NodeClass)
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
	fmt.Fprintln(w, "NODEPOOL\tCLASS\tWEIGHT\tCAPACITY\tARCH\tSLICE\tREADY\tNODES\tLIMITS")
	for _, np := range pools.Items {
		nodes := "0"
		if np.Status.Nodes != nil {
			nodes = fmt.Sprint(*np.Status.Nodes)
		}
		ready := "Unknown"
		if cond := np.StatusConditions().Root(); cond != nil {
			ready = string(cond.Status)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", np.Name, np.Labels[v1alpha1.LabelClass], *np.Spec.Weight,
			requirement(np, karpv1.CapacityTypeLabelKey), requirement(np, corev1.LabelArchStable), slice(np), ready, nodes, limits(np))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printNodes(ctx, out, cluster)
}

// printNodes lists the NodeClaims Karpenter launched, by class and rung, with the price
// the simulated account charges and the pods on each node.
func printNodes(ctx context.Context, out io.Writer, cluster *localcluster.Cluster) error {
	claims := &karpv1.NodeClaimList{}
	if err := cluster.Client.List(ctx, claims); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := cluster.Client.List(ctx, pods); err != nil {
		return err
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}
	sort.Slice(claims.Items, func(i, j int) bool {
		a, b := claims.Items[i].Labels, claims.Items[j].Labels
		if a[v1alpha1.LabelClass] != b[v1alpha1.LabelClass] {
			return a[v1alpha1.LabelClass] < b[v1alpha1.LabelClass]
		}
		if a[v1alpha1.LabelRung] != b[v1alpha1.LabelRung] {
			return a[v1alpha1.LabelRung] < b[v1alpha1.LabelRung]
		}
		return claims.Items[i].Name < claims.Items[j].Name
	})
	fmt.Fprintf(out, "\nNodes Karpenter launched (%d):\n", len(claims.Items))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CLASS\tRUNG\tNODECLAIM\tTYPE\tZONE\tCAPACITY\tPRICE/H\tNODE\tPODS")
	var total float64
	for _, nc := range claims.Items {
		l := nc.Labels
		price, _ := cluster.Cloud.Price(fakeec2.Pool{InstanceType: l[corev1.LabelInstanceTypeStable], Zone: l[corev1.LabelTopologyZone], CapacityType: l[karpv1.CapacityTypeLabelKey]})
		total += price
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t$%.4f\t%s\t%d\n", l[v1alpha1.LabelClass], l[v1alpha1.LabelRung], nc.Name, l[corev1.LabelInstanceTypeStable],
			l[corev1.LabelTopologyZone], l[karpv1.CapacityTypeLabelKey], price, nc.Status.NodeName, perNode[nc.Status.NodeName])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "Total: $%.4f per hour.\n", total)
	return nil
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
