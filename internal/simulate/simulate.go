package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	nodepoolutils "sigs.k8s.io/karpenter/pkg/utils/nodepool"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// Options say where the simulated cluster is.
type Options struct {
	Region string
	// Zones are the availability zones offered; every type is offered in each. Ignored
	// when Offerings is set: its zones are offered.
	Zones []string
	// Offerings are the instance types, zones and capacity types the account offers;
	// every priced catalog type in every zone, on-demand and spot, when nil.
	Offerings Offerings
	// DaemonSetPods are the pods of the DaemonSets (DaemonSetPods builds them): Karpenter
	// adds the requests of those that would run on a NodeClaim to its pods' when it picks
	// the NodeClaim's instance types.
	DaemonSetPods []*corev1.Pod
	// Catalog replaces the embedded catalog: the priced catalog signals give, or a test's.
	Catalog *catalog.Catalog
	// Unavailable marks offerings EC2 would refuse.
	Unavailable Unavailable
	// Reservations are the capacity reservations the classes' EC2NodeClasses select:
	// reserved offerings for NodePools that allow karpenter.sh/capacity-type: reserved.
	Reservations []Reservation
	// Commitments are the classes' Savings Plans and Reserved Instances: with them every
	// NodeClaim of those classes is priced against them (Result.Commitments).
	Commitments []ClassCommitments
}

// NodeClaim is one node Karpenter would launch.
type NodeClaim struct {
	// Name is the rung's name and the NodeClaim's place in the rung's launch order, from 1.
	Name         string   `json:"name"`
	NodePool     string   `json:"nodePool"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	InstanceType string   `json:"instanceType"`
	Family       string   `json:"family"`
	Pods         []string `json:"pods"`
	// PricePerHour is the chosen offering's price, USD.
	PricePerHour float64 `json:"pricePerHour"`
	// PriceSource names where that price came from (catalog, advisor, override).
	PriceSource string `json:"priceSource"`
	// ReservationID is the capacity reservation a reserved NodeClaim launches into; it is
	// billed at the on-demand price (PricePerHour), used or not.
	ReservationID string `json:"reservationID,omitempty"`
	// Options is how many instance types Karpenter left the launch to choose from.
	Options int `json:"instanceTypeOptions"`
	// Commitment is how its class's commitments price it; nil without (Options.Commitments).
	Commitment *NodeCommitment `json:"commitment,omitempty"`

	launch int
}

// Result is a simulation's outcome.
type Result struct {
	NodeClaims []NodeClaim `json:"nodeClaims"`
	// Unschedulable maps pods Karpenter could not place to why.
	Unschedulable map[string]string `json:"unschedulable,omitempty"`
	Totals        Totals            `json:"totals"`
	// Commitments is how the classes' commitments price the NodeClaims; nil when no class
	// has any (Options.Commitments).
	Commitments *Commitments `json:"commitments,omitempty"`
}

// Totals summarise the node salad and the bill.
type Totals struct {
	Nodes         int     `json:"nodes"`
	InstanceTypes int     `json:"instanceTypes"`
	Families      int     `json:"families"`
	CostPerHour   float64 `json:"costPerHour"`
	// DaemonSets is how many DaemonSets' overhead was counted (Options.DaemonSetPods).
	DaemonSets int `json:"daemonSets"`
	// SimulationTime is how long Karpenter's scheduler took.
	SimulationTime time.Duration `json:"simulationTime"`
}

// Run schedules pods onto the NodePools with Karpenter's scheduler and makes the AWS
// provider's launch choice for every NodeClaim.
func Run(ctx context.Context, nodePools []*karpv1.NodePool, pods []*corev1.Pod, opts Options) (*Result, error) {
	if opts.Catalog == nil {
		c, err := catalog.Load()
		if err != nil {
			return nil, err
		}
		opts.Catalog = c
	}
	if _, ok := opts.Catalog.Prices[opts.Region]; !ok {
		return nil, fmt.Errorf("the catalog has no prices for region %s (it has %v)", opts.Region, opts.Catalog.Regions())
	}
	if opts.Offerings != nil {
		if err := opts.Offerings.Check(opts.Catalog, opts.Region); err != nil {
			return nil, fmt.Errorf("offerings: %w", err)
		}
		opts.Zones = opts.Offerings.Zones()
	}
	if len(opts.Zones) == 0 {
		return nil, fmt.Errorf("no zones to offer instances in")
	}
	if err := checkReservations(opts.Reservations, opts.Catalog, opts.Region, opts.Zones); err != nil {
		return nil, err
	}
	its, facts := instanceTypes(opts.Catalog, opts.Region, opts.Zones, opts.Offerings, opts.Unavailable, opts.Reservations)
	// Karpenter's provisioner tries NodePools by weight, not in the order it lists them;
	// its scheduler takes them in the order given.
	nodePools = slices.Clone(nodePools)
	nodepoolutils.OrderByWeight(nodePools)
	byPool := map[string][]*cloudprovider.InstanceType{}
	for _, np := range nodePools {
		byPool[np.Name] = its
	}

	ctx = options.ToContext(ctx, &options.Options{
		PreferencePolicy: options.PreferencePolicyRespect,
		MinValuesPolicy:  options.MinValuesPolicyStrict,
		FeatureGates:     options.FeatureGates{ReservedCapacity: true},
	})
	kube := emptyCluster{scheme: scheme.Scheme}
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, &cloudProvider{its: its})
	topology, err := scheduling.NewTopology(ctx, kube, cluster, nil, nodePools, byPool, pods)
	if err != nil {
		return nil, fmt.Errorf("building Karpenter's topology: %w", err)
	}
	scheduler := scheduling.NewScheduler(ctx, kube, nodePools, cluster, nil, topology, byPool, opts.DaemonSetPods,
		// Karpenter's provisioner schedules new pods in the strict reserved-offering mode: a
		// pod whose only offering on a NodePool is a full reservation waits.
		events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, scheduling.DisableReservedCapacityFallback)
	start := time.Now()
	results, err := scheduler.Solve(ctx, pods)
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("Karpenter's scheduler: %w", err)
	}

	res := &Result{Totals: Totals{SimulationTime: elapsed, DaemonSets: len(opts.DaemonSetPods)}}
	perPool := map[string]int{}
	for i, nc := range results.NewNodeClaims {
		out := launch(nc, facts)
		perPool[out.NodePool]++
		out.Name, out.launch = fmt.Sprintf("%s-%d", out.NodePool, perPool[out.NodePool]), i
		res.NodeClaims = append(res.NodeClaims, out)
	}
	sort.SliceStable(res.NodeClaims, func(i, j int) bool {
		a, b := res.NodeClaims[i], res.NodeClaims[j]
		if a.NodePool != b.NodePool {
			return a.NodePool < b.NodePool
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.InstanceType < b.InstanceType
	})
	for pod, perr := range results.PodErrors {
		if res.Unschedulable == nil {
			res.Unschedulable = map[string]string{}
		}
		res.Unschedulable[pod.Namespace+"/"+pod.Name] = perr.Error()
	}
	types, families := map[string]bool{}, map[string]bool{}
	for _, nc := range res.NodeClaims {
		types[nc.InstanceType], families[nc.Family] = true, true
		res.Totals.CostPerHour += nc.PricePerHour
	}
	res.Totals.Nodes, res.Totals.InstanceTypes, res.Totals.Families = len(res.NodeClaims), len(types), len(families)
	if len(opts.Commitments) > 0 {
		launched := make([]int, len(res.NodeClaims))
		for i, nc := range res.NodeClaims {
			launched[nc.launch] = i
		}
		priceCommitments(res, opts.Commitments, launched, opts.Catalog, opts.Region)
	}
	return res, nil
}

// cloudProvider is the little of a cloud provider Karpenter's cluster state needs here:
// it launches nothing.
type cloudProvider struct {
	its []*cloudprovider.InstanceType
}

func (c *cloudProvider) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, fmt.Errorf("simulation launches nothing")
}
func (c *cloudProvider) Delete(context.Context, *karpv1.NodeClaim) error { return nil }
func (c *cloudProvider) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("simulation"))
}
func (c *cloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, nil }
func (c *cloudProvider) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return c.its, nil
}
func (c *cloudProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}
func (c *cloudProvider) Reboot(context.Context, *karpv1.NodeClaim, string) error { return nil }
func (c *cloudProvider) RepairPolicies() []cloudprovider.RepairPolicy            { return nil }
func (c *cloudProvider) Name() string                                            { return "poolsmith-simulation" }
func (c *cloudProvider) GetSupportedNodeClasses() []status.Object                { return nil }
