package controllers_test

import (
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/argocd"
)

const healthScript = "../config/argocd/health.lua"

// health runs config/argocd/health.lua over the class as the API server returns it.
func health(name string) func() argocd.Health {
	return func() argocd.Health {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("WorkloadClass"))
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
		h, err := argocd.Evaluate(healthScript, u.Object)
		Expect(err).NotTo(HaveOccurred())
		return h
	}
}

func healthStatus(name string) func() string {
	return func() string { return health(name)().Status }
}

var _ = Describe("The Argo CD health check", func() {
	It("reads Ready and Synced for the current generation", func() {
		create(newClass("argo", "argo-base"))
		Eventually(healthStatus("argo")).Should(Equal("Degraded")) // BaselineNotFound
		Expect(health("argo")().Message).To(ContainSubstring("BaselineNotFound"))

		create(newBaseline("argo-base"))
		waitSynced("argo")
		Expect(health("argo")()).To(Equal(argocd.Health{Status: "Progressing",
			Message: "Ready=Unknown (AwaitingKarpenter): Karpenter has not reported Ready for EC2NodeClass/argo, NodePool/argo-spot-amd64, NodePool/argo-on-demand-amd64"}))

		setKarpenterConditions(get(&awsv1.EC2NodeClass{}, "argo"), ready(metav1.ConditionTrue, ""))
		setKarpenterConditions(get(&karpv1.NodePool{}, "argo-spot-amd64"), ready(metav1.ConditionTrue, ""))
		setKarpenterConditions(get(&karpv1.NodePool{}, "argo-on-demand-amd64"), ready(metav1.ConditionTrue, ""))
		Eventually(healthStatus("argo")).Should(Equal("Healthy"))

		wc := get(&v1alpha1.WorkloadClass{}, "argo")
		wc.Spec.Weighting = &v1alpha1.Weighting{Ceiling: ptr.To[int32](1)} // two rungs need 2: InvalidSpec
		updateClass(wc)
		Eventually(healthStatus("argo")).Should(Equal("Degraded"))
		Expect(health("argo")().Message).To(ContainSubstring("Synced=False (InvalidSpec): spec.weighting.ceiling: ceiling 1 leaves no room for 2 rungs"))
	})

	It("is Progressing while a new generation is not yet reconciled", func() {
		h, err := argocd.Evaluate(healthScript, map[string]any{
			"metadata": map[string]any{"generation": float64(4)},
			"status": map[string]any{"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "reason": "AllReady", "observedGeneration": float64(3)},
				map[string]any{"type": "Synced", "status": "True", "reason": "Applied", "observedGeneration": float64(3)},
			}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(h).To(Equal(argocd.Health{Status: "Progressing", Message: "Waiting for Poolsmith to reconcile generation 4"}))
	})
})
