package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// committedSimulation is what simulate -o json prints with commitments.
type committedSimulation struct {
	Poolsmith struct {
		NodeClaims []struct {
			Name, NodePool, InstanceType, CapacityType string
			PricePerHour                               float64
			Commitment                                 *struct {
				CoveredBy        []string
				Covered          float64
				EffectivePerHour float64
			}
		}
		Totals      struct{ CostPerHour float64 }
		Commitments *struct {
			EffectivePerHour, UnusedEntitlementPerHour, PaidPerHour float64
			Uses                                                    []struct {
				Class, Commitment, Unit string
				Entitlement, Used       float64
				Nodes                   int
			}
			Overshoots []string
		}
	}
	Classes []classCost
}

// within is a figure of the docs to the cent or better (they print six decimals).
func within(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// renderedWeights are the weights render gives each NodePool of the input.
func renderedWeights(t *testing.T, args ...string) map[string]float64 {
	t.Helper()
	code, out, stderr := run(t, "", append([]string{"render", "-o", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("render %v: exit %d: %s", args, code, stderr)
	}
	var list struct {
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct{ Weight float64 }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	weights := map[string]float64{}
	for _, o := range list.Items {
		if o.Kind == "NodePool" {
			weights[o.Metadata.Name] = o.Spec.Weight
		}
	}
	return weights
}

// TestSimulateWithASavingsPlanIsTheWorkedExample: docs/commitments.md's worked example end
// to end through poolsmith simulate. Six nodes' worth of pods in one batch: with the plan
// the on-demand m7g rung ranks first, five nodes draw the plan's $0.112608/h, the sixth is
// covered for 32.8 % of its hour, and the hour costs $0.709635; without it (the same input
// with --no-commitments, or with the plan cut from the Baseline) the spot c7g rung ranks
// first and all six go there, $0.3306/h on top of the $0.60/h entitlement paid anyway:
// $0.9306/h.
func TestSimulateWithASavingsPlanIsTheWorkedExample(t *testing.T) {
	const (
		od, spot = "api-on-demand-arm64-m7g-xlarge", "api-spot-arm64-c7g-xlarge"
		rate     = 0.1632 * 0.69 // $0.112608/h, what one m7g.xlarge draws
	)
	batch := "testdata/commitments-batch.yaml"
	plain, err := os.ReadFile("testdata/commitments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start, end := strings.Index(string(plain), "  commitments:\n"), strings.Index(string(plain), "---\n")
	noPlan := filepath.Join(t.TempDir(), "no-plan.yaml")
	if err := os.WriteFile(noPlan, append(plain[:start:start], plain[end:]...), 0o644); err != nil {
		t.Fatal(err)
	}

	// The weights of the docs' two tables.
	with, without := renderedWeights(t, "-f", "testdata/commitments.yaml"), renderedWeights(t, "-f", noPlan)
	for name, want := range map[string][2]float64{
		od:                               {100, 97},
		spot:                             {99, 100},
		"api-spot-arm64-m7g-xlarge":      {98, 99},
		"api-on-demand-arm64-c7g-xlarge": {97, 98},
	} {
		if with[name] != want[0] || without[name] != want[1] {
			t.Errorf("%s: weight %v with the plan, %v without; want %v", name, with[name], without[name], want)
		}
	}

	var got committedSimulation
	code, out, stderr := run(t, "", "simulate", "-o", "json", "-f", "testdata/commitments.yaml", "-f", batch)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	ncs := got.Poolsmith.NodeClaims
	if len(ncs) != 6 {
		t.Fatalf("%d NodeClaims, want 6:\n%s", len(ncs), out)
	}
	for i, nc := range ncs {
		covered := 1.0
		if i == 5 {
			covered = (0.60 - 5*rate) / rate // 0.03696 / 0.112608 = 32.8 %
		}
		effective := covered*rate + (1-covered)*0.1632
		if nc.NodePool != od || nc.InstanceType != "m7g.xlarge" || nc.CapacityType != "on-demand" || !within(nc.PricePerHour, 0.1632) || nc.Commitment == nil ||
			strings.Join(nc.Commitment.CoveredBy, ",") != "sp-0a1b2c3d" || !within(nc.Commitment.Covered, covered) || !within(nc.Commitment.EffectivePerHour, effective) {
			t.Errorf("NodeClaim %d: %+v %+v; want on %s at $0.1632, covered %.6f by sp-0a1b2c3d, effective $%.6f", i+1, nc, nc.Commitment, od, covered, effective)
		}
	}
	if ncs[5].Commitment == nil {
		t.Fatal("the NodeClaims are not priced with the plan")
	}
	if !within(ncs[5].Commitment.Covered, 0.328218) || !within(ncs[5].Commitment.EffectivePerHour, 0.036960+0.109635) {
		t.Errorf("the sixth node: %+v; the docs: covered 32.8 %%, $0.036960 drawn and $0.109635 at list", *ncs[5].Commitment)
	}
	c := got.Poolsmith.Commitments
	if c == nil || !within(got.Poolsmith.Totals.CostPerHour, 6*0.1632) || !within(c.EffectivePerHour, 0.709635) || !within(c.UnusedEntitlementPerHour, 0) || !within(c.PaidPerHour, 0.709635) {
		t.Fatalf("totals: list %v, %+v; want list 0.9792, effective and paid 0.709635, nothing unused", got.Poolsmith.Totals.CostPerHour, c)
	}
	if len(c.Uses) != 1 || c.Uses[0].Class != "api" || c.Uses[0].Unit != "USD/h" || !within(c.Uses[0].Entitlement, 3.00*0.40*0.50) || !within(c.Uses[0].Used, 0.60) || c.Uses[0].Nodes != 6 {
		t.Errorf("uses: %+v; want api's $0.60/h entitlement all used by 6 nodes", c.Uses)
	}
	if len(c.Overshoots) != 1 || !strings.Contains(c.Overshoots[0], "sp-0a1b2c3d") || !strings.Contains(c.Overshoots[0], od+"-6 covered 32.8 %") || !strings.Contains(c.Overshoots[0], "$0.1096/h") {
		t.Errorf("overshoots: %q", c.Overshoots)
	}
	if len(got.Classes) != 1 || got.Classes[0].Cost.PerHour != "0.9792" || got.Classes[0].Cost.EffectivePerHour != "0.7096" || got.Classes[0].Cost.UnusedEntitlementPerHour != "0.0000" {
		t.Errorf("the class's cost: %+v; want 0.9792 at list, 0.7096 effective, nothing unused", got.Classes)
	}

	for _, args := range [][]string{{"-f", "testdata/commitments.yaml", "--no-commitments"}, {"-f", noPlan}} {
		var bare committedSimulation
		code, out, stderr := run(t, "", append([]string{"simulate", "-o", "json", "-f", batch}, args...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &bare); err != nil {
			t.Fatal(err)
		}
		for _, nc := range bare.Poolsmith.NodeClaims {
			if nc.NodePool != spot || !within(nc.PricePerHour, 0.0551) || nc.Commitment != nil {
				t.Errorf("%v: NodeClaim %+v, want spot c7g.xlarge at $0.0551 and no commitment", args, nc)
			}
		}
		if len(bare.Poolsmith.NodeClaims) != 6 || !within(bare.Poolsmith.Totals.CostPerHour, 0.3306) || bare.Poolsmith.Commitments != nil || strings.Contains(out, `"commitments"`) {
			t.Errorf("%v: %d NodeClaims, $%v/h, commitments %+v; want 6 at $0.3306/h and none", args, len(bare.Poolsmith.NodeClaims), bare.Poolsmith.Totals.CostPerHour, bare.Poolsmith.Commitments)
		}
		// The docs' comparison: the entitlement is paid whether used or not.
		if without := bare.Poolsmith.Totals.CostPerHour + c.Uses[0].Entitlement; !within(without, 0.9306) || !within(without-c.PaidPerHour, 0.9306-0.709635) {
			t.Errorf("%v: without the plan the hour costs %.6f, want 0.9306", args, without)
		}
	}

	// The table says the same.
	code, out, _ = run(t, "", "simulate", "-f", "testdata/commitments.yaml", "-f", batch)
	for _, want := range [][]string{
		{od, "on-demand", "m7g.xlarge", "0.1632", "sp-0a1b2c3d", "100.0%", "0.1126"},
		{od, "on-demand", "m7g.xlarge", "0.1632", "sp-0a1b2c3d", "32.8%", "0.1466"},
		{"Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1)", "api", "$0.6000/h", "$0.6000/h", "6", "0.0000"},
		{"effective per hour", "$0.7096"},
		{"unused entitlement per hour", "$0.0000"},
		{"paid per hour (effective + unused)", "$0.7096"},
		{"overshoot: Savings Plan sp-0a1b2c3d", "ran out for class api inside this batch"},
	} {
		if code != ExitOK || !hasLine(out, want...) {
			t.Errorf("exit %d; the table has no line with %q:\n%s", code, want, out)
		}
	}
}

// Each class is priced against its own part only, split among the input's classes of the
// Baseline as the manager splits it: api keeps its allocation's $0.60/h whatever the other
// classes do, web and batch (two teams no allocation matches: batch has no team label,
// which sets it apart from team web) split the other half, and etl, which ignores
// commitments, gets none; their unused parts count in the unused entitlement.
func TestSimulateSplitsEntitlementsAmongTheInputsClasses(t *testing.T) {
	others := writeTemp(t, "others.yaml", `apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: web, labels: {team: web}}
spec:
  architectures: [arm64]
  capacityTypes: [spot, on-demand]
  consistency: Type
  instances: {types: [m7g.xlarge, c7g.xlarge]}
---
apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: batch}
spec:
  architectures: [arm64]
  capacityTypes: [spot, on-demand]
  consistency: Type
  instances: {types: [m7g.xlarge, c7g.xlarge]}
---
apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: etl}
spec:
  architectures: [arm64]
  capacityTypes: [spot, on-demand]
  consistency: Type
  instances: {types: [m7g.xlarge, c7g.xlarge]}
  weighting: {commitments: Ignore}
`)
	var got committedSimulation
	code, out, stderr := run(t, "", "simulate", "-o", "json", "-f", "testdata/commitments.yaml", "-f", others, "-f", "testdata/commitments-batch.yaml")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Poolsmith.Commitments
	if c == nil {
		t.Fatalf("no commitments:\n%s", out)
	}
	entitlement := map[string]float64{}
	for _, u := range c.Uses {
		entitlement[u.Class] = u.Entitlement
		if u.Class == "api" && (!within(u.Used, 0.60) || u.Nodes != 6) {
			t.Errorf("api: %+v, want its $0.60/h used by its 6 nodes", u)
		}
	}
	if len(entitlement) != 4 || !within(entitlement["api"], 0.60) || !within(entitlement["web"], 0.30) || !within(entitlement["batch"], 0.30) || entitlement["etl"] != 0 {
		t.Errorf("entitlements %v, want api 0.60 (allocations[0]), web and batch 0.30 (the rest, two teams), etl 0 (Ignore)", entitlement)
	}
	if !within(c.EffectivePerHour, 0.709635) || !within(c.UnusedEntitlementPerHour, 0.60) || !within(c.PaidPerHour, 1.309635) || len(c.Overshoots) != 1 {
		t.Errorf("%+v; want api's batch as alone (effective 0.709635, one overshoot) and web's and batch's 0.60 unused", *c)
	}
}

// --reservations offers what describe-capacity-reservations printed to the reserved rungs:
// the open reservation's 3 free m7g.xlarge take three of class reserving's four pods,
// billed at on-demand; the fourth waits, as with Karpenter v1.15.0. A reservation in a
// zone not offered, or a file that is not the AWS CLI's, is refused naming it.
func TestSimulateReservations(t *testing.T) {
	args := []string{"simulate", "-o", "json", "-f", "testdata/open-reservation.yaml", "-f", "testdata/reserving-batch.yaml"}
	code, out, stderr := run(t, "", append(args, "--reservations", "testdata/capacity-reservations.json")...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Poolsmith struct {
			NodeClaims []struct {
				NodePool, CapacityType, InstanceType, Zone, ReservationID string
				PricePerHour                                              float64
			}
			Unschedulable map[string]string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, nc := range got.Poolsmith.NodeClaims {
		if nc.NodePool != "reserving-reserved-arm64" || nc.CapacityType != "reserved" || nc.ReservationID != "cr-0a1b2c3d4e5f60718" || nc.Zone != "us-east-1a" ||
			nc.InstanceType != "m7g.xlarge" || !within(nc.PricePerHour, 0.1632) {
			t.Errorf("NodeClaim %+v, want reserved m7g.xlarge in cr-0a1b2c3d4e5f60718 at on-demand $0.1632", nc)
		}
	}
	if len(got.Poolsmith.NodeClaims) != 3 || len(got.Poolsmith.Unschedulable) != 1 {
		t.Errorf("%d NodeClaims, unschedulable %v; want 3 and the fourth pod waiting", len(got.Poolsmith.NodeClaims), got.Poolsmith.Unschedulable)
	}
	if code, _, _ := run(t, "", args...); code != ExitOK {
		t.Errorf("without --reservations: exit %d", code)
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--reservations", "testdata/capacity-reservations.json", "--zones", "us-east-1b"}, "cr-0a1b2c3d4e5f60718): zone us-east-1a is not offered"},
		{[]string{"--reservations", writeTemp(t, "cr.json", `{"Reservations": []}`)}, "--reservations"},
		{[]string{"--reservations", "/nonexistent/cr.json"}, "--reservations"},
	} {
		if code, out, stderr := run(t, "", append(args, tc.extra...)...); code != ExitFindings || out != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 naming %q", tc.extra, code, stderr, tc.want)
		}
	}
}
