package simulate_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

// workedExample is docs/commitments.md's worked example: class api, m7g.xlarge and
// c7g.xlarge on spot and on-demand, and the Baseline's EC2Instance Savings Plan for m7g
// (31 % off, 40 % of $3.00/h for the cluster), plus extra commitments.
const workedExample = `apiVersion: poolsmith.dev/v1alpha1
kind: Baseline
metadata: {name: default}
spec:
  nodeClass:
    role: KarpenterNodeRole-prod
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  commitments:
    savingsPlans:
    - id: sp-0a1b2c3d
      type: EC2Instance
      commitment: "3.00"
      family: m7g
      region: us-east-1
      discount: {families: [{family: m7g, discount: "31%"}]}
      share: {percent: 40}
EXTRA
---
apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: api, labels: {team: api}}
spec:
  architectures: [arm64]
  capacityTypes: [spot, on-demand]
  consistency: Type
  instances: {types: [m7g.xlarge, c7g.xlarge]}
`

// committedClass renders the worked example's class offline (every commitment Open) with
// extra added to spec.commitments, and gives each commitment the entitlements given.
func committedClass(t *testing.T, extra string, entitlements map[string]float64) ([]*karpv1.NodePool, simulate.ClassCommitments) {
	t.Helper()
	objs, err := manifest.Decode("worked.yaml", strings.NewReader(strings.Replace(workedExample, "EXTRA", extra, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, wc := &v1alpha1.Baseline{}, &v1alpha1.WorkloadClass{}
	if err := objs[0].Into(b); err != nil {
		t.Fatal(err)
	}
	if err := objs[1].Into(wc); err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(b, wc, render.Options{Commitments: render.CommitmentOptions{Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	cc := simulate.ClassCommitments{Class: wc.Name, Declared: res.Settings.Commitments.Declared, Entitlements: entitlements}
	for _, np := range res.NodePools {
		cc.NodePools = append(cc.NodePools, np.Name)
	}
	if len(cc.Declared) == 0 {
		t.Fatal("render resolved no commitment")
	}
	return res.NodePools, cc
}

// apiPods are n pods of 3 vCPU for class api: one a node.
func apiPods(n int) []*corev1.Pod {
	return pods(n, "api", "3", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{v1alpha1.LabelClass: "api"} })
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// One batch of six nodes' worth of pods all goes to the covered rung: five m7g nodes draw
// the plan's rate, the sixth is covered for 32.8 % of its hour, and the overshoot line says
// the plan ran out inside the batch (docs/commitments.md, worked example).
func TestCommitmentsPriceTheBatchAndReportTheOvershoot(t *testing.T) {
	pools, cc := committedClass(t, "", map[string]float64{"sp-0a1b2c3d": 0.60})
	res := run(t, pools, apiPods(6), func(o *simulate.Options) { o.Commitments = []simulate.ClassCommitments{cc} })
	if len(res.NodeClaims) != 6 {
		t.Fatalf("%d NodeClaims, want 6: %+v", len(res.NodeClaims), res.NodeClaims)
	}
	for i, nc := range res.NodeClaims {
		if nc.NodePool != "api-on-demand-arm64-m7g-xlarge" || nc.InstanceType != "m7g.xlarge" || !near(nc.PricePerHour, 0.1632) || nc.Commitment == nil {
			t.Fatalf("NodeClaim %d: %+v, want on-demand m7g.xlarge at $0.1632 priced by the plan", i, nc)
		}
		covered, effective := 1.0, 0.112608
		if i == 5 {
			covered = 0.03696 / 0.112608
			effective = covered*0.112608 + (1-covered)*0.1632
		}
		if !near(nc.Commitment.Covered, covered) || !near(nc.Commitment.EffectivePerHour, effective) || strings.Join(nc.Commitment.CoveredBy, ",") != "sp-0a1b2c3d" {
			t.Errorf("NodeClaim %s: %+v, want covered %.6f by sp-0a1b2c3d at $%.6f", nc.Name, *nc.Commitment, covered, effective)
		}
	}
	if got := res.NodeClaims[5].Name; got != "api-on-demand-arm64-m7g-xlarge-6" {
		t.Errorf("the last launched is named %s", got)
	}
	c := res.Commitments
	if c == nil {
		t.Fatal("no commitments in the result")
	}
	if !near(res.Totals.CostPerHour, 0.9792) || !near(c.EffectivePerHour, 0.709635) || !near(c.UnusedEntitlementPerHour, 0) || !near(c.PaidPerHour, 0.709635) {
		t.Errorf("totals: list %.6f, %+v; want list 0.9792, effective and paid 0.709635, unused 0", res.Totals.CostPerHour, *c)
	}
	if len(c.Uses) != 1 || !near(c.Uses[0].Used, 0.60) || c.Uses[0].Nodes != 6 || !near(c.Uses[0].OvershootPerHour, 0.671782*0.1632) {
		t.Errorf("uses: %+v", c.Uses)
	}
	want := "overshoot: Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1) ran out for class api inside this batch: $0.1096/h of the 6 nodes it could cover bills at list (api-on-demand-arm64-m7g-xlarge-6 covered 32.8 %)"
	if len(c.Overshoots) != 1 || !strings.HasPrefix(c.Overshoots[0], want) {
		t.Errorf("overshoots %q, want one starting %q", c.Overshoots, want)
	}
}

// A regional Reserved Instance applies before the Savings Plan (AWS's order): 2 m7g.large
// (8 normalized units) cover one m7g.xlarge at twice their effectiveHourly, the plan the
// other five, and what the plan has left is reported unused, with no overshoot.
func TestCommitmentsReservedInstanceFirstAndUnusedEntitlement(t *testing.T) {
	ri := `    reservedInstances:
    - {id: ri-1, instanceType: m7g.large, count: 2, scope: Region, effectiveHourly: "0.0646", share: {percent: 100}}`
	pools, cc := committedClass(t, ri, map[string]float64{"sp-0a1b2c3d": 0.60, "ri-1": 8})
	res := run(t, pools, apiPods(6), func(o *simulate.Options) { o.Commitments = []simulate.ClassCommitments{cc} })
	byRI := 0
	for _, nc := range res.NodeClaims {
		if nc.Commitment == nil {
			t.Fatalf("%s is not priced with the commitments", nc.Name)
		}
		switch by := strings.Join(nc.Commitment.CoveredBy, ","); by {
		case "ri-1":
			byRI++
			if !near(nc.Commitment.EffectivePerHour, 0.1292) {
				t.Errorf("%s covered by the RI at $%.6f, want 2 x 0.0646", nc.Name, nc.Commitment.EffectivePerHour)
			}
		case "sp-0a1b2c3d":
			if !near(nc.Commitment.EffectivePerHour, 0.112608) {
				t.Errorf("%s covered by the plan at $%.6f", nc.Name, nc.Commitment.EffectivePerHour)
			}
		default:
			t.Errorf("%s covered by %q", nc.Name, by)
		}
	}
	c := res.Commitments
	if c == nil {
		t.Fatal("no commitments in the result")
	}
	if byRI != 1 || !near(c.EffectivePerHour, 0.1292+5*0.112608) || !near(c.UnusedEntitlementPerHour, 0.60-5*0.112608) || len(c.Overshoots) != 0 {
		t.Errorf("%d nodes on the RI; %+v; want effective %.6f, unused 0.03696, no overshoot", byRI, *c, 0.1292+5*0.112608)
	}
	if len(c.Uses) != 2 || c.Uses[0].Commitment != "ri-1" || c.Uses[0].Unit != "normalized units" || !near(c.Uses[0].Used, 8) || !near(c.Uses[0].UnusedPerHour, 0) {
		t.Errorf("uses %+v, want the RI first, all 8 units used", c.Uses)
	}
	if !near(c.PaidPerHour, c.EffectivePerHour+c.UnusedEntitlementPerHour) {
		t.Errorf("paid %.6f is not effective plus unused", c.PaidPerHour)
	}
}

// Two nodes leave most of the plan unused; spot nodes are never covered; without
// Options.Commitments nothing is added to the JSON.
func TestCommitmentsUnusedAndNothingWithout(t *testing.T) {
	pools, cc := committedClass(t, "", map[string]float64{"sp-0a1b2c3d": 0.60})
	res := run(t, pools, apiPods(2), func(o *simulate.Options) { o.Commitments = []simulate.ClassCommitments{cc} })
	if res.Commitments == nil {
		t.Fatal("no commitments in the result")
	}
	if c := res.Commitments; !near(c.UnusedEntitlementPerHour, 0.374784) || len(c.Overshoots) != 0 || c.Uses[0].Nodes != 2 {
		t.Errorf("two nodes: %+v, want 0.374784 unused, no overshoot", *c)
	}
	if l, unused, ok := res.Commitments.Ledger("api"); !ok || !near(unused, 0.374784) || len(l.Covered) != 2 {
		t.Errorf("Ledger(api): %+v %v %v", l, unused, ok)
	}

	spotOnly := run(t, pools, apiPods(2), func(o *simulate.Options) {
		o.Commitments = []simulate.ClassCommitments{cc}
		o.Unavailable = func(_ *catalog.InstanceType, _, ct string) bool { return ct == karpv1.CapacityTypeOnDemand }
	})
	for _, nc := range spotOnly.NodeClaims {
		if nc.Commitment == nil {
			t.Fatalf("%s is not priced with the commitments", nc.Name)
		}
		if nc.CapacityType != karpv1.CapacityTypeSpot || nc.Commitment.Covered != 0 || !near(nc.Commitment.EffectivePerHour, nc.PricePerHour) {
			t.Errorf("spot NodeClaim %+v covered", nc)
		}
	}
	if spotOnly.Commitments == nil || !near(spotOnly.Commitments.UnusedEntitlementPerHour, 0.60) {
		t.Errorf("spot only: unused %.6f, want the whole 0.60", spotOnly.Commitments.UnusedEntitlementPerHour)
	}

	plain := run(t, pools, apiPods(2))
	out, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Commitments != nil || strings.Contains(string(out), `"commitment`) {
		t.Errorf("without commitments the result says %s", out)
	}
}
