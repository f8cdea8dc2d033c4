package simulate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// samplePools renders config/samples, with mutate applied to each class first.
func samplePools(t testing.TB, mutate func(*v1alpha1.WorkloadClass)) []*karpv1.NodePool {
	t.Helper()
	objs, err := manifest.Load([]string{"../../config/samples"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var base *v1alpha1.Baseline
	var classes []*v1alpha1.WorkloadClass
	for _, o := range objs {
		switch o.GetKind() {
		case "Baseline":
			base = &v1alpha1.Baseline{}
			if err := o.Into(base); err != nil {
				t.Fatal(err)
			}
		case "WorkloadClass":
			wc := &v1alpha1.WorkloadClass{}
			if err := o.Into(wc); err != nil {
				t.Fatal(err)
			}
			if mutate != nil {
				mutate(wc)
			}
			classes = append(classes, wc)
		}
	}
	var pools []*karpv1.NodePool
	for _, wc := range classes {
		res, err := render.Render(base, wc, render.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, res.NodePools...)
	}
	return pools
}

type podOption func(*corev1.Pod)

func pods(n int, name string, cpu string, opts ...podOption) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default", UID: types.UID(name + fmt.Sprint(i)), Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
			}}}}},
		}
		for _, o := range opts {
			o(p)
		}
		out = append(out, p)
	}
	return out
}

func run(t testing.TB, pools []*karpv1.NodePool, ps []*corev1.Pod, opts ...func(*simulate.Options)) *simulate.Result {
	t.Helper()
	o := simulate.Options{Region: "us-east-1", Zones: zones}
	for _, f := range opts {
		f(&o)
	}
	res, err := simulate.Run(context.Background(), pools, ps, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unschedulable) > 0 {
		t.Fatalf("unschedulable pods: %v", res.Unschedulable)
	}
	return res
}

func TestGPUPodsLandOnlyOnTheGPUClass(t *testing.T) {
	gpu := pods(2, "train", "2", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		p.Spec.Tolerations = []corev1.Toleration{{Key: render.GPUTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	res := run(t, samplePools(t, nil), gpu)
	for _, nc := range res.NodeClaims {
		if !strings.HasPrefix(nc.NodePool, "gpu-") {
			t.Errorf("GPU pod on %s", nc.NodePool)
		}
		if c, _ := catalog.Load(); c.Types[nc.InstanceType].GPUMaker != "nvidia" {
			t.Errorf("GPU pod on %s", nc.InstanceType)
		}
	}
	if len(res.NodeClaims) == 0 {
		t.Fatal("no NodeClaims")
	}
}

func TestPodsWithoutTheClassTolerationNeverLandOnATaintedClass(t *testing.T) {
	res := run(t, samplePools(t, nil), pods(20, "web", "500m"))
	for _, nc := range res.NodeClaims {
		if strings.HasPrefix(nc.NodePool, "ci-") || strings.HasPrefix(nc.NodePool, "gpu-") || strings.HasPrefix(nc.NodePool, "analytics-") {
			t.Errorf("untolerating pods on tainted class rung %s", nc.NodePool)
		}
	}
}

func static(wc *v1alpha1.WorkloadClass) {
	wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic, Ceiling: ptr(int32(100))}
	if wc.Spec.Profile == v1alpha1.ProfileGeneral {
		return
	}
	wc.Spec.Weighting.Ceiling = ptr(int32(50))
}

func ptr[T any](v T) *T { return &v }

func TestArm64PreferredLadderAndAmd64OnlyPods(t *testing.T) {
	pools := samplePools(t, static)
	res := run(t, pools, pods(6, "web", "1"))
	for _, nc := range res.NodeClaims {
		if nc.NodePool != "general-spot-arm64" {
			t.Errorf("arm64-compatible pods on %s, want general-spot-arm64", nc.NodePool)
		}
	}
	amd := run(t, pools, pods(6, "legacy", "1", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "amd64"}
	}))
	for _, nc := range amd.NodeClaims {
		if nc.NodePool != "general-spot-amd64" {
			t.Errorf("amd64-only pods on %s, want general-spot-amd64", nc.NodePool)
		}
	}
}

func TestUnavailablePreferredOfferingsFallBackToTheNextRung(t *testing.T) {
	pools := samplePools(t, static)
	res := run(t, pools, pods(4, "web", "1"), func(o *simulate.Options) {
		o.Unavailable = func(it *catalog.InstanceType, _, ct string) bool {
			return it.Arch == "arm64" && ct == karpv1.CapacityTypeSpot
		}
	})
	for _, nc := range res.NodeClaims {
		if nc.NodePool != "general-spot-amd64" {
			t.Errorf("with arm64 spot unavailable pods went to %s, want general-spot-amd64", nc.NodePool)
		}
	}
}

func spread(p *corev1.Pod) {
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
	}}
}

func TestFamilyConsistencyYieldsOneFamilyForASpreadDeployment(t *testing.T) {
	pools := samplePools(t, func(wc *v1alpha1.WorkloadClass) {
		if wc.Name == "general" {
			wc.Spec.Consistency = v1alpha1.ConsistencyFamily
			wc.Spec.Instances.Families = nil
		}
	})
	res := run(t, pools, pods(5, "spread", "1500m", spread))
	if res.Totals.Families != 1 || res.Totals.Nodes < 3 {
		t.Errorf("Family consistency: %d nodes in %d families (%+v)", res.Totals.Nodes, res.Totals.Families, res.NodeClaims)
	}
	zonesUsed := map[string]bool{}
	for _, nc := range res.NodeClaims {
		zonesUsed[nc.Zone] = true
	}
	if len(zonesUsed) != 3 {
		t.Errorf("spread over %d zones, want 3", len(zonesUsed))
	}
}

func TestWorkloadCountsAreBoundedAndNamed(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"negative replicas", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -5, template: {spec: {containers: [{name: c}]}}}\n",
			"Deployment web): spec.replicas: -5 must not be negative"},
		{"two billion replicas", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {replicas: 2000000000, template: {spec: {containers: [{name: c}]}}}\n",
			"StatefulSet db): spec.replicas: 2000000000 is more than the 10000 pods"},
		{"Job parallelism", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 10001, template: {spec: {containers: [{name: c}]}}}\n",
			"Job j): spec.parallelism: 10001 is more than"},
		{"many workloads together", strings.Repeat("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 6000, template: {spec: {containers: [{name: c}]}}}\n", 2),
			"6000 more pods make more than the 10000 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("w.yaml", strings.NewReader(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			pods, err := simulate.Pods(objs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%d pods, error %v; want %q", len(pods), err, tc.want)
			}
		})
	}
	objs, _ := manifest.Decode("w.yaml", strings.NewReader("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 10000, template: {spec: {containers: [{name: c}]}}}\n"))
	if pods, err := simulate.Pods(objs); err != nil || len(pods) != simulate.MaxPods {
		t.Errorf("exactly MaxPods: %d pods, %v", len(pods), err)
	}
}

// TestAdvisorSavingsPriceTheLaunch: with an advisor feed that gives every us-east-1 type
// 50% savings at <5% interruption, each spot NodeClaim costs exactly half its type's
// on-demand price and says the advisor priced it.
func TestAdvisorSavingsPriceTheLaunch(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	linux := map[string]map[string]int{}
	for name := range cat.Prices["us-east-1"] {
		linux[name] = map[string]int{"s": 50, "r": 0}
	}
	feed, err := json.Marshal(map[string]any{
		"ranges":       []map[string]any{{"index": 0, "label": "<5%"}},
		"spot_advisor": map[string]any{"us-east-1": map[string]any{"Linux": linux}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", Annotations: map[string]string{signals.FetchedAtAnnotation: "2026-11-29T10:00:00Z"}},
		Data: map[string]string{signals.AdvisorKey: string(feed)}}
	s, err := signals.FromConfigMap(cm, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, samplePools(t, static), pods(6, "web", "1"), func(o *simulate.Options) { o.Catalog = s.Apply(cat) })
	if len(res.NodeClaims) == 0 {
		t.Fatal("no NodeClaims")
	}
	for _, nc := range res.NodeClaims {
		od := cat.Prices["us-east-1"][nc.InstanceType].OnDemand
		if nc.CapacityType != karpv1.CapacityTypeSpot || math.Abs(nc.PricePerHour-od*0.5) > 1e-12 || nc.PriceSource != "advisor 2026-11-29" {
			t.Errorf("%s %s at $%v from %q, want spot at $%v from advisor 2026-11-29", nc.NodePool, nc.InstanceType, nc.PricePerHour, nc.PriceSource, od*0.5)
		}
	}
	plain := run(t, samplePools(t, static), pods(6, "web", "1"))
	if plain.NodeClaims[0].PriceSource != "catalog 2025-05-28" {
		t.Errorf("without signals the price source is %q", plain.NodeClaims[0].PriceSource)
	}
}

// Karpenter tries NodePools by weight whatever order they are listed in (a cluster lists
// them by name): simulate must too.
func TestRunTriesNodePoolsByWeightNotListOrder(t *testing.T) {
	pool := func(name string, weight int32, arch string) *karpv1.NodePool {
		return &karpv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: karpv1.NodePoolSpec{Weight: &weight, Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
				},
			}}},
		}
	}
	// By name, "a-amd64" comes first; by weight, "b-arm64".
	pools := []*karpv1.NodePool{pool("a-amd64", 10, "amd64"), pool("b-arm64", 90, "arm64")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	res, err := simulate.Run(context.Background(), pools, []*corev1.Pod{pod}, simulate.Options{Region: "us-east-1", Zones: zones})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodeClaims) != 1 || res.NodeClaims[0].NodePool != "b-arm64" {
		t.Fatalf("NodeClaims %+v, want one on the heavier b-arm64", res.NodeClaims)
	}
	if pools[0].Name != "a-amd64" {
		t.Error("Run reordered the caller's slice")
	}
}
