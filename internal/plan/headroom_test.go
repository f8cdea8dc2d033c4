package plan_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

// headroomFixture is the fixture class with units of headroom, rendered with mechanism
// (Pods or CapacityBuffer).
func headroomFixture(t *testing.T, replicas int32, mechanism v1alpha1.HeadroomMechanism) (*v1alpha1.WorkloadClass, *render.Result) {
	t.Helper()
	return fixtureWith(t, render.Options{Capabilities: capabilities.Capabilities{Headroom: mechanism}}, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To(replicas), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}
	})
}

// storedHeadroom is the result's headroom children as the API server stores them.
func storedHeadroom(t *testing.T, wc *v1alpha1.WorkloadClass, res *render.Result) map[string]client.Object {
	t.Helper()
	out := map[string]client.Object{}
	for _, obj := range res.Headroom.Objects {
		out[plan.HeadroomRef(obj)] = stored(t, wc, obj, obj.DeepCopyObject().(client.Object))
	}
	return out
}

func TestHeadroomChildrenArePlannedLikeEveryChild(t *testing.T) {
	for _, tc := range []struct {
		mechanism v1alpha1.HeadroomMechanism
		refs      []string
		edit      func(client.Object)
		edited    string
	}{
		{v1alpha1.HeadroomPods, []string{"Deployment/web-headroom"}, func(o client.Object) {
			// More replicas and a blanket toleration.
			d := o.(*appsv1.Deployment)
			d.Spec.Replicas = ptr.To[int32](9)
			d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}, "Deployment/web-headroom"},
		{v1alpha1.HeadroomCapacityBuffer, []string{"PodTemplate/web-headroom", "CapacityBuffer/web-headroom"}, func(o client.Object) {
			// A percentage Karpenter would ignore, and more replicas.
			cb := o.(*cbv1beta1.CapacityBuffer)
			cb.Spec.Replicas, cb.Spec.Percentage = ptr.To[int32](9), ptr.To[int32](50)
		}, "CapacityBuffer/web-headroom"},
		{v1alpha1.HeadroomCapacityBuffer, nil, func(o client.Object) {
			// The unit pinned to another rung.
			if pt, ok := o.(*corev1.PodTemplate); ok {
				pt.Template.Spec.NodeSelector["karpenter.sh/nodepool"] = "web-on-demand-amd64"
			}
		}, "PodTemplate/web-headroom"},
	} {
		t.Run(string(tc.mechanism)+" "+tc.edited, func(t *testing.T) {
			wc, res := headroomFixture(t, 2, tc.mechanism)
			p := compute(t, plan.Input{Class: wc, Result: res})
			for _, ref := range tc.refs {
				if !strings.Contains(actions(p), "create "+ref) {
					t.Fatalf("no create of %s: %s", ref, actions(p))
				}
			}
			if invalid := p.Validate(schema(t)); len(invalid) > 0 {
				t.Fatalf("refused: %v", invalid[0].Err)
			}

			live := synced(t, wc, res)
			live.Headroom = storedHeadroom(t, wc, res)
			if p := compute(t, plan.Input{Class: wc, Result: res, Live: live}); p.Changed() {
				t.Fatalf("synced headroom children are written again: %s", actions(p))
			}

			// A hand edit is reverted.
			edited := live.Headroom[tc.edited].DeepCopyObject().(client.Object)
			tc.edit(edited)
			live.Headroom[tc.edited] = edited
			p = compute(t, plan.Input{Class: wc, Result: res, Live: live})
			if got := actions(p); !strings.Contains(got, "update "+tc.edited) || strings.Count(got, "update") != 1 {
				t.Fatalf("a hand edit of %s is not reverted, alone: %s", tc.edited, got)
			}
			if invalid := p.Validate(schema(t)); len(invalid) > 0 {
				t.Fatalf("refused: %v", invalid[0].Err)
			}

			// Headroom removed from the spec: every child is deleted, whatever the prune policy.
			wc.Spec.PrunePolicy = v1alpha1.PruneOrphan
			_, bare := fixture(t)
			p = compute(t, plan.Input{Class: wc, Result: bare, Live: live})
			for ref := range live.Headroom {
				if !strings.Contains(actions(p), "delete "+ref) {
					t.Fatalf("an unrendered %s is not pruned: %s", ref, actions(p))
				}
			}
		})
	}
}

// A switch of mechanism creates the new mechanism's children and deletes the old one's.
func TestHeadroomMechanismSwitchPrunesTheOther(t *testing.T) {
	wc, pods := headroomFixture(t, 2, v1alpha1.HeadroomPods)
	_, buffer := headroomFixture(t, 2, v1alpha1.HeadroomCapacityBuffer)
	live := synced(t, wc, pods)
	live.Headroom = storedHeadroom(t, wc, pods)
	p := compute(t, plan.Input{Class: wc, Result: buffer, Live: live})
	got := actions(p)
	for _, want := range []string{"create PodTemplate/web-headroom", "create CapacityBuffer/web-headroom", "delete Deployment/web-headroom"} {
		if !strings.Contains(got, want) {
			t.Errorf("Pods to CapacityBuffer: no %q in %s", want, got)
		}
	}
	live.Headroom = storedHeadroom(t, wc, buffer)
	got = actions(compute(t, plan.Input{Class: wc, Result: pods, Live: live}))
	for _, want := range []string{"create Deployment/web-headroom", "delete CapacityBuffer/web-headroom", "delete PodTemplate/web-headroom"} {
		if !strings.Contains(got, want) {
			t.Errorf("CapacityBuffer to Pods: no %q in %s", want, got)
		}
	}
}

func TestValidatorJudgesTheHeadroomChildren(t *testing.T) {
	for _, tc := range []struct {
		mechanism v1alpha1.HeadroomMechanism
		kind      string
		break_    func(map[string]any)
		want      string
	}{
		{v1alpha1.HeadroomPods, plan.KindDeployment, func(o map[string]any) {
			o["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "other"}}
		}, "spec.template.metadata.labels"},
		// Karpenter's CRD: a podTemplateRef needs replicas or limits.
		{v1alpha1.HeadroomCapacityBuffer, plan.KindCapacityBuffer, func(o map[string]any) {
			spec := o["spec"].(map[string]any)
			delete(spec, "replicas")
			delete(spec, "limits")
		}, "If podTemplateRef is set, replicas or limits must also be set"},
		{v1alpha1.HeadroomCapacityBuffer, plan.KindCapacityBuffer, func(o map[string]any) {
			o["spec"].(map[string]any)["replicas"] = int64(-1)
		}, "spec.replicas"},
		{v1alpha1.HeadroomCapacityBuffer, plan.KindPodTemplate, func(o map[string]any) {
			o["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{}
		}, "template.spec.containers"},
		{v1alpha1.HeadroomCapacityBuffer, plan.KindPodTemplate, func(o map[string]any) {
			o["template"].(map[string]any)["replicas"] = int64(2)
		}, "unknown field"},
	} {
		t.Run(tc.kind+" "+tc.want, func(t *testing.T) {
			wc, res := headroomFixture(t, 2, tc.mechanism)
			p := compute(t, plan.Input{Class: wc, Result: res})
			for _, s := range p.Steps {
				if s.Kind != tc.kind {
					continue
				}
				if err := schema(t).Create(s.Object); err != nil {
					t.Fatalf("the rendered %s is refused: %v", tc.kind, err)
				}
				tc.break_(s.Object)
				err := schema(t).Create(s.Object)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want %q, got %v", tc.want, err)
				}
				return
			}
			t.Fatalf("no %s step", tc.kind)
		})
	}
}
