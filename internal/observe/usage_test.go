package observe_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/poolsmith/poolsmith/internal/observe"
)

// The trimmed pod the manager caches asks for what the whole pod asks for: a sidecar
// (an init container that keeps running) counts for the pod's life, a plain init
// container only as the largest step, and the overhead on top.
func TestTrimPodKeepsRequests(t *testing.T) {
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"kubernetes.io/config.mirror": "x", "big": "y"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}, {Kind: "Other", Name: "o"}}},
		Spec: corev1.PodSpec{NodeName: "n",
			InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: req("500m", "1Gi")},
				{Name: "init", Resources: req("3", "1Gi"), Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: req("1", "2Gi")}},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	obj, err := observe.TrimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*corev1.Pod)
	want := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	if got := resourcehelper.PodRequests(trimmed, resourcehelper.PodResourcesOptions{}); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("requests of the trimmed pod = %v, want %v", got, want)
	}
	if c := want[corev1.ResourceCPU]; c.String() != "3600m" {
		t.Errorf("the pod's CPU request = %s, want 3600m (the init step of 3 beside the 500m sidecar, with 100m overhead)", c.String())
	}
	if trimmed.Labels != nil || len(trimmed.Annotations) != 1 || len(trimmed.OwnerReferences) != 1 || trimmed.OwnerReferences[0].Kind != "DaemonSet" ||
		trimmed.Spec.InitContainers[1].Env != nil || trimmed.Spec.Containers[0].Image != "" || trimmed.Status.Conditions != nil ||
		trimmed.Spec.NodeName != "n" || trimmed.Status.Phase != corev1.PodRunning {
		t.Errorf("trimmed pod keeps more or less than namespace, node, phase, controller, mirror annotation and requests: %+v", trimmed)
	}
}
