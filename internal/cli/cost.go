package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

type costFlags struct {
	kubeconfig, region, signalsConfigMap, class, output string
	signalsMaxAge                                       time.Duration
}

func newCostCommand() *cobra.Command {
	var flags costFlags
	c := &cobra.Command{
		Use:   "cost [--kubeconfig FILE] [--class NAME] [-o text|json]",
		Short: "Print what each class of a live cluster costs per hour, its fallback premium, idle part and budget",
		Long: `Price every WorkloadClass of a live cluster (or one, with --class) from the NodeClaims it
holds, exactly as the manager's cost controller does: each launched NodeClaim at its own
instance type and capacity type through the catalog the weights use (the embedded catalog
with the cluster's spot signals laid over it when they are Fresh), the fallback premium
over the same capacity on the preferred rung, and the idle part from the requests of the
pods on each node. The month to date is the manager's, read from status.cost. -o json
prints each class's figures by rung, as status.cost reports them. See docs/cost.md.`,
		Example: `  poolsmith cost --kubeconfig ~/.kube/config
  poolsmith cost --class web -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runCost(c, &flags) },
	}
	c.Flags().StringVar(&flags.kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config")
	c.Flags().StringVar(&flags.region, "region", catalog.DefaultRegion, "the cluster's AWS region, as the manager's --region")
	c.Flags().StringVar(&flags.signalsConfigMap, "signals-configmap", operator.DefaultSignalsConfigMap.String(), "NAMESPACE/NAME of the signals ConfigMap, as the manager's --signals-configmap")
	c.Flags().DurationVar(&flags.signalsMaxAge, "signals-max-age", operator.DefaultSignalsMaxAge, "as the manager's --signals-max-age")
	c.Flags().StringVar(&flags.class, "class", "", "price only this WorkloadClass")
	c.Flags().StringVarP(&flags.output, "output", "o", "text", "output format: text or json")
	return c
}

// classCost is one class's line of `poolsmith cost`.
type classCost struct {
	Class string `json:"class"`
	// Cost is priced now; its month to date is the manager's, from status.
	Cost v1alpha1.CostStatus `json:"cost"`
	// Preferred is the rung the premium is measured against.
	Preferred string           `json:"preferred,omitempty"`
	Budget    *v1alpha1.Budget `json:"budget,omitempty"`
	// BudgetExceeded is the class's cost against its budget now, as the manager judges it.
	BudgetExceeded *bool `json:"budgetExceeded,omitempty"`
	// Held: the manager holds the class's rungs at their usage (BudgetExceeded, Held).
	Held bool `json:"held,omitempty"`
}

func runCost(c *cobra.Command, flags *costFlags) error {
	ns, name, ok := strings.Cut(flags.signalsConfigMap, "/")
	if !ok || ns == "" || name == "" {
		return usageError{fmt.Errorf("--signals-configmap %q must be NAMESPACE/NAME", flags.signalsConfigMap)}
	}
	if flags.output != "text" && flags.output != "json" {
		return usageError{fmt.Errorf("unknown output format %q (allowed: [text json])", flags.output)}
	}
	cl, ctx, cat, err := liveCatalog(c, flags.kubeconfig, types.NamespacedName{Namespace: ns, Name: name}, flags.region, flags.signalsMaxAge)
	if err != nil {
		return err
	}
	var classes []v1alpha1.WorkloadClass
	if flags.class != "" {
		wc := &v1alpha1.WorkloadClass{}
		if err := cl.Get(ctx, client.ObjectKey{Name: flags.class}, wc); err != nil {
			return fmt.Errorf("getting WorkloadClass %s: %w", flags.class, err)
		}
		classes = append(classes, *wc)
	} else {
		list := &v1alpha1.WorkloadClassList{}
		if err := cl.List(ctx, list); err != nil {
			return fmt.Errorf("listing WorkloadClasses: %w", err)
		}
		classes = list.Items
	}
	cluster := observe.Cluster{Cached: cl, Direct: cl}
	var out []classCost
	for i := range classes {
		wc := &classes[i]
		in, err := cluster.Cost(ctx, wc, cat, flags.region)
		if err != nil {
			return err
		}
		// The budget is the class's own, else its Baseline's ceiling; a Baseline that is
		// missing sets none.
		baseline := &v1alpha1.Baseline{}
		if err := cl.Get(ctx, client.ObjectKey{Name: wc.BaselineName()}, baseline); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("getting Baseline %s: %w", wc.BaselineName(), err)
			}
			baseline = nil
		}
		b := cost.Compute(in)
		budget, _ := render.ClassBudget(baseline, wc)
		cc := classCost{Class: wc.Name, Cost: b.Status(), Preferred: b.Preferred, Budget: budget}
		if st := wc.Status.Cost; st != nil {
			cc.Cost.MonthToDate, cc.Cost.Month, cc.Cost.AccumulatedAt = st.MonthToDate, st.Month, st.AccumulatedAt
		}
		if v := cost.Judge(budget, b.PerHour); v != nil {
			cc.BudgetExceeded = &v.Over
		}
		if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionBudgetExceeded); c != nil {
			cc.Held = c.Status == "True" && c.Reason == v1alpha1.ReasonBudgetHeld
		}
		out = append(out, cc)
	}
	if flags.output == "json" {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printCosts(c.OutOrStdout(), out)
	return nil
}

// printCosts prints one line per class: the figures priced now, the manager's month to
// date and whether it holds the class at its budget.
func printCosts(w io.Writer, out []classCost) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tNODES\tCOST/H\tPREMIUM/H\tIDLE/H\tBUDGET/H\tBUDGET\tMONTH-TO-DATE\tUNPRICED")
	for _, cc := range out {
		nodes := int32(0)
		for _, r := range cc.Cost.Rungs {
			nodes += r.Nodes
		}
		budget, state := "-", "-"
		if cc.Budget != nil {
			budget = cc.Budget.PerHour
			state = "under"
			if *cc.BudgetExceeded {
				state = "exceeded"
			}
			if cc.Held {
				state += " (held)"
			}
		}
		mtd := "-"
		if cc.Cost.MonthToDate != "" {
			mtd = cc.Cost.MonthToDate + " (" + cc.Cost.Month + ")"
		}
		unpriced := "-"
		if cc.Cost.Unpriced != "" {
			unpriced = cc.Cost.Unpriced
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cc.Class, nodes, cc.Cost.PerHour, cc.Cost.FallbackPremiumPerHour, cc.Cost.IdlePerHour, budget, state, mtd, unpriced)
	}
	_ = tw.Flush()
}

// simulatedCosts prices each class's simulated NodeClaims as status.cost would once
// Karpenter launched them: the rendered rungs, each NodeClaim's type, zone and capacity
// type, and the requests of the workload's pods placed on it (DaemonSet pods are not
// added, and the type's whole vCPUs and memory stand in for allocatable, so idle is a
// little high). With commitments, its effective figure and unused entitlement are the
// simulation's coverage. The month to date has no meaning for a preview.
func simulatedCosts(results []*render.Result, sim *simulate.Result, pods []*corev1.Pod, cat *catalog.Catalog, region string) []classCost {
	requests := map[string]corev1.ResourceList{}
	for _, p := range pods {
		requests[p.Namespace+"/"+p.Name] = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	}
	var out []classCost
	for _, res := range results {
		in := cost.Input{Catalog: cat, Region: region}
		if ledger, unused, ok := sim.Commitments.Ledger(res.Class); ok {
			in.Coverage, in.UnusedEntitlement = ledger, unused
		}
		rungs := map[string]bool{}
		for _, np := range res.NodePools {
			in.Rungs = append(in.Rungs, cost.Rung{Name: np.Name, Weight: ptr.Deref(np.Spec.Weight, 0), Requirements: np.Spec.Template.Spec.Requirements})
			rungs[np.Name] = true
		}
		for _, nc := range sim.NodeClaims {
			if !rungs[nc.NodePool] {
				continue
			}
			n := cost.Node{NodeClaim: nc.Name, Rung: nc.NodePool, InstanceType: nc.InstanceType, Zone: nc.Zone,
				CapacityType: nc.CapacityType, Requested: corev1.ResourceList{}}
			for _, p := range nc.Pods {
				for name, q := range requests[p] {
					sum := n.Requested[name]
					sum.Add(q)
					n.Requested[name] = sum
				}
			}
			in.Nodes = append(in.Nodes, n)
		}
		b := cost.Compute(in)
		cc := classCost{Class: res.Class, Cost: b.Status(), Preferred: b.Preferred}
		if cc.Budget = res.Settings.Budget; cc.Budget != nil {
			if v := cost.Judge(cc.Budget, b.PerHour); v != nil {
				cc.BudgetExceeded = &v.Over
			}
		}
		out = append(out, cc)
	}
	return out
}
