package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// restrictedClass is a GPU class only namespace ml may use (the Access example in docs/access.md).
const restrictedClass = "gpu-ml"

// showAccess applies a restricted class, then asks the API server to admit a pod that
// selects it from namespace ml (admitted) and from namespace web (refused by the class's
// ValidatingAdmissionPolicy), and prints the refusal.
func showAccess(ctx context.Context, out io.Writer, c client.Client, mgrErr <-chan error, timeout time.Duration) error {
	for _, ns := range []string{"ml", "web"} {
		// The sample workloads may already have created namespace ml.
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		// No serviceaccount controller runs here to create the ServiceAccount pods need.
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	taint := v1alpha1.Taint{Key: "example.com/dedicated", Value: restrictedClass, Effect: corev1.TaintEffectNoSchedule}
	wc := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: restrictedClass},
		Spec: v1alpha1.WorkloadClassSpec{
			Profile:       v1alpha1.ProfileGPU,
			Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand},
			Taints:        v1alpha1.Taints{taint},
			Access:        &v1alpha1.Access{Namespaces: []string{"ml"}},
		},
	}
	if err := c.Create(ctx, wc); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nAccess: WorkloadClass %s may only be used from namespace ml (spec.access); Poolsmith writes AccessRule %s, which the ValidatingAdmissionPolicy %s the chart installs reads.\n", restrictedClass, restrictedClass, render.AccessPolicyName)
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"},
			Spec: corev1.PodSpec{
				Containers:                   []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10"}},
				NodeSelector:                 map[string]string{v1alpha1.LabelClass: restrictedClass},
				Tolerations:                  []corev1.Toleration{{Key: taint.Key, Value: taint.Value, Effect: taint.Effect}, {Key: render.GPUTaintKey, Operator: corev1.TolerationOpExists}},
				AutomountServiceAccountToken: ptr.To(false),
			},
		}
	}
	// The API server loads policies through an informer: wait until it enforces this one.
	deadline := time.Now().Add(timeout)
	var refusal error
	for refusal == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server did not enforce AccessRule %s within %s", restrictedClass, timeout)
		}
		select {
		case err := <-mgrErr:
			return fmt.Errorf("manager stopped: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
		refusal = c.Create(ctx, pod("web"), client.DryRunAll)
	}
	if err := c.Create(ctx, pod("ml"), client.DryRunAll); err != nil {
		return fmt.Errorf("a pod of namespace ml was refused: %w", err)
	}
	fmt.Fprintf(out, "  pod ml/trainer selecting the class: admitted\n  pod web/trainer selecting the class: refused:\n    %v\n", refusal)
	return nil
}
