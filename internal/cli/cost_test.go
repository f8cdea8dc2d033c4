package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

// poolsmith cost prices the live class's NodeClaims as the manager does: the sum of their
// catalog prices, with the budget beside it.
func TestCostPricesTheLiveClasses(t *testing.T) {
	env, kubeconfig := liveCluster(t)
	ctx := context.Background()
	objs, err := manifest.Load([]string{samples + "/poolsmith_v1alpha1_baseline.yaml", samples + "/poolsmith_v1alpha1_workloadclass_ci.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Unstructured.GetKind() == "WorkloadClass" {
			if err := unstructured.SetNestedField(o.Unstructured.Object, map[string]any{"perHour": "0.01"}, "spec", "budget"); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client.Create(ctx, o.Unstructured); err != nil {
			t.Fatal(err)
		}
	}
	reconcileOnce(t, env, "ci")
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	const typ = "m6g.large"
	price := cat.Prices[catalog.DefaultRegion][typ].SpotAvg
	if price <= 0.01 {
		t.Fatalf("%s spot price %v: pick a type that costs more than the budget", typ, price)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-spot-arm64-abcde", Labels: map[string]string{
			karpv1.NodePoolLabelKey: "ci-spot-arm64", v1alpha1.LabelClass: "ci", corev1.LabelInstanceTypeStable: typ, karpv1.CapacityTypeLabelKey: "spot"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "ci"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
	}
	if err := env.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := run(t, "", "cost", "--kubeconfig", kubeconfig, "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	var got []classCost
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got) != 1 || got[0].Class != "ci" || got[0].Cost.PerHour != cost.Money(price) || got[0].BudgetExceeded == nil || !*got[0].BudgetExceeded ||
		len(got[0].Cost.Rungs) != 1 || got[0].Cost.Rungs[0].Rung != "ci-spot-arm64" || got[0].Cost.Rungs[0].Nodes != 1 {
		t.Fatalf("poolsmith cost -o json:\n%s", out)
	}
	code, out, _ = run(t, "", "cost", "--kubeconfig", kubeconfig, "--class", "ci")
	if code != ExitOK || !strings.Contains(out, "COST/H") || !strings.Contains(out, cost.Money(price)) || !strings.Contains(out, "exceeded") {
		t.Fatalf("poolsmith cost: exit %d\n%s", code, out)
	}
	if code, _, stderr := run(t, "", "cost", "--kubeconfig", kubeconfig, "-o", "yaml"); code != ExitUsage || !strings.Contains(stderr, "unknown output format") {
		t.Errorf("-o yaml: exit %d %s", code, stderr)
	}
}
