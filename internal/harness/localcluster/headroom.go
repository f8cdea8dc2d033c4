package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// HeadroomPriority is the placeholders' PriorityClass value: the chart's default
// headroom.priority.
const HeadroomPriority = -10

// HeadroomObjects are what the chart installs for headroom.enabled: true besides the
// manager's Role (templates/headroom.yaml): the headroom namespace under the restricted
// Pod Security profile and the PriorityClass poolsmith-headroom (negative, never
// preempting). TestHeadroomObjectsAreTheChart holds them to the chart.
func HeadroomObjects() []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}},
		&schedulingv1.PriorityClass{
			ObjectMeta:       metav1.ObjectMeta{Name: v1alpha1.HeadroomPriorityClass},
			Value:            HeadroomPriority,
			GlobalDefault:    false,
			PreemptionPolicy: ptr.To(corev1.PreemptNever),
			Description:      "Poolsmith's headroom placeholders: warm capacity that real pods preempt.",
		},
	}
}

// installHeadroom creates HeadroomObjects before the manager starts, as helm does.
func installHeadroom(ctx context.Context, c client.Client) error {
	for _, obj := range HeadroomObjects() {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the headroom %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}
