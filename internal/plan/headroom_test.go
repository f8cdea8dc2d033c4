package plan_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

// headroomFixture is the fixture class with two units of headroom, rendered with
// placeholder pods.
func headroomFixture(t *testing.T, replicas int32) (*v1alpha1.WorkloadClass, *render.Result) {
	t.Helper()
	return fixtureWith(t, render.Options{Capabilities: capabilities.Capabilities{Headroom: v1alpha1.HeadroomPods}}, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To(replicas), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}}
	})
}

func TestHeadroomDeploymentIsPlannedLikeEveryChild(t *testing.T) {
	wc, res := headroomFixture(t, 2)
	p := compute(t, plan.Input{Class: wc, Result: res})
	if !strings.Contains(actions(p), "create Deployment/web-headroom") {
		t.Fatalf("no create of the headroom Deployment: %s", actions(p))
	}
	if invalid := p.Validate(schema(t)); len(invalid) > 0 {
		t.Fatalf("refused: %v", invalid[0].Err)
	}

	live := synced(t, wc, res)
	live.Headroom = map[string]*appsv1.Deployment{"web-headroom": stored(t, wc, res.Headroom.Objects[0], &appsv1.Deployment{})}
	if p := compute(t, plan.Input{Class: wc, Result: res, Live: live}); p.Changed() {
		t.Fatalf("a synced headroom Deployment is written again: %s", actions(p))
	}

	// A hand edit (more replicas, a blanket toleration) is reverted.
	edited := live.Headroom["web-headroom"].DeepCopy()
	edited.Spec.Replicas = ptr.To[int32](9)
	edited.Spec.Template.Spec.Tolerations = append(edited.Spec.Template.Spec.Tolerations, edited.Spec.Template.Spec.Tolerations...)
	live.Headroom["web-headroom"] = edited
	p = compute(t, plan.Input{Class: wc, Result: res, Live: live})
	if !strings.Contains(actions(p), "update Deployment/web-headroom") {
		t.Fatalf("a hand edit is not reverted: %s", actions(p))
	}

	// Headroom removed from the spec: the Deployment is deleted, whatever the prune policy.
	wc.Spec.PrunePolicy = v1alpha1.PruneOrphan
	_, bare := fixture(t)
	p = compute(t, plan.Input{Class: wc, Result: bare, Live: live})
	if !strings.Contains(actions(p), "delete Deployment/web-headroom") {
		t.Fatalf("an unrendered headroom Deployment is not pruned: %s", actions(p))
	}
}

func TestValidatorJudgesTheHeadroomDeployment(t *testing.T) {
	wc, res := headroomFixture(t, 2)
	p := compute(t, plan.Input{Class: wc, Result: res})
	for _, s := range p.Steps {
		if s.Kind != plan.KindDeployment {
			continue
		}
		s.Object["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "other"}}
		err := schema(t).Create(s.Object)
		if err == nil || !strings.Contains(err.Error(), "spec.template.metadata.labels") {
			t.Fatalf("a selector that does not match the template: %v", err)
		}
		return
	}
	t.Fatal("no Deployment step")
}
