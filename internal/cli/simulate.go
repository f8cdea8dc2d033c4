package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

func newSimulateCommand() *cobra.Command {
	flags := inputFlags{extraKinds: simulate.WorkloadKinds}
	var zones, types []string
	var compare, offeringsFile, reservationsFile string
	var noHeadroom, noCommitments bool
	var at string
	c := &cobra.Command{
		Use:   "simulate -f PATH... [--region R] [--zones a,b,c] [--offerings FILE] [--instance-types t1,t2] [--reservations FILE] [--no-commitments] [--compare-nodepools FILE]",
		Short: "Run Karpenter's scheduler over the rendered ladders and a workload",
		Long: `Render the classes, expand the workloads in the input (Deployments, StatefulSets, Jobs
and Pods, with their requests, nodeSelector, affinity, tolerations and topology spread)
into pending pods, and run Karpenter's own scheduler over them with the embedded catalog as
the instance types. DaemonSets in the input are counted as Karpenter counts them: their
pods' requests are added to every NodeClaim they would run on. Prints each NodeClaim
Karpenter would create (rung, zone, capacity type, the instance type the AWS provider
would launch, its pods and hourly cost), each class's cost as poolsmith cost prints it
(cost/h, fallback premium, idle, budget) and the totals: nodes, distinct instance types,
distinct families and cost per hour.
--offerings FILE limits the instance types, zones and capacity types to what an account
offers (format: docs/cli.md); --instance-types limits the types (to those of the
offerings, when given; else offered in every zone at on-demand and spot).
--compare-nodepools runs the same workload against hand-written NodePools too.
With --headroom=pods each class's headroom units are pending pods too (its placeholder
Deployment, pinned to its rung, the schedule read now or at --at, a percentage of what
the workload's pods on the class request), so the preview shows the warm nodes and their
price; --no-headroom leaves them out.
When a class's Baseline declares spec.commitments, every NodeClaim of the class is priced
against them as the manager would cover it, starting from no coverage (offline nothing
runs, so every commitment is Open with the class's full entitlement), in launch order:
its list price, the commitment covering it and the covered part of its hour, its
effective price; then each commitment's use by class, the totals at list and effective,
the entitlement left unused, and an overshoot line for each commitment that ran out inside
the batch. --no-commitments ranks and prices as if no Baseline declared any.
--reservations FILE (what aws ec2 describe-capacity-reservations printed) offers each
active reservation to the reserved rungs as Karpenter does: a reserved offering of its
type in its zone with its available count, billed at on-demand; once it is full, the next
pod of a rung that allows only reserved capacity waits, as with Karpenter v1.15.0.`,
		Example: `  poolsmith simulate -f config/samples/ -f config/samples/workloads/web-spread.yaml
  poolsmith simulate -f config/samples/ -f config/samples/workloads/ --offerings offerings.yaml
  poolsmith simulate -f config/samples/ -f config/samples/workloads/ --instance-types c7g.large,c7g.xlarge,m7g.large
  poolsmith simulate -f config/samples/ -f config/samples/workloads/ --compare-nodepools config/samples/compare/karpenter-general-purpose.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			for _, z := range zones {
				if !zoneName.MatchString(z) {
					return usageError{fmt.Errorf("--zones %q: each zone must be a zone name such as us-east-1a", strings.Join(zones, ","))}
				}
			}
			in, err := flags.load(c, "", "table", "json")
			if err != nil {
				return err
			}
			if noCommitments {
				in.withoutCommitments()
			}
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageError{fmt.Errorf("--at %q: must be an RFC 3339 time, e.g. 2026-12-02T09:00:00Z", at)}
				}
				if in.opts.Capabilities.HeadroomOn() {
					in.opts.Headroom.Now = t
				}
			}
			results, err := in.renderAll()
			if err != nil {
				return err
			}
			workload, err := simulate.Pods(in.others)
			if err != nil {
				return inputError{err.Error()}
			}
			daemons, err := simulate.DaemonSetPods(in.others)
			if err != nil {
				return inputError{err.Error()}
			}
			offerings, err := accountOfferings(offeringsFile, types, zones, flags.region)
			if err != nil {
				return err
			}
			if len(zones) == 0 {
				zones = []string{flags.region + "a", flags.region + "b", flags.region + "c"}
			}
			if offerings != nil {
				if err := offerings.Check(in.opts.Catalog, flags.region); err != nil {
					return inputError{offeringsFlag(offeringsFile, types) + ": " + err.Error()}
				}
			}
			opts := simulate.Options{Region: flags.region, Zones: zones, Catalog: in.opts.Catalog, Offerings: offerings, DaemonSetPods: daemons}
			if reservationsFile != "" {
				if opts.Reservations, err = capacityReservations(reservationsFile, time.Now()); err != nil {
					return err
				}
			}
			var pools []*karpv1.NodePool
			for _, r := range results {
				pools = append(pools, r.NodePools...)
			}
			pods := workload
			if !noHeadroom {
				if len(workload) > 0 && in.sizedByPercentage() {
					// A percentage is of what the class's own pods request: where the
					// workload lands without the headroom, then the classes sized from it.
					base, err := simulate.Run(c.Context(), pools, workload, opts)
					if err != nil {
						return inputError{err.Error()}
					}
					in.usage = simulatedUsage(results, base, workload)
					if results, err = in.renderAll(); err != nil {
						return err
					}
				}
				placeholders, err := headroomWorkloads(results)
				if err != nil {
					return err
				}
				units, err := simulate.Pods(placeholders)
				if err != nil {
					return inputError{err.Error()}
				}
				pods = append(slices.Clone(workload), units...)
			}
			if len(pods) == 0 {
				return inputError{"no workload in the input: give Deployments, StatefulSets, Jobs or Pods with -f"}
			}
			committed := opts
			committed.Commitments = in.classCommitments(results)
			ours, err := simulate.Run(c.Context(), pools, pods, committed)
			if err != nil {
				if reservationsFile != "" {
					return inputError{fmt.Sprintf("%v (--reservations %s; --zones adds a zone)", err, reservationsFile)}
				}
				return inputError{err.Error()}
			}
			var theirs *simulate.Result
			if compare != "" {
				hand, err := handWrittenNodePools(compare)
				if err != nil {
					return err
				}
				if theirs, err = simulate.Run(c.Context(), hand, pods, opts); err != nil {
					return inputError{err.Error()}
				}
			}
			costs := simulatedCosts(results, ours, pods, in.opts.Catalog, flags.region)
			return writeSimulation(c.OutOrStdout(), flags.output, ours, theirs, compare, costs)
		},
	}
	flags.register(c, "table (default) or json")
	c.Flags().StringSliceVar(&zones, "zones", nil, "availability zones to offer instances in (default: the region's a, b and c)")
	c.Flags().StringVar(&offeringsFile, "offerings", "", "a file of the instance types, zones and capacity types the account offers (format: docs/cli.md); --zones, when given, keeps only those zones")
	c.Flags().StringSliceVar(&types, "instance-types", nil, "instance types to offer (of the offerings, when given; else in every zone at on-demand and spot)")
	c.Flags().StringVar(&compare, "compare-nodepools", "", "a file of karpenter.sh/v1 NodePools to run the same workload against")
	flags.headroom.register(c.Flags(), "add each class's headroom units as pending pods")
	c.Flags().BoolVar(&noHeadroom, "no-headroom", false, "leave the headroom units out, whatever --headroom says")
	c.Flags().StringVar(&at, "at", "", "read the headroom schedules at this RFC 3339 time instead of now")
	c.Flags().BoolVar(&noCommitments, "no-commitments", false, "rank and price as if no Baseline declared spec.commitments")
	c.Flags().StringVar(&reservationsFile, "reservations", "", "a file with what `aws ec2 describe-capacity-reservations` printed (JSON): the active reservations the classes' capacityReservationSelectorTerms select, offered to the reserved rungs")
	return c
}

// capacityReservations reads --reservations: the active reservations not past their end.
func capacityReservations(file string, now time.Time) ([]simulate.Reservation, error) {
	data, err := manifest.ReadFile(file)
	if err != nil {
		return nil, inputError{"--reservations: " + err.Error()}
	}
	rs, err := lint.ParseReservations(file, data)
	if err != nil {
		return nil, inputError{"--reservations " + err.Error()}
	}
	var out []simulate.Reservation
	for _, r := range rs {
		if r.State != "active" || r.EndDate != nil && !r.EndDate.After(now) {
			continue
		}
		out = append(out, simulate.Reservation{ID: r.ID, InstanceType: r.InstanceType, Zone: r.AvailabilityZone, Available: int(*r.AvailableInstanceCount)})
	}
	return out, nil
}

// withoutCommitments drops every Baseline's spec.commitments: the classes rank and their
// nodes are priced at list.
func (in *input) withoutCommitments() {
	for name, b := range in.baselines {
		if b.Spec.Commitments != nil {
			b = b.DeepCopy()
			b.Spec.Commitments = nil
			in.baselines[name] = b
		}
	}
}

// classCommitments are the rendered classes' commitments as simulate prices their nodes:
// the ones render resolved (still running, in AWS's order), and the class's part of each,
// split among the input's classes of its Baseline as the manager splits it among the
// cluster's (commitment.Entitlements).
func (in *input) classCommitments(results []*render.Result) []simulate.ClassCommitments {
	var out []simulate.ClassCommitments
	for _, r := range results {
		declared := r.Settings.Commitments.Declared
		wc := in.class(r.Class)
		if len(declared) == 0 || wc == nil || in.baselines[wc.BaselineName()] == nil {
			continue
		}
		b := in.baselines[wc.BaselineName()]
		var classes []commitment.Class
		for _, other := range in.classes {
			if other.BaselineName() == b.Name {
				classes = append(classes, observe.CommitmentClass(other))
			}
		}
		part := commitment.Entitlements(b.Spec.Commitments.Allocations, classes)[wc.Name]
		cc := simulate.ClassCommitments{Class: r.Class, Declared: declared, Entitlements: map[string]float64{}}
		for _, c := range declared {
			cc.Entitlements[c.ID] = part.Of * c.Share
		}
		for _, np := range r.NodePools {
			cc.NodePools = append(cc.NodePools, np.Name)
		}
		out = append(out, cc)
	}
	return out
}

// class is the input's class of that name; nil if none.
func (in *input) class(name string) *v1alpha1.WorkloadClass {
	for _, wc := range in.classes {
		if wc.Name == name {
			return wc
		}
	}
	return nil
}

// sizedByPercentage tells whether some class's headroom is sized by percentage.
func (in *input) sizedByPercentage() bool {
	for _, wc := range in.classes {
		if b := in.baselines[wc.BaselineName()]; b != nil && observe.SizedByPercentage(wc, b) {
			return true
		}
	}
	return false
}

// simulatedUsage is, by class, what the workload's pods placed on the class's NodePools
// request in res: a percentage's base, as the manager reads it from the class's nodes
// (DaemonSet pods are not among pods here, and no placeholder is).
func simulatedUsage(results []*render.Result, res *simulate.Result, pods []*corev1.Pod) map[string]corev1.ResourceList {
	classOf := map[string]string{}
	for _, r := range results {
		for _, np := range r.NodePools {
			classOf[np.Name] = np.Labels[v1alpha1.LabelClass]
		}
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Namespace+"/"+p.Name] = p
	}
	usage := map[string]corev1.ResourceList{}
	for _, nc := range res.NodeClaims {
		class, ok := classOf[nc.NodePool]
		if !ok {
			continue
		}
		if usage[class] == nil {
			usage[class] = corev1.ResourceList{}
		}
		for _, name := range nc.Pods {
			if p := byName[name]; p != nil {
				observe.AddRequests(usage[class], p)
			}
		}
	}
	return usage
}

// headroomWorkloads are the classes' headroom units as workloads of the input: the
// placeholder Deployment as it is, and a CapacityBuffer's virtual pods as a Deployment of
// its PodTemplate at the buffer's replicas (Karpenter makes no pod of them, but schedules
// them alike).
func headroomWorkloads(results []*render.Result) ([]manifest.Object, error) {
	var out []manifest.Object
	for _, r := range results {
		if r.Headroom == nil {
			continue
		}
		for _, obj := range r.Headroom.Objects {
			source := "--headroom=pods"
			switch o := obj.(type) {
			case *cbv1beta1.CapacityBuffer:
				continue
			case *corev1.PodTemplate:
				source = "--headroom=capacitybuffer"
				obj = &appsv1.Deployment{
					TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
					ObjectMeta: o.ObjectMeta,
					Spec: appsv1.DeploymentSpec{Replicas: ptr.To(r.Headroom.Desired), Template: o.Template,
						Selector: &metav1.LabelSelector{MatchLabels: o.Template.Labels}},
				}
			}
			doc, err := render.CleanJSON(obj)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(doc)
			if err != nil {
				return nil, err
			}
			out = append(out, manifest.Object{Source: source, Index: len(out) + 1, Raw: raw, Unstructured: &unstructured.Unstructured{Object: doc}})
		}
	}
	return out, nil
}

// accountOfferings reads --offerings and applies --instance-types and --zones to it; nil
// when neither --offerings nor --instance-types is given (the whole catalog is offered).
func accountOfferings(file string, types, zones []string, region string) (simulate.Offerings, error) {
	for _, t := range types {
		if t == "" {
			return nil, usageError{fmt.Errorf("--instance-types %q: each must be an instance type name such as c7g.large", strings.Join(types, ","))}
		}
	}
	if file == "" {
		if len(types) == 0 {
			return nil, nil
		}
		if len(zones) == 0 {
			zones = []string{region + "a", region + "b", region + "c"}
		}
		return simulate.OfferingsOf(types, zones), nil
	}
	data, err := manifest.ReadFile(file)
	if err != nil {
		return nil, inputError{"--offerings: " + err.Error()}
	}
	offerings, err := simulate.ParseOfferings(data)
	if err != nil {
		return nil, inputError{fmt.Sprintf("--offerings %s: %v", file, err)}
	}
	if offerings, err = offerings.Only(types, zones); err != nil {
		return nil, inputError{fmt.Sprintf("--instance-types: %v (%s)", err, file)}
	}
	if len(offerings.Zones()) == 0 {
		return nil, inputError{fmt.Sprintf("--zones %s: %s offers none of them", strings.Join(zones, ","), file)}
	}
	return offerings, nil
}

func offeringsFlag(file string, types []string) string {
	if file != "" {
		return "--offerings " + file
	}
	return "--instance-types"
}

// zoneName is the zone pattern WorkloadClass.spec.zones admits.
var zoneName = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+$`)

func handWrittenNodePools(path string) ([]*karpv1.NodePool, error) {
	objs, err := manifest.Load([]string{path}, nil)
	if err != nil {
		return nil, inputError{err.Error()}
	}
	var pools []*karpv1.NodePool
	for _, o := range objs {
		if o.GetKind() != "NodePool" {
			continue
		}
		np := &karpv1.NodePool{}
		if err := o.Into(np); err != nil {
			return nil, inputError{err.Error()}
		}
		pools = append(pools, np)
	}
	if len(pools) == 0 {
		return nil, inputError{fmt.Sprintf("--compare-nodepools %s holds no NodePool", path)}
	}
	return pools, nil
}

func writeSimulation(w io.Writer, format string, ours, theirs *simulate.Result, compare string, costs []classCost) error {
	if format == "json" {
		out := map[string]any{"poolsmith": ours, "classes": costs}
		if theirs != nil {
			out["compared"] = theirs
		}
		return writeJSON(w, out)
	}
	printNodeClaims(w, ours)
	printCommitments(w, ours)
	fmt.Fprintln(w)
	printCosts(w, costs)
	if theirs == nil {
		return printTotals(w, []string{"POOLSMITH"}, ours)
	}
	fmt.Fprintf(w, "\nWith the NodePools of %s:\n", compare)
	printNodeClaims(w, theirs)
	fmt.Fprintln(w)
	return printTotals(w, []string{"POOLSMITH", "COMPARED"}, ours, theirs)
}

func printNodeClaims(w io.Writer, r *simulate.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "NODEPOOL\tZONE\tCAPACITY\tINSTANCE-TYPE\tPODS\t$/HOUR\tPRICE-SOURCE"
	if r.Commitments != nil {
		header += "\tCOVERED-BY\tCOVERED\tEFFECTIVE $/HOUR"
	}
	fmt.Fprintln(tw, header)
	for _, nc := range r.NodeClaims {
		source := nc.PriceSource
		if nc.ReservationID != "" {
			source += ", reservation " + nc.ReservationID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\t%s", nc.NodePool, nc.Zone, nc.CapacityType, nc.InstanceType, len(nc.Pods), nc.PricePerHour, source)
		switch {
		case r.Commitments == nil:
		case nc.Commitment == nil:
			fmt.Fprintf(tw, "\t-\t-\t%.4f", nc.PricePerHour)
		default:
			by := strings.Join(nc.Commitment.CoveredBy, ",")
			if by == "" {
				by = "-"
			}
			fmt.Fprintf(tw, "\t%s\t%.1f%%\t%.4f", by, 100*nc.Commitment.Covered, nc.Commitment.EffectivePerHour)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, pod := range slices.Sorted(maps.Keys(r.Unschedulable)) {
		fmt.Fprintf(w, "unschedulable: %s: %s\n", pod, firstLine(r.Unschedulable[pod]))
	}
}

// printCommitments prints each commitment's use by class and the overshoot lines.
func printCommitments(w io.Writer, r *simulate.Result) {
	if r.Commitments == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCOMMITMENT\tCLASS\tENTITLEMENT\tUSED\tNODES\tUNUSED $/HOUR")
	amount := func(u simulate.CommitmentUse, v float64) string {
		if u.Unit == "USD/h" {
			return fmt.Sprintf("$%.4f/h", v)
		}
		return fmt.Sprintf("%g %s", v, u.Unit)
	}
	for _, u := range r.Commitments.Uses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\n", u.Describe, u.Class, amount(u, u.Entitlement), amount(u, u.Used), u.Nodes, u.UnusedPerHour)
	}
	_ = tw.Flush()
	for _, o := range r.Commitments.Overshoots {
		fmt.Fprintln(w, o)
	}
}

func printTotals(w io.Writer, headers []string, results ...*simulate.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nTOTALS\t%s\n", strings.Join(headers, "\t"))
	row := func(name string, f func(*simulate.Result) string) {
		cells := make([]string, len(results))
		for i, r := range results {
			cells[i] = f(r)
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, strings.Join(cells, "\t"))
	}
	row("nodes", func(r *simulate.Result) string { return fmt.Sprint(r.Totals.Nodes) })
	row("instance types", func(r *simulate.Result) string { return fmt.Sprint(r.Totals.InstanceTypes) })
	row("families", func(r *simulate.Result) string { return fmt.Sprint(r.Totals.Families) })
	row("cost per hour", func(r *simulate.Result) string { return fmt.Sprintf("$%.4f", r.Totals.CostPerHour) })
	if slices.ContainsFunc(results, func(r *simulate.Result) bool { return r.Commitments != nil }) {
		committed := func(f func(*simulate.Commitments) float64) func(*simulate.Result) string {
			return func(r *simulate.Result) string {
				if r.Commitments == nil {
					return "-"
				}
				return fmt.Sprintf("$%.4f", f(r.Commitments))
			}
		}
		row("effective per hour", committed(func(c *simulate.Commitments) float64 { return c.EffectivePerHour }))
		row("unused entitlement per hour", committed(func(c *simulate.Commitments) float64 { return c.UnusedEntitlementPerHour }))
		row("paid per hour (effective + unused)", committed(func(c *simulate.Commitments) float64 { return c.PaidPerHour }))
	}
	row("unschedulable pods", func(r *simulate.Result) string { return fmt.Sprint(len(r.Unschedulable)) })
	row("daemonsets counted", func(r *simulate.Result) string { return fmt.Sprint(r.Totals.DaemonSets) })
	return tw.Flush()
}

func firstLine(s string) string {
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}
