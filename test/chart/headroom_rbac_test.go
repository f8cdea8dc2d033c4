package chart_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// chartHeadroomRBAC is what charts/poolsmith renders with headroom.enabled: the default
// RBAC, the manager's Role on Deployments in the headroom namespace and the ClusterRole
// that lets it watch pods and get the placeholders' PriorityClass.
func chartHeadroomRBAC(t *testing.T) rbacInstall {
	out, err := helm(t, "template", "rbac", "charts/poolsmith", "--namespace", "poolsmith-chart", "--set", "headroom.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	in := chartRBAC(t)
	in.objs, in.headroom = rbacObjects(decode(t, "charts/poolsmith", out)), v1alpha1.DefaultHeadroomNamespace
	return in
}

// headroom drives spec.headroom's placeholder pods (mechanism: Pods) under
// --headroom=capacitybuffer, then its CapacityBuffers (headroomBuffers). A class sized by
// percentage (its pass builds the pod informer: list and watch pods) gets its placeholder Deployment
// (create; list and watch in the headroom namespace) and reports PriorityClassMissing (get
// on the PriorityClass poolsmith-headroom, which this API server does not hold: the sweep
// installs RBAC, not the chart's PriorityClass), a hand edit of it is reverted
// (update), a Deployment of another owner under a class's placeholder name is read once
// (get) and reported, and spec.headroom removed deletes the Deployment (delete).
func (s *scenario) headroom(apply func(client.Object) error) error {
	ns := s.in.headroom
	unit := map[string]any{"cpu": "100m"}
	if err := apply(s.headroomClass(s.name("headroom"), map[string]any{"replicas": int64(1), "percentage": int64(50), "podShape": unit, "mechanism": "Pods"})); err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: s.name("headroom") + "-headroom"}
	replicas := func() (int32, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, d); err != nil {
			return 0, err
		}
		return ptr.Deref(d.Spec.Replicas, 0), nil
	}
	if err := s.wait("the placeholder Deployment of class headroom", func() (bool, error) {
		n, err := replicas()
		return n == 1, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	if err := s.wait("class headroom's status.headroom.reason PriorityClassMissing", func() (bool, error) {
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("headroom")}, wc); err != nil {
			return false, err
		}
		return wc.Status.Headroom != nil && wc.Status.Headroom.Reason == v1alpha1.HeadroomReasonPriorityClassMissing, nil
	}); err != nil {
		return err
	}
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, key, d); err != nil {
		return err
	}
	d.Spec.Replicas = ptr.To[int32](5)
	if err := env.Client.Update(ctx, d); err != nil {
		return err
	}
	if err := s.wait("the hand edit of the placeholder Deployment reverted", func() (bool, error) {
		n, err := replicas()
		return n == 1, err
	}); err != nil {
		return err
	}

	labels := map[string]string{"app": "foreign", scenarioLabel: s.prefix}
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: s.name("headroom-collide") + "-headroom", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}},
	}
	if err := env.Client.Create(ctx, foreign); err != nil {
		return err
	}
	colliding := s.headroomClass(s.name("headroom-collide"), map[string]any{"replicas": int64(1), "podShape": unit, "mechanism": "Pods"})
	if err := apply(colliding); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass headroom-collide Synced=False (OwnershipConflict)", func() (bool, error) {
		c, _, err := condition(colliding.GetName(), v1alpha1.ConditionSynced)
		return c != nil && c.Reason == v1alpha1.ReasonOwnershipConflict, err
	}); err != nil {
		return err
	}
	if err := errors.Join(env.Client.Delete(ctx, colliding), env.Client.Delete(ctx, foreign)); err != nil {
		return err
	}

	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: s.name("headroom")}}
	if err := env.Client.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"headroom":null}}`))); err != nil {
		return err
	}
	if err := s.wait("the placeholder Deployment deleted with spec.headroom", func() (bool, error) {
		_, err := replicas()
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	return s.headroomBuffers(apply)
}

// headroomClass is a copy of the scenario's general class named name, with spec.headroom.
func (s *scenario) headroomClass(name string, headroom map[string]any) *unstructured.Unstructured {
	wc := &unstructured.Unstructured{}
	for _, o := range s.objs {
		if o.GetName() == s.name("general") {
			wc.Object = map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
				"metadata": map[string]any{"name": name}, "spec": runtime.DeepCopyJSONValue(o.Object["spec"])}
		}
	}
	_ = unstructured.SetNestedField(wc.Object, headroom, "spec", "headroom")
	return wc
}

// headroomBuffers drives the CapacityBuffer mechanism: a class gets its PodTemplate and
// CapacityBuffer (create; list and watch in the headroom namespace), hand edits of both are
// reverted (update), a PodTemplate and a CapacityBuffer of another owner under a class's
// names are each read once (get) and reported, and spec.headroom removed deletes both
// (delete).
func (s *scenario) headroomBuffers(apply func(client.Object) error) error {
	ns := s.in.headroom
	unit := map[string]any{"cpu": "100m"}
	name := s.name("headroom-buffer")
	if err := apply(s.headroomClass(name, map[string]any{"replicas": int64(2), "podShape": unit})); err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: name + "-headroom"}
	buffer := func() (*cbv1beta1.CapacityBuffer, error) {
		b := &cbv1beta1.CapacityBuffer{}
		return b, env.Client.Get(ctx, key, b)
	}
	template := func() (*corev1.PodTemplate, error) {
		pt := &corev1.PodTemplate{}
		return pt, env.Client.Get(ctx, key, pt)
	}
	holds := func() (bool, error) {
		b, err := buffer()
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		pt, err := template()
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return ptr.Deref(b.Spec.Replicas, 0) == 2 && pt.Template.Spec.PriorityClassName == "", nil
	}
	if err := s.wait("the PodTemplate and CapacityBuffer of class headroom-buffer", holds); err != nil {
		return err
	}
	b, err := buffer()
	if err != nil {
		return err
	}
	b.Spec.Replicas = ptr.To[int32](7)
	if err := env.Client.Update(ctx, b); err != nil {
		return err
	}
	pt, err := template()
	if err != nil {
		return err
	}
	pt.Template.Spec.PriorityClassName = "system-cluster-critical"
	if err := env.Client.Update(ctx, pt); err != nil {
		return err
	}
	if err := s.wait("the hand edits of the PodTemplate and CapacityBuffer reverted", holds); err != nil {
		return err
	}

	labels := map[string]string{scenarioLabel: s.prefix}
	var foreign []client.Object
	for _, c := range []struct {
		class string
		obj   client.Object
	}{
		{"headroom-collide-pt", &corev1.PodTemplate{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}}},
		{"headroom-collide-cb", &cbv1beta1.CapacityBuffer{Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "elsewhere"}, Replicas: ptr.To[int32](0)}}},
	} {
		c.obj.SetName(s.name(c.class) + "-headroom")
		c.obj.SetNamespace(ns)
		c.obj.SetLabels(labels)
		if err := env.Client.Create(ctx, c.obj); err != nil {
			return err
		}
		foreign = append(foreign, c.obj)
		colliding := s.headroomClass(s.name(c.class), map[string]any{"replicas": int64(1), "podShape": unit})
		if err := apply(colliding); err != nil {
			return err
		}
		if err := s.wait("WorkloadClass "+c.class+" Synced=False (OwnershipConflict)", func() (bool, error) {
			cond, _, err := condition(colliding.GetName(), v1alpha1.ConditionSynced)
			return cond != nil && cond.Reason == v1alpha1.ReasonOwnershipConflict, err
		}); err != nil {
			return err
		}
		foreign = append(foreign, colliding)
	}
	for _, o := range foreign {
		if err := env.Client.Delete(ctx, o); err != nil {
			return err
		}
	}

	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"headroom":null}}`))); err != nil {
		return err
	}
	return s.wait("the PodTemplate and CapacityBuffer deleted with spec.headroom", func() (bool, error) {
		_, errB := buffer()
		_, errT := template()
		return apierrors.IsNotFound(errB) && apierrors.IsNotFound(errT), errors.Join(client.IgnoreNotFound(errB), client.IgnoreNotFound(errT))
	})
}

// The manager runs with --headroom=pods under the chart's RBAC with headroom.enabled:
// nothing is refused.
func TestChartHeadroomRBACReconcilesTheSamples(t *testing.T) {
	reconcilesUnder(t, chartHeadroomRBAC(t), "chart-hr")
}

// Each grant headroom.enabled adds to the chart's RBAC (the Role on Deployments,
// PodTemplates and CapacityBuffers in the headroom namespace, the watch on pods, the get on
// the PriorityClass poolsmith-headroom) is removed in turn, and the manager reports the
// refusal: none is missing from what it uses, none unused. The rest is the default
// chart's, which TestEveryChartRBACRuleIsNeeded sweeps.
func TestEveryChartHeadroomRBACRuleIsNeeded(t *testing.T) {
	in := chartHeadroomRBAC(t)
	base := map[string]bool{}
	for _, g := range grants(chartRBAC(t).objs) {
		base[g.scope()] = true
	}
	var added []grant
	for _, g := range grants(in.objs) {
		if !base[g.scope()] {
			added = append(added, g)
		}
	}
	if len(added) == 0 {
		t.Fatal("headroom.enabled adds no grant to the chart's RBAC")
	}
	t.Logf("headroom.enabled adds %d grants: %v", len(added), fmt.Sprint(added))
	sweep(t, in, "h", added)
}

// The headroom namespace may not be the release's: only the manager may write there.
func TestChartRefusesHeadroomInTheReleaseNamespace(t *testing.T) {
	_, err := helm(t, "template", "poolsmith", "charts/poolsmith", "--namespace", "poolsmith-system",
		"--set", "headroom.enabled=true", "--set", "headroom.namespace=poolsmith-system")
	if err == nil || !strings.Contains(err.Error(), `headroom.namespace: "poolsmith-system" is the release namespace`) {
		t.Errorf("headroom.namespace equal to the release namespace: got %v, want an error naming headroom.namespace", err)
	}
	if _, err := helm(t, "template", "poolsmith", "charts/poolsmith", "--namespace", "poolsmith-system",
		"--set", "headroom.enabled=true", "--set", "headroom.namespace=poolsmith-headroom"); err != nil {
		t.Errorf("a headroom namespace of its own: %v", err)
	}
}
