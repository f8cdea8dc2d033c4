package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// tighten sets the Baseline's guardrails, retrying on conflicts with its status writes.
func tighten(name string, g *v1alpha1.Guardrails) {
	EventuallyWithOffset(1, func() error {
		b := get(&v1alpha1.Baseline{}, name)
		b.Spec.Guardrails = g
		return env.Client.Update(ctx, b)
	}).Should(Succeed())
}

var _ = Describe("Guardrails", func() {
	It("reports a class a tightened Baseline puts out of bounds, changes none of its NodePools, and lets it be deleted", func() {
		create(newBaseline("tightened"), newClass("bounded", "tightened", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits = cpu(100) }))
		waitSynced("bounded")
		versions := func() map[string]string {
			out := map[string]string{}
			for _, name := range nodePoolNames("bounded")() {
				out[name] = get(&karpv1.NodePool{}, name).ResourceVersion
			}
			return out
		}
		before := versions()
		Expect(before).To(HaveLen(2))

		tighten("tightened", &v1alpha1.Guardrails{
			Ceilings:      &v1alpha1.Ceilings{CPU: ptr.To(resource.MustParse("64"))},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot},
		})
		Eventually(condition("bounded", v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonGuardrailViolation))
		msg := condition("bounded", v1alpha1.ConditionSynced)().Message
		Expect(msg).To(ContainSubstring("spec.capacityTypes: on-demand is not allowed"))
		Expect(msg).To(ContainSubstring("spec.limits: cpu 100 is above the ceiling 64"))
		Consistently(versions, "3s").Should(Equal(before))

		// A deletion under way when the Baseline tightens further completes: the manager's
		// removal of its finalizer changes neither spec nor labels, so the guardrail policy
		// does not judge it. A finalizer on one NodePool holds the deletion open meanwhile.
		held := get(&karpv1.NodePool{}, "bounded-spot-amd64")
		held.Finalizers = append(held.Finalizers, "example.com/hold")
		Expect(env.Client.Update(ctx, held)).To(Succeed())
		Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "bounded"))).To(Succeed())
		Eventually(condition("bounded", v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonDeleting))
		tighten("tightened", &v1alpha1.Guardrails{
			Ceilings:      &v1alpha1.Ceilings{CPU: ptr.To(resource.MustParse("8"))},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot},
			RequireTeam:   true,
		})
		held = get(&karpv1.NodePool{}, "bounded-spot-amd64")
		held.Finalizers = nil
		Expect(env.Client.Update(ctx, held)).To(Succeed())
		Eventually(exists(&v1alpha1.WorkloadClass{}, "bounded"), "60s").Should(BeFalse())
		Expect(nodePoolNames("bounded")()).To(BeEmpty())
	})

	It("gives a class that sets no limit the Baseline's ceiling", func() {
		b := newBaseline("ceiling")
		b.Spec.Guardrails = &v1alpha1.Guardrails{Ceilings: &v1alpha1.Ceilings{CPU: ptr.To(resource.MustParse("32"))}}
		create(b, newClass("unlimited", "ceiling"))
		waitSynced("unlimited")
		for _, name := range nodePoolNames("unlimited")() {
			np := get(&karpv1.NodePool{}, name)
			q := np.Spec.Limits[corev1.ResourceCPU]
			Expect(q.String()).To(Equal("32"), name)
		}
	})
})
