package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Karpenter's part (a NodeClaim with its node) and the scheduler's (pods bound to that
// node) are played here; nothing runs the pods.
var _ = Describe("Headroom sized by percentage", Ordered, func() {
	BeforeAll(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(newBaseline("hru-base"))
	})

	It("holds a percentage of the requests of the class's own pods, not of placeholders, DaemonSet, mirror, terminal or other nodes' pods", func() {
		create(newClass("hru", "hru-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Percentage: ptr.To[int32](50), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}}
		}))
		waitSynced("hru")
		desired := func() int32 {
			h := get(&v1alpha1.WorkloadClass{}, "hru").Status.Headroom
			if h == nil {
				return -1
			}
			return h.Desired
		}
		Eventually(desired).Should(Equal(int32(0)), "no pod yet: nothing to hold")

		node := newNodeClaim("hru", "hru-spot-amd64")
		create(node)
		node.Status.NodeName = "hru-node"
		Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
		pod := func(ns, name, nodeName string, cpus int, mutate ...func(*corev1.Pod)) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: cpu(cpus)}}}}}
			for _, m := range mutate {
				m(p)
			}
			create(p)
			return p
		}
		app := pod("default", "hru-app", "hru-node", 4)
		daemon := pod("default", "hru-daemon", "hru-node", 8, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: types.UID("0b1d5c2e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}}
		})
		mirror := pod("default", "hru-mirror", "hru-node", 8, func(p *corev1.Pod) {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
		})
		placeholder := pod(v1alpha1.DefaultHeadroomNamespace, "hru-placeholder", "hru-node", 8)
		elsewhere := pod("default", "hru-elsewhere", "another-node", 8)
		done := pod("default", "hru-done", "hru-node", 8)
		done.Status.Phase = corev1.PodSucceeded
		Expect(env.Client.Status().Update(ctx, done)).To(Succeed())
		DeferCleanup(func() {
			for _, o := range []client.Object{app, daemon, mirror, placeholder, elsewhere, done} {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o, client.GracePeriodSeconds(0)))).To(Succeed())
			}
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, node))).To(Succeed())
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hru")))).To(Succeed())
		})

		By("a NodeClaim event brings the class back (pods do not): 50 % of 4 CPU is 2 units")
		poke := newNodeClaim("hru", "hru-spot-amd64")
		create(poke)
		Eventually(desired).Should(Equal(int32(2)))
		Eventually(func() int32 { return replicasOf(headroomDeployment("hru")()) }).Should(Equal(int32(2)))
		Expect(get(&v1alpha1.WorkloadClass{}, "hru").Status.Headroom.Display).To(Equal("0/2"))

		By("more of the class's own requests grow it at once: 50 % of 6 CPU is 3 units")
		more := pod("default", "hru-more", "hru-node", 2)
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, more, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		Expect(env.Client.Delete(ctx, poke)).To(Succeed())
		Eventually(desired).Should(Equal(int32(3)))
		Eventually(func() int32 { return replicasOf(headroomDeployment("hru")()) }).Should(Equal(int32(3)))
	})
})
