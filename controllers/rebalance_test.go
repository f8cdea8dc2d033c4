package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Karpenter's part (a Ready top rung, a NodeClaim on the fallback rung, its node and a
// pod) and kube-controller-manager's (PodDisruptionBudget status) are played here.
var _ = Describe("Rebalance controller", func() {
	It("marks a fallback NodeClaim only while nothing pins it, and cancels the move when something does", func() {
		b := newBaseline("rebal")
		// The Baseline's default turns it on for the class.
		b.Spec.Rebalance = &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred}
		create(b, newClass("rebal", "rebal", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64}
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Rebalance = &v1alpha1.Rebalance{After: &metav1.Duration{}}
		}))
		waitSynced("rebal")
		setKarpenterConditions(get(&karpv1.NodePool{}, "rebal-on-demand-arm64"), ready(metav1.ConditionTrue, ""))

		nc := newNodeClaim("rebal", "rebal-on-demand-amd64")
		nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "12345", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rebal-node"}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rebal", Namespace: "default", Labels: map[string]string{"app": "rebal"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "rebal", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rebal"}}}}
		create(node, pod, pdb, nc)
		DeferCleanup(func() {
			for _, o := range []client.Object{nc, pdb, node, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "rebal"}}} {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o))).To(Succeed())
			}
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		nc.Status.NodeName = node.Name
		Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())
		claim := func() *karpv1.NodeClaim { return get(&karpv1.NodeClaim{}, nc.Name) }
		message := func() string {
			if st := get(&v1alpha1.WorkloadClass{}, "rebal").Status.Rebalance; st != nil {
				return st.Message
			}
			return ""
		}

		By("a PodDisruptionBudget that allows no disruption blocks the move, and status says so")
		Eventually(message).Should(ContainSubstring("PodDisruptionBudget default/rebal allows no disruption of pod rebal"))
		// Each result's series exists before any move, so the dashboard's moves per hour
		// (an increase over the counter) reads 0 rather than no data.
		for _, result := range []string{"started", "succeeded", "failed", "cancelled"} {
			_, ok := series("poolsmith_rebalance_moves_total", map[string]string{"class": "rebal", "result": result})
			Expect(ok).To(BeTrue(), "poolsmith_rebalance_moves_total{class=rebal,result=%s} exists before a move", result)
		}
		Consistently(func() string { return claim().Annotations[karpv1.NodePoolHashAnnotationKey] }).Should(Equal("12345"))

		By("once it allows one, the NodeClaim is marked drifted, its hash kept")
		pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 1, DesiredHealthy: 0, ExpectedPods: 1}
		Expect(env.Client.Status().Update(ctx, pdb)).To(Succeed())
		// PodDisruptionBudgets are not watched (nor cached): the controller looks again
		// within suiteRebalanceRecheck.
		Eventually(func() string { return claim().Annotations[karpv1.NodePoolHashAnnotationKey] }).Should(Equal(v1alpha1.RebalanceDriftHash))
		Eventually(func() []v1alpha1.RebalanceMove {
			return get(&v1alpha1.WorkloadClass{}, "rebal").Status.Rebalance.Moving
		}).Should(ConsistOf(
			And(HaveField("NodeClaim", nc.Name), HaveField("From", "rebal-on-demand-amd64"), HaveField("To", "rebal-on-demand-arm64"), HaveField("OriginalHash", "12345"))))
		// Whatever is written on the NodeClaim is not evidence of its original hash.
		annotate(nc.Name, v1alpha1.AnnotationRebalanceHash, "99999")

		By("a do-not-disrupt pod arriving before Karpenter drains the node cancels the move")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		Expect(env.Client.Update(ctx, pod)).To(Succeed())
		// Nor are pods: it looks again within suiteRebalanceRecheck.
		Eventually(func() string { return claim().Annotations[karpv1.NodePoolHashAnnotationKey] }).Should(Equal("12345"))
		Expect(claim().Annotations).NotTo(HaveKey(v1alpha1.AnnotationRebalanceHash), "the hand-set annotation is removed with the mark")
		Eventually(message).Should(ContainSubstring("pod default/rebal has karpenter.sh/do-not-disrupt"))
		st := get(&v1alpha1.WorkloadClass{}, "rebal").Status.Rebalance
		Expect(st.Moving).To(BeEmpty())
		Expect(st.Started).To(BeNumerically("==", 1))
		Expect(st.FallbackNodes).To(BeNumerically("==", 1))

		By("a mark Poolsmith did not make, with a hand-set original, is cleared to the NodePool's hash")
		np := get(&karpv1.NodePool{}, "rebal-on-demand-amd64")
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[karpv1.NodePoolHashAnnotationKey] = "777"
		Expect(env.Client.Update(ctx, np)).To(Succeed())
		Eventually(func() string {
			return get(&karpv1.NodePool{}, "rebal-on-demand-amd64").Annotations[karpv1.NodePoolHashAnnotationKey]
		}).Should(Equal("777"))
		annotate(nc.Name, karpv1.NodePoolHashAnnotationKey, v1alpha1.RebalanceDriftHash)
		annotate(nc.Name, v1alpha1.AnnotationRebalanceHash, "66666")
		// The do-not-disrupt pod still pins the node: the adopted move is cancelled.
		Eventually(func() string { return claim().Annotations[karpv1.NodePoolHashAnnotationKey] }).Should(Equal("777"))
		Expect(claim().Annotations).NotTo(HaveKey(v1alpha1.AnnotationRebalanceHash))
	})
})

// annotate sets one annotation on a NodeClaim, as a hand edit would.
func annotate(nodeClaim, key, value string) {
	GinkgoHelper()
	Eventually(func() error {
		nc := get(&karpv1.NodeClaim{}, nodeClaim)
		nc.Annotations[key] = value
		return env.Client.Update(ctx, nc)
	}).Should(Succeed())
}
