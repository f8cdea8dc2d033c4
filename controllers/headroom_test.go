package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

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

// headroomChild is class's headroom child of obj's kind, or nil.
func headroomChild[T client.Object](class string, obj T) func() T {
	return func() T {
		var none T
		if err := env.Client.Get(ctx, headroomKey(class), obj); err != nil {
			return none
		}
		return obj
	}
}

func bufferOf(class string) func() *cbv1beta1.CapacityBuffer {
	return func() *cbv1beta1.CapacityBuffer { return headroomChild(class, &cbv1beta1.CapacityBuffer{})() }
}

func templateOf(class string) func() *corev1.PodTemplate {
	return func() *corev1.PodTemplate { return headroomChild(class, &corev1.PodTemplate{})() }
}

func headroomStatus(class string) func() *v1alpha1.HeadroomStatus {
	return func() *v1alpha1.HeadroomStatus { return get(&v1alpha1.WorkloadClass{}, class).Status.Headroom }
}

// karpenterReports writes the buffer's status as Karpenter v1.15.0 would: its buffer
// controller's ReadyForProvisioning and its provisioner's Provisioning, for the buffer's
// current generation (no Karpenter runs in this suite; test/e2e has it write them).
func karpenterReports(class string, fits bool) {
	GinkgoHelper()
	Eventually(func() error {
		cb := bufferOf(class)()
		if cb == nil {
			return fmt.Errorf("no buffer")
		}
		cb.Status.Replicas = cb.Spec.Replicas
		cb.SetCondition(cbv1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, "Resolved", "Pod template resolved successfully")
		if fits {
			cb.SetCondition(cbv1beta1.ProvisioningCondition, metav1.ConditionTrue, "FitsExistingCapacity", "All 2 virtual pods fit on existing capacity")
		} else {
			cb.SetCondition(cbv1beta1.ProvisioningCondition, metav1.ConditionFalse, "RequiresNewCapacity", "2/2 virtual pods required new capacity, 0 failed")
		}
		return env.Client.Status().Update(ctx, cb)
	}).Should(Succeed())
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
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
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
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
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

	It("writes a PodTemplate and Karpenter's CapacityBuffer under --headroom=capacitybuffer, reverts hand edits, recreates deletions, reads ready from Karpenter's conditions, switches to placeholder pods and back, and deletes them with the class", func() {
		create(newClass("hrcb", "hr-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))},
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}
		}))
		wc := waitSynced("hrcb")
		Eventually(bufferOf("hrcb")).ShouldNot(BeNil())
		cb, pt := bufferOf("hrcb")(), templateOf("hrcb")()
		Expect(pt).NotTo(BeNil())
		Expect(metav1.IsControlledBy(cb, wc) && metav1.IsControlledBy(pt, wc)).To(BeTrue())
		Expect(cb.Spec.Replicas).To(HaveValue(Equal(int32(2))))
		Expect(cb.Spec.PodTemplateRef).To(HaveField("Name", pt.Name))
		Expect(cb.Spec.ProvisioningStrategy).To(HaveValue(Equal(cbv1beta1.ActiveProvisioningStrategy)))
		Expect(pt.Template.Spec.NodeSelector).To(HaveKeyWithValue("karpenter.sh/nodepool", "hrcb-spot-amd64"))
		Expect(headroomDeployment("hrcb")()).To(BeNil())
		Eventually(headroomStatus("hrcb")).Should(And(HaveField("Mechanism", v1alpha1.HeadroomCapacityBuffer), HaveField("Display", "0/2"),
			HaveField("Reason", v1alpha1.HeadroomReasonProvisioning), HaveField("Message", ContainSubstring("waiting for Karpenter to resolve CapacityBuffer poolsmith-headroom/hrcb-headroom"))))

		By("Karpenter's conditions are what ready reads")
		karpenterReports("hrcb", true)
		Eventually(headroomStatus("hrcb")).Should(And(HaveField("Display", "2/2"), HaveField("Reason", v1alpha1.HeadroomReasonReady)))
		karpenterReports("hrcb", false)
		Eventually(headroomStatus("hrcb")).Should(And(HaveField("Display", "0/2"), HaveField("Reason", v1alpha1.HeadroomReasonProvisioning),
			HaveField("Message", ContainSubstring("Provisioning=False RequiresNewCapacity: 2/2 virtual pods required new capacity"))))

		By("the API server's defaults are all rendered: a pass after the create writes nothing")
		generation, templateVersion := bufferOf("hrcb")().Generation, templateOf("hrcb")().ResourceVersion
		wc = get(&v1alpha1.WorkloadClass{}, "hrcb")
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/touch": "1"}
		updateClass(wc)
		waitSynced("hrcb")
		Consistently(func() []any { return []any{bufferOf("hrcb")().Generation, templateOf("hrcb")().ResourceVersion} }, 2*time.Second).
			Should(Equal([]any{generation, templateVersion}))

		By("hand edits are reverted")
		cb = bufferOf("hrcb")()
		cb.Spec.Replicas, cb.Spec.Percentage = ptr.To[int32](7), ptr.To[int32](50)
		Expect(env.Client.Update(ctx, cb)).To(Succeed())
		pt = templateOf("hrcb")()
		pt.Template.Spec.NodeSelector["karpenter.sh/nodepool"] = "hrcb-on-demand-amd64"
		Expect(env.Client.Update(ctx, pt)).To(Succeed())
		Eventually(func() []any {
			cb := bufferOf("hrcb")()
			return []any{ptr.Deref(cb.Spec.Replicas, -1), cb.Spec.Percentage, templateOf("hrcb")().Template.Spec.NodeSelector["karpenter.sh/nodepool"]}
		}).Should(Equal([]any{int32(2), (*int32)(nil), "hrcb-spot-amd64"}))

		By("deletions are recreated")
		Expect(env.Client.Delete(ctx, bufferOf("hrcb")())).To(Succeed())
		Expect(env.Client.Delete(ctx, templateOf("hrcb")())).To(Succeed())
		Eventually(func() bool { return bufferOf("hrcb")() != nil && templateOf("hrcb")() != nil }).Should(BeTrue())

		By("a class that asks for placeholder pods gets them, and the buffer goes")
		wc = get(&v1alpha1.WorkloadClass{}, "hrcb")
		wc.Spec.Headroom.Mechanism = v1alpha1.HeadroomPods
		updateClass(wc)
		Eventually(headroomDeployment("hrcb")).ShouldNot(BeNil())
		Eventually(func() bool { return bufferOf("hrcb")() == nil && templateOf("hrcb")() == nil }).Should(BeTrue())
		Eventually(headroomStatus("hrcb")).Should(HaveField("Mechanism", v1alpha1.HeadroomPods))

		By("and back")
		wc = get(&v1alpha1.WorkloadClass{}, "hrcb")
		wc.Spec.Headroom.Mechanism = v1alpha1.HeadroomAuto
		updateClass(wc)
		Eventually(bufferOf("hrcb")).ShouldNot(BeNil())
		Eventually(headroomDeployment("hrcb")).Should(BeNil())

		By("the class deleted leaves none")
		Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hrcb"))).To(Succeed())
		Eventually(func() bool { return bufferOf("hrcb")() == nil && templateOf("hrcb")() == nil }).Should(BeTrue())
	})
})

// The chart installs the PriorityClass with headroom.enabled; here it is removed and
// created by hand. The deployment controller's part (the Deployment's status once its
// pods are admitted) is played.
var _ = Describe("Headroom without its PriorityClass", Ordered, func() {
	pc := func() *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.HeadroomPriorityClass}, Value: -10, PreemptionPolicy: ptr.To(corev1.PreemptNever)}
	}
	BeforeAll(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pc()))).To(Succeed())
		create(newBaseline("hrpc-base"))
		// Other specs' placeholders name it too.
		DeferCleanup(func() {
			if err := env.Client.Create(ctx, pc()); err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		})
	})

	It("reports PriorityClassMissing, naming the PriorityClass and the chart value that installs it, and recovers once it exists", func() {
		create(newClass("hrpc", "hrpc-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
		}))
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hrpc"))).To(Succeed()) })
		waitSynced("hrpc")
		Eventually(headroomDeployment("hrpc")).ShouldNot(BeNil())
		Eventually(headroomStatus("hrpc")).Should(And(HaveField("Display", "0/2"), HaveField("Reason", v1alpha1.HeadroomReasonPriorityClassMissing),
			HaveField("Message", And(ContainSubstring("PriorityClass poolsmith-headroom does not exist"), ContainSubstring("headroom.enabled=true")))))

		By("created, the placeholders are admitted: the Deployment's status brings the class back")
		create(pc())
		d := headroomDeployment("hrpc")()
		d.Status.ObservedGeneration, d.Status.Replicas, d.Status.AvailableReplicas, d.Status.ReadyReplicas = d.Generation, 2, 2, 2
		Expect(env.Client.Status().Update(ctx, d)).To(Succeed())
		Eventually(headroomStatus("hrpc")).Should(And(HaveField("Display", "2/2"), HaveField("Reason", v1alpha1.HeadroomReasonReady)))

		By("deleted again while the placeholders run: they keep their priority, and the reason says none can be replaced")
		Expect(env.Client.Delete(ctx, pc())).To(Succeed())
		wc := get(&v1alpha1.WorkloadClass{}, "hrpc")
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/touch": "1"}
		updateClass(wc)
		Eventually(headroomStatus("hrpc")).Should(And(HaveField("Display", "2/2"), HaveField("Reason", v1alpha1.HeadroomReasonPriorityClassMissing)))
	})
})
