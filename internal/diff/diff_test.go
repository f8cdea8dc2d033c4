package diff_test

import (
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/diff"
)

func TestChangesIgnoresFieldsOnlyLiveHas(t *testing.T) {
	want := map[string]any{"spec": map[string]any{"weight": float64(100), "labels": map[string]any{"a": "1"}, "list": []any{"x", "y"}}}
	live := map[string]any{"spec": map[string]any{"weight": float64(100), "labels": map[string]any{"a": "1", "extra": "2"}, "list": []any{"x", "y"}}, "status": map[string]any{"nodes": float64(3)}}
	if got := diff.Changes(want, live); len(got) != 0 {
		t.Errorf("changes = %v, want none", got)
	}
	live["spec"].(map[string]any)["weight"] = float64(90)
	live["spec"].(map[string]any)["list"] = []any{"x"}
	delete(live["spec"].(map[string]any)["labels"].(map[string]any), "a")
	got := diff.Changes(want, live)
	if len(got) != 3 || got[0].String() != `spec.labels.a: (unset) -> "1"` || got[1].Path != "spec.list" || got[2].String() != "spec.weight: 90 -> 100" {
		t.Errorf("changes = %v", got)
	}
}

func TestDrift(t *testing.T) {
	np := func(expire string) *karpv1.NodePool {
		return &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{ExpireAfter: karpv1.MustParseNillableDuration(expire)}}}}
	}
	if d := diff.NodePoolDrift(np("720h"), np("720h")); d != diff.NoDrift {
		t.Errorf("same NodePool drift = %q", d)
	}
	if d := diff.NodePoolDrift(np("24h"), np("720h")); d != diff.WillDrift {
		t.Errorf("changed expireAfter drift = %q", d)
	}
	weighted := np("720h")
	weighted.Spec.Weight = new(int32)
	if d := diff.NodePoolDrift(weighted, np("720h")); d != diff.NoDrift {
		t.Errorf("a weight change must not drift nodes, got %q", d)
	}
	nc := func(alias string, tags map[string]string) *awsv1.EC2NodeClass {
		return &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: alias}}, Tags: tags}}
	}
	if d := diff.NodeClassDrift(nc("al2023@latest", map[string]string{"a": "1"}), nc("al2023@latest", map[string]string{"a": "2"})); d != diff.WillDrift {
		t.Errorf("tag change drift = %q", d)
	}
	if d := diff.NodeClassDrift(nc("al2023@v20250101", nil), nc("al2023@latest", nil)); d != diff.MayDrift {
		t.Errorf("AMI selector change drift = %q", d)
	}
}
