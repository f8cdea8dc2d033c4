package controllers_test

import (
	"time"

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
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/render"
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
			wc.Spec.Headroom = &v1alpha1.Headroom{Percentage: ptr.To[int32](50), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
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
		// The pass the deletion starts may read the pod cache before it holds hru-more, and
		// pods start no pass: each look that still reads 2 units brings the class back with
		// another NodeClaim event, as the next launch would.
		Eventually(func() int32 {
			if n := desired(); n != 2 {
				return n
			}
			again := newNodeClaim("hru", "hru-spot-amd64")
			create(again)
			Expect(env.Client.Delete(ctx, again)).To(Succeed())
			return 2
		}).WithPolling(time.Second).Should(Equal(int32(3)))
		Eventually(func() int32 { return replicasOf(headroomDeployment("hru")()) }).Should(Equal(int32(3)))
	})
})

// Karpenter's part (a NodeClaim and its node), the scheduler's (pods bound) and the
// deployment controller's (the Deployment's status) are played here.
var _ = Describe("Headroom figures", Ordered, func() {
	BeforeAll(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(newBaseline("hrf-base"))
	})

	It("reports the warm nodes and what the ready units cost, in status and as gauges, and drops the gauges with the class", func() {
		create(newClass("hrf", "hrf-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
		}))
		waitSynced("hrf")
		Eventually(headroomDeployment("hrf")).ShouldNot(BeNil())
		labels := map[string]string{"class": "hrf", "mechanism": "Pods"}
		Eventually(func() float64 { v, _ := series("poolsmith_headroom_desired_units", labels); return v }).Should(Equal(2.0))
		Expect(gauge("poolsmith_headroom_ready_units", labels)).To(Equal(0.0))
		Expect(gauge("poolsmith_headroom_idle_cost_per_hour", labels)).To(Equal(0.0))

		// Two nodes of the rung: one runs a placeholder and a DaemonSet pod (warm), the
		// other a placeholder and one of the class's pods (not warm).
		var objs []client.Object
		for _, node := range []string{"hrf-warm", "hrf-busy"} {
			nc := newNodeClaim("hrf", "hrf-spot-amd64")
			create(nc)
			nc.Status.NodeName = node
			Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())
			objs = append(objs, nc)
		}
		pod := func(ns, name, node string, mutate ...func(*corev1.Pod)) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: cpu(1)}}}}}
			for _, m := range mutate {
				m(p)
			}
			create(p)
			objs = append(objs, p)
		}
		pod(v1alpha1.DefaultHeadroomNamespace, "hrf-unit-1", "hrf-warm")
		pod("default", "hrf-agent", "hrf-warm", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: types.UID("0b1d5c2e-0000-4000-8000-000000000002"), Controller: ptr.To(true)}}
		})
		pod(v1alpha1.DefaultHeadroomNamespace, "hrf-unit-2", "hrf-busy")
		pod("default", "hrf-app", "hrf-busy")
		DeferCleanup(func() {
			for _, o := range objs {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o, client.GracePeriodSeconds(0)))).To(Succeed())
			}
		})

		By("both units available: the Deployment's status brings the class back")
		d := headroomDeployment("hrf")()
		d.Status.ObservedGeneration, d.Status.Replicas, d.Status.AvailableReplicas, d.Status.ReadyReplicas = d.Generation, 2, 2, 2
		Expect(env.Client.Status().Update(ctx, d)).To(Succeed())
		status := func() *v1alpha1.HeadroomStatus { return get(&v1alpha1.WorkloadClass{}, "hrf").Status.Headroom }
		Eventually(status).Should(And(HaveField("Display", "2/2"), HaveField("WarmNodes", int32(1))))

		cat, err := catalog.Load()
		Expect(err).NotTo(HaveOccurred())
		res, err := render.Render(get(&v1alpha1.Baseline{}, "hrf-base"), get(&v1alpha1.WorkloadClass{}, "hrf"),
			render.Options{Catalog: cat, Region: catalog.DefaultRegion, Capabilities: capabilities.Capabilities{Headroom: v1alpha1.HeadroomPods}})
		Expect(err).NotTo(HaveOccurred())
		unit := res.Headroom.UnitPrice
		Expect(unit).To(BeNumerically(">", 0))
		Expect(status()).To(And(HaveField("IdleCostPerHour", cost.Money(2*unit)), HaveField("PriceSources", res.Headroom.PriceSource),
			HaveField("PriceSources", HavePrefix("spot "))))
		Expect(gauge("poolsmith_headroom_ready_units", labels)).To(Equal(2.0))
		Expect(gauge("poolsmith_headroom_warm_nodes", labels)).To(Equal(1.0))
		Expect(gauge("poolsmith_headroom_idle_cost_per_hour", labels)).To(BeNumerically("~", 2*unit, 1e-9))

		By("the class deleted, its series go")
		Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hrf"))).To(Succeed())
		Eventually(func() bool { _, ok := series("poolsmith_headroom_desired_units", labels); return ok }).Should(BeFalse())
		for _, name := range []string{"poolsmith_headroom_ready_units", "poolsmith_headroom_idle_cost_per_hour", "poolsmith_headroom_warm_nodes"} {
			_, ok := series(name, labels)
			Expect(ok).To(BeFalse(), name)
		}
	})
})

// Karpenter's part (NodeClaims with their nodes and allocatable, the buffer's conditions)
// and the scheduler's (pods bound) are played here; Karpenter's virtual pods exist only in
// its memory, so the room on the rung's nodes is what is read.
var _ = Describe("Headroom figures of a CapacityBuffer", Ordered, func() {
	BeforeAll(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(newBaseline("hrw-base"))
	})

	It("counts the rung's empty nodes the buffer's units need as warm, and prices the units that still have room", func() {
		create(newClass("hrw", "hrw-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}}
		}))
		waitSynced("hrw")
		Eventually(bufferOf("hrw")).ShouldNot(BeNil())

		// Four nodes of the rung and one still booting: roomy holds both units (2 CPU, no
		// pod), agent one (a DaemonSet pod of 500m), spare two more beyond the need, busy
		// none (a pod of the class takes 1500m), and the booting one has no node yet.
		var objs []client.Object
		claim := func(node, allocatable string) {
			nc := newNodeClaim("hrw", "hrw-spot-amd64")
			create(nc)
			nc.Status.NodeName = node
			nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatable), corev1.ResourceMemory: resource.MustParse("8Gi")}
			Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())
			objs = append(objs, nc)
		}
		claim("hrw-roomy", "2")
		claim("hrw-agent", "2")
		claim("hrw-spare", "2")
		claim("hrw-busy", "2")
		claim("", "2")
		pod := func(name, node, millis string, mutate ...func(*corev1.Pod)) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(millis)}}}}}}
			for _, m := range mutate {
				m(p)
			}
			create(p)
			objs = append(objs, p)
		}
		pod("hrw-agent-ds", "hrw-agent", "500m", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: types.UID("0b1d5c2e-0000-4000-8000-000000000003"), Controller: ptr.To(true)}}
		})
		pod("hrw-busy-app", "hrw-busy", "1500m")
		DeferCleanup(func() {
			for _, o := range objs {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o, client.GracePeriodSeconds(0)))).To(Succeed())
			}
		})

		By("Karpenter reports every virtual pod fits existing capacity: one empty node holds both units")
		karpenterReports("hrw", true)
		status := func() *v1alpha1.HeadroomStatus { return get(&v1alpha1.WorkloadClass{}, "hrw").Status.Headroom }
		Eventually(status).Should(And(HaveField("Mechanism", v1alpha1.HeadroomCapacityBuffer), HaveField("Display", "2/2"), HaveField("WarmNodes", int32(1))))
		cat, err := catalog.Load()
		Expect(err).NotTo(HaveOccurred())
		res, err := render.Render(get(&v1alpha1.Baseline{}, "hrw-base"), get(&v1alpha1.WorkloadClass{}, "hrw"),
			render.Options{Catalog: cat, Region: catalog.DefaultRegion, Capabilities: capabilities.Capabilities{Headroom: v1alpha1.HeadroomCapacityBuffer}})
		Expect(err).NotTo(HaveOccurred())
		unit := res.Headroom.UnitPrice
		Expect(unit).To(BeNumerically(">", 0))
		Expect(status()).To(HaveField("IdleCostPerHour", cost.Money(2*unit)))
		labels := map[string]string{"class": "hrw", "mechanism": "CapacityBuffer"}
		Expect(gauge("poolsmith_headroom_warm_nodes", labels)).To(Equal(1.0))

		By("a burst takes the roomy and spare nodes before Karpenter's next pass: ready still reads 2, one unit's room is left")
		pod("hrw-burst-1", "hrw-roomy", "2")
		pod("hrw-burst-2", "hrw-spare", "2")
		// Pods start no pass; a NodeClaim created does, as a launch would.
		claim("", "2")
		Eventually(status).Should(And(HaveField("Display", "2/2"), HaveField("WarmNodes", int32(1)), HaveField("IdleCostPerHour", cost.Money(unit))))
		Expect(gauge("poolsmith_headroom_idle_cost_per_hour", labels)).To(BeNumerically("~", unit, 1e-9))

		By("Karpenter's pass finds the units need a new node: nothing is ready, warm or idle")
		karpenterReports("hrw", false)
		Eventually(status).Should(And(HaveField("Display", "0/2"), HaveField("WarmNodes", int32(0)), HaveField("IdleCostPerHour", cost.Money(0))))
		Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, "hrw"))).To(Succeed())
	})
})
