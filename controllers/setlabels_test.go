package controllers

import (
	"maps"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// setLabels does what client.Object's SetLabels does, for every kind a class writes and
// for an unstructured object.
func TestSetLabelsAsTheInterfaceDoes(t *testing.T) {
	for _, newObj := range []func() client.Object{
		func() client.Object { return &karpv1.NodePool{} },
		func() client.Object { return &awsv1.EC2NodeClass{} },
		func() client.Object { return &karpv1alpha1.NodeOverlay{} },
		func() client.Object { return &v1alpha1.AccessRule{} },
		func() client.Object { return &appsv1.Deployment{} },
		func() client.Object { return &corev1.PodTemplate{} },
		func() client.Object { return &cbv1beta1.CapacityBuffer{} },
		func() client.Object { return &unstructured.Unstructured{Object: map[string]any{}} },
	} {
		for _, labels := range []map[string]string{{"a": "b", "poolsmith.dev/x": "y"}, {}, nil} {
			want, got := newObj(), newObj()
			want.SetLabels(map[string]string{"old": "1"})
			got.SetLabels(map[string]string{"old": "1"})
			want.SetLabels(labels)
			setLabels(got, labels)
			if !maps.Equal(got.GetLabels(), want.GetLabels()) || (got.GetLabels() == nil) != (want.GetLabels() == nil) {
				t.Errorf("%T: setLabels(%v) left %v; SetLabels leaves %v", got, labels, got.GetLabels(), want.GetLabels())
			}
		}
	}
}
