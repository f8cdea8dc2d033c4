package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// headroomKey is the placeholder Deployment of class.
func headroomKey(class string) client.ObjectKey {
	return client.ObjectKey{Namespace: v1alpha1.DefaultHeadroomNamespace, Name: class + "-headroom"}
}

func headroomDeployment(class string) func() *appsv1.Deployment {
	return func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, headroomKey(class), d); err != nil {
			return nil
		}
		return d
	}
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d == nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

var _ = Describe("Headroom", Ordered, func() {
	BeforeAll(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(newBaseline("hr-base"))
	})

	It("writes the placeholder Deployment the API server accepts, reverts a hand edit, recreates it when deleted, and deletes it with the class", func() {
		create(newClass("hr", "hr-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}}
		}))
		wc := waitSynced("hr")
		Eventually(headroomDeployment("hr")).ShouldNot(BeNil())
		d := headroomDeployment("hr")()
		Expect(*d.Spec.Replicas).To(Equal(int32(2)))
		Expect(metav1.IsControlledBy(d, wc)).To(BeTrue())
		Expect(d.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("karpenter.sh/nodepool", "hr-spot-amd64"))
		Eventually(func() string {
			return get(&v1alpha1.WorkloadClass{}, "hr").Status.Headroom.GetDisplay()
		}).Should(Equal("0/2"))

		// The API server's defaults are all rendered: a pass after the create writes nothing.
		generation := d.Generation
		wc = get(&v1alpha1.WorkloadClass{}, "hr")
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/touch": "1"}
		updateClass(wc)
		waitSynced("hr")
		Consistently(func() int64 { return headroomDeployment("hr")().Generation }, 2*time.Second).Should(Equal(generation))

		By("a hand edit is reverted")
		d = headroomDeployment("hr")()
		d.Spec.Replicas = ptr.To[int32](7)
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		Expect(env.Client.Update(ctx, d)).To(Succeed())
		Eventually(func() int32 { return replicasOf(headroomDeployment("hr")()) }).Should(Equal(int32(2)))
		Eventually(func() []corev1.Toleration { return headroomDeployment("hr")().Spec.Template.Spec.Tolerations }).
			ShouldNot(ContainElement(HaveField("Operator", corev1.TolerationOpExists)))

		By("a deletion is recreated")
		Expect(env.Client.Delete(ctx, headroomDeployment("hr")())).To(Succeed())
		Eventually(func() int32 { return replicasOf(headroomDeployment("hr")()) }).Should(Equal(int32(2)))

		By("the class deleted leaves none")
		Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hr"))).To(Succeed())
		Eventually(headroomDeployment("hr")).Should(BeNil())
	})

	It("deletes the Deployment when spec.headroom goes, and reports an invalid one with the field named", func() {
		create(newClass("hr2", "hr-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}}
		}))
		Eventually(headroomDeployment("hr2")).ShouldNot(BeNil())
		wc := get(&v1alpha1.WorkloadClass{}, "hr2")
		wc.Spec.Headroom.Rung = &v1alpha1.RungSelector{CapacityType: v1alpha1.CapacityTypeReserved}
		updateClass(wc)
		Eventually(condition("hr2", v1alpha1.ConditionSynced)).Should(And(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("spec.headroom.rung: no rung of the class matches capacityType reserved"))))
		Expect(headroomDeployment("hr2")()).NotTo(BeNil(), "an invalid spec leaves the children as they are")
		wc = get(&v1alpha1.WorkloadClass{}, "hr2")
		wc.Spec.Headroom = nil
		updateClass(wc)
		Eventually(headroomDeployment("hr2")).Should(BeNil())
		Eventually(func() *v1alpha1.HeadroomStatus { return get(&v1alpha1.WorkloadClass{}, "hr2").Status.Headroom }).Should(BeNil())
	})
})
