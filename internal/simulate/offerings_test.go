package simulate_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

// c7gPool is one spot arm64 NodePool of the c7g family, whose sizes large (2 vCPU) and
// xlarge (4 vCPU) split at the requests below.
func c7gPool(selector string) *karpv1.NodePool {
	weight := int32(10)
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "c7g"},
		Spec: karpv1.NodePoolSpec{Weight: &weight, Template: karpv1.NodeClaimTemplate{
			ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"example.com/pool": selector}},
			Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"c7g"}},
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}},
				},
			}}},
	}
}

// TestDaemonSetOverheadChangesTheInstanceType is Karpenter's documented sizing: a
// NodeClaim must hold its pods and the DaemonSets that would run on it. A 1750m pod fits a
// c7g.large (1930m allocatable); with the sample agents' 225m it does not, and Karpenter
// asks for an xlarge. A DaemonSet whose nodeSelector excludes the NodePool adds nothing.
func TestDaemonSetOverheadChangesTheInstanceType(t *testing.T) {
	objs, err := manifest.Load([]string{"../../config/samples/workloads/daemonsets.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agents, err := simulate.DaemonSetPods(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 3 {
		t.Fatalf("%d DaemonSet pods from the sample agents, want 3", len(agents))
	}
	if pods, _ := simulate.Pods(objs); len(pods) != 0 {
		t.Fatalf("DaemonSets expanded into %d pending pods, want none", len(pods))
	}
	elsewhere := agents[0].DeepCopy()
	elsewhere.Spec.NodeSelector = map[string]string{"example.com/pool": "other"}
	elsewhere.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")

	for _, tc := range []struct {
		name    string
		daemons []*corev1.Pod
		want    string
	}{
		{"no DaemonSets", nil, "c7g.large"},
		{"the sample agents", agents, "c7g.xlarge"},
		{"a DaemonSet selecting another pool", []*corev1.Pod{elsewhere}, "c7g.large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, []*karpv1.NodePool{c7gPool("c7g")}, pods(1, "app", "1750m"), func(o *simulate.Options) { o.DaemonSetPods = tc.daemons })
			if len(res.NodeClaims) != 1 || res.NodeClaims[0].InstanceType != tc.want {
				t.Fatalf("NodeClaims %+v, want one %s", res.NodeClaims, tc.want)
			}
		})
	}
}

func TestParseOfferings(t *testing.T) {
	offerings, err := simulate.ParseOfferings([]byte(`
capacityTypes: [on-demand]
offerings:
- {instanceType: c7g.large, zone: us-east-1a}
- {instanceType: c7g.large, zone: us-east-1a, capacityTypes: [spot]}
- {instanceType: c7g.large, zone: us-east-1b}
- {instanceType: m7g.large, zone: us-east-1c, capacityTypes: [spot, on-demand]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := simulate.Offerings{
		"c7g.large": {"us-east-1a": {"on-demand", "spot"}, "us-east-1b": {"on-demand"}},
		"m7g.large": {"us-east-1c": {"spot", "on-demand"}},
	}
	if got, wantS := strings.Join(flatten(offerings), " "), strings.Join(flatten(want), " "); got != wantS {
		t.Errorf("parsed %s\nwant   %s", got, wantS)
	}
	if z := strings.Join(offerings.Zones(), ","); z != "us-east-1a,us-east-1b,us-east-1c" {
		t.Errorf("zones %s", z)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"not YAML", "offerings: [", "decoding offerings"},
		{"an unknown field", "offerings:\n- {instanceType: c7g.large, zone: us-east-1a, az: us-east-1a}\n", `unknown field "az"`},
		{"the AWS CLI's output as it is", `{"InstanceTypeOfferings": [{"InstanceType": "c7g.large", "Location": "us-east-1a"}]}`, `unknown field "InstanceTypeOfferings"`},
		{"no entry", "capacityTypes: [spot]\n", "no entry"},
		{"no type", "offerings:\n- {zone: us-east-1a}\n", "offerings[0].instanceType: required"},
		{"a region for a zone", "offerings:\n- {instanceType: c7g.large, zone: us-east-1a}\n- {instanceType: c7g.large, zone: US East}\n", `offerings[1].zone: "US East" is not a zone name`},
		{"a capacity type simulate does not offer", "offerings:\n- {instanceType: c7g.large, zone: us-east-1a, capacityTypes: [reserved]}\n", `offerings[0].capacityTypes: "reserved" is not a capacity type`},
		{"a bad default", "capacityTypes: [Spot]\nofferings:\n- {instanceType: c7g.large, zone: us-east-1a}\n", `capacityTypes: "Spot" is not a capacity type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := simulate.ParseOfferings([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestOfferingsNarrowWhatKarpenterMayChoose: with c7g offered only up to xlarge, four pods
// of 3 CPU cannot share one large node (Karpenter's choice from the whole catalog), and
// spot where only on-demand is offered is not chosen.
func TestOfferingsNarrowWhatKarpenterMayChoose(t *testing.T) {
	pool := c7gPool("c7g")
	pool.Spec.Template.Spec.Requirements[1].Values = []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
	whole := run(t, []*karpv1.NodePool{pool}, pods(4, "app", "3"))
	if len(whole.NodeClaims) != 1 {
		t.Fatalf("the whole catalog: %d NodeClaims, want 1 large one: %+v", len(whole.NodeClaims), whole.NodeClaims)
	}
	offered := simulate.Offerings{
		"c7g.large":  {"us-east-1a": {"on-demand", "spot"}},
		"c7g.xlarge": {"us-east-1a": {"on-demand"}, "us-east-1b": {"on-demand"}},
	}
	res := run(t, []*karpv1.NodePool{pool}, pods(4, "app", "3"), func(o *simulate.Options) { o.Offerings = offered })
	if len(res.NodeClaims) != 4 {
		t.Fatalf("offered up to xlarge: %d NodeClaims, want 4: %+v", len(res.NodeClaims), res.NodeClaims)
	}
	for _, nc := range res.NodeClaims {
		if nc.InstanceType != "c7g.xlarge" || nc.CapacityType != karpv1.CapacityTypeOnDemand || nc.Zone == "us-east-1c" || nc.Options != 1 {
			t.Errorf("NodeClaim %+v: want c7g.xlarge on-demand in us-east-1a or b, the only type left", nc)
		}
	}
}

func TestOfferingsOfUnknownTypesAndZonesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		offerings simulate.Offerings
		want      string
	}{
		{"an unknown type", simulate.Offerings{"c7g.huge": {"us-east-1a": {"spot"}}}, "instance type c7g.huge: the catalog has no such type priced in us-east-1"},
		{"a zone of another region", simulate.Offerings{"c7g.large": {"eu-west-1a": {"spot"}}}, "instance type c7g.large: zone eu-west-1a is not in region us-east-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := simulate.Run(context.Background(), []*karpv1.NodePool{c7gPool("c7g")}, pods(1, "app", "1"),
				simulate.Options{Region: "us-east-1", Offerings: tc.offerings})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func flatten(o simulate.Offerings) []string {
	var out []string
	for _, t := range o.Types() {
		one := simulate.Offerings{t: o[t]}
		for _, z := range one.Zones() {
			out = append(out, t+"@"+z+"="+strings.Join(o[t][z], "+"))
		}
	}
	return out
}
