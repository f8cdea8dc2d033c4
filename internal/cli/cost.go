package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/signals"
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
	cl, err := liveClient(flags.kubeconfig)
	if err != nil {
		return err
	}
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	provider := &signals.Provider{ConfigMap: types.NamespacedName{Namespace: ns, Name: name}, Region: flags.region, MaxAge: flags.signalsMaxAge}
	cat, freshness, err := provider.Catalog(ctx, cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.ErrOrStderr(), "signals: %s: %s\n", freshness.Reason, freshness.Message)
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
		b := cost.Compute(in)
		cc := classCost{Class: wc.Name, Cost: b.Status(), Preferred: b.Preferred, Budget: wc.Spec.Budget}
		if st := wc.Status.Cost; st != nil {
			cc.Cost.MonthToDate, cc.Cost.Month, cc.Cost.AccumulatedAt = st.MonthToDate, st.Month, st.AccumulatedAt
		}
		if v := cost.Judge(wc.Spec.Budget, b.PerHour); v != nil {
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
