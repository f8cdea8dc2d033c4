//go:build e2e

package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

var _ = Describe("Every sample class", func() {
	It("is Ready: Karpenter reports its EC2NodeClass and every rung Ready", func() {
		classes := applySamples()
		Expect(classes).To(HaveLen(4))
		for _, name := range classes {
			expectClassReady(name)

			nc := &awsv1.EC2NodeClass{}
			Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, nc)).To(Succeed())
			Expect(nc.StatusConditions().Root().IsTrue()).To(BeTrue(), "EC2NodeClass %s", name)
			Expect(nc.Status.Subnets).To(HaveLen(3), "EC2NodeClass %s resolved the seeded subnets", name)
			Expect(nc.Status.AMIs).NotTo(BeEmpty(), "EC2NodeClass %s resolved AMIs", name)

			pools := &karpv1.NodePoolList{}
			Expect(cluster.Client.List(ctx, pools, client.MatchingLabels{labelClass: name})).To(Succeed())
			Expect(pools.Items).To(HaveLen(4), "class %s has 4 rungs", name)
			for _, np := range pools.Items {
				Expect(np.StatusConditions().Root().IsTrue()).To(BeTrue(), "NodePool %s is Ready by Karpenter", np.Name)
			}
		}
	})
})

var _ = Describe("A Baseline whose subnets select nothing", func() {
	It("makes the class Ready=False NodeClassNotReady with Karpenter's message", func() {
		create(baseline("nowhere", "nowhere"), workloadClass("unplaced", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef.Name = "nowhere"
		}))
		Eventually(classCondition("unplaced", v1alpha1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", v1alpha1.ReasonNodeClassNotReady),
			HaveField("Message", And(ContainSubstring("unplaced"), ContainSubstring("SubnetsReady")))))
	})
})

var _ = Describe("Pending pods", func() {
	It("land on the class's top rung, with its capacity type, architecture and family", func() {
		wc := workloadClass("top")
		create(wc)
		expectClassReady("top")
		create(deployment("top", "top", 3, "1"))
		running := expectRunning("top", 3)
		// Pods run as soon as the node is Ready; Karpenter marks its NodeClaim Initialized
		// a moment later, later still beside other scenarios.
		Eventually(func(g Gomega) {
			for _, nc := range nodeClaims("top") {
				g.Expect(nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "NodeClaim %s initialized", nc.Name)
			}
		}).Should(Succeed())

		claims := nodeClaims("top")
		Expect(claims).NotTo(BeEmpty())
		for _, nc := range claims {
			Expect(nc.Labels).To(HaveKeyWithValue(labelRung, "top-spot-arm64"), describe(claims))
			Expect(nc.Labels).To(HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot))
			Expect(nc.Labels).To(HaveKeyWithValue(corev1.LabelArchStable, "arm64"))
			Expect(nc.Labels).To(HaveKeyWithValue(awsv1.LabelInstanceCategory, BeElementOf("c", "m")))
			Expect(nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "NodeClaim %s initialized", nc.Name)
		}
		nodes := map[string]bool{}
		for _, nc := range claims {
			nodes[nc.Status.NodeName] = true
		}
		for _, p := range running {
			Expect(nodes).To(HaveKey(p.Spec.NodeName), "pod %s runs on a node of the top rung", p.Name)
		}
		AddReportEntry("top rung", describe(claims))

		By("deleting the class: its NodePools go first, Karpenter drains their nodes, then the EC2NodeClass goes")
		remove(wc)
		Expect(allNodeClaims("top")).To(BeEmpty())
		pools := &karpv1.NodePoolList{}
		Expect(cluster.Client.List(ctx, pools, client.MatchingLabels{labelClass: "top"})).To(Succeed())
		Expect(pools.Items).To(BeEmpty())
		Expect(apierrors.IsNotFound(cluster.Client.Get(ctx, client.ObjectKey{Name: "top"}, &awsv1.EC2NodeClass{}))).To(BeTrue())
	})
})

var _ = Describe("Spot capacity switched off for the top rung", func() {
	It("makes Karpenter fall down the ladder to the next rung", func() {
		// t4g only here, so Karpenter's memory of the failed offerings (3 minutes)
		// touches no other scenario.
		types := []string{"t4g.large", "t4g.xlarge"}
		cluster.Cloud.SetAvailable(false, karpv1.CapacityTypeSpot, types)
		DeferCleanup(func() { cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, types) })
		launchesBefore := len(cluster.Cloud.Launches())

		create(workloadClass("fallback", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"t4g"}}
		}))
		expectClassReady("fallback")
		create(deployment("fallback", "fallback", 2, "1"))
		expectRunning("fallback", 2)

		claims := nodeClaims("fallback")
		Expect(rungsOf(claims)).To(Equal(map[string]int{"fallback-on-demand-arm64": len(claims)}), describe(claims))
		var triedSpot bool
		for _, l := range cluster.Cloud.Launches()[launchesBefore:] {
			if l.Tags[karpv1.NodePoolLabelKey] == "fallback-spot-arm64" {
				Expect(l.Chosen.InstanceType).To(BeEmpty(), "no spot t4g may launch")
				Expect(l.Dropped).NotTo(BeEmpty())
				triedSpot = true
			}
		}
		Expect(triedSpot).To(BeTrue(), "Karpenter tried the top rung (spot) first")
	})
})

var _ = Describe("Class-wide limits", func() {
	It("keep pods beyond spec.limits pending, within the documented overshoot", func() {
		create(workloadClass("limited", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"c"}, MinGeneration: ptr32(6)}
			wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		}))
		expectClassReady("limited")
		create(deployment("limited", "limited", 10, "1"))

		// Two rungs; each may launch up to the class limit before it sees the other's usage.
		const limit, rungs = 4, 2
		cpu := func() int64 {
			var total int64
			for _, nc := range nodeClaims("limited") {
				total += nc.Status.Capacity.Cpu().Value()
			}
			return total
		}
		Eventually(func(g Gomega) {
			running := 0
			for _, p := range pods("limited") {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			g.Expect(running).To(BeNumerically(">", 0))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(cpu()).To(BeNumerically("<=", limit*rungs))
			pending := 0
			for _, p := range pods("limited") {
				if p.Spec.NodeName == "" {
					pending++
				}
			}
			g.Expect(pending).To(BeNumerically(">", 0), "pods beyond the limit stay pending")
		}).WithTimeout(30 * time.Second).Should(Succeed())
		AddReportEntry("limits", "class cpu limit 4, nodes' cpu "+resource.NewQuantity(cpu(), resource.DecimalSI).String()+"\n"+describe(nodeClaims("limited")))
	})
})

var _ = Describe("Pruning a rung", func() {
	ladder := func(name string, policy v1alpha1.PrunePolicy) *v1alpha1.WorkloadClass {
		return workloadClass(name, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"c"}, MinGeneration: ptr32(6)}
			wc.Spec.PrunePolicy = policy
		})
	}
	dropArm64 := func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64}
	}

	It("Retire keeps the rung's nodes until Karpenter drains them, then deletes the NodePool", func() {
		wc := ladder("retire", v1alpha1.PruneRetire)
		create(wc)
		expectClassReady("retire")
		create(deployment("retire", "retire", 2, "1"))
		expectRunning("retire", 2)
		Expect(rungsOf(nodeClaims("retire"))).To(HaveKey("retire-on-demand-arm64"))
		// Retired at once, before Karpenter's status.nodes (refreshed every 5 seconds) may
		// count the node: Poolsmith also counts the rung's NodeClaims before deleting it.
		update(wc, dropArm64)
		retired := &karpv1.NodePool{}
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: "retire-on-demand-arm64"}, retired)).To(Succeed())
			g.Expect(retired.Spec.Limits).To(HaveKey(corev1.ResourceCPU))
			cpu := retired.Spec.Limits[corev1.ResourceCPU]
			g.Expect(cpu.IsZero()).To(BeTrue(), "retired rung's cpu limit is zero: %v", retired.Spec.Limits)
		}).Should(Succeed())
		Consistently(func() map[string]int { return rungsOf(nodeClaims("retire")) }).WithTimeout(10*time.Second).
			Should(HaveKey("retire-on-demand-arm64"), "a retired rung keeps its nodes")

		By("draining the retired rung's nodes through Karpenter")
		for _, nc := range nodeClaims("retire") {
			if nc.Labels[labelRung] == "retire-on-demand-arm64" {
				Expect(cluster.Client.Delete(ctx, &nc)).To(Succeed())
			}
		}
		Eventually(func() bool {
			return apierrors.IsNotFound(cluster.Client.Get(ctx, client.ObjectKey{Name: "retire-on-demand-arm64"}, &karpv1.NodePool{}))
		}).WithTimeout(3*time.Minute).Should(BeTrue(), "the retired NodePool is deleted once it has no nodes")
		expectRunning("retire", 2)
		Expect(rungsOf(nodeClaims("retire"))).To(Equal(map[string]int{"retire-on-demand-amd64": len(nodeClaims("retire"))}))
	})

	It("Delete deletes the NodePool at once and Karpenter drains its nodes", func() {
		wc := ladder("prune", v1alpha1.PruneDelete)
		create(wc)
		expectClassReady("prune")
		create(deployment("prune", "prune", 2, "1"))
		expectRunning("prune", 2)
		Expect(rungsOf(nodeClaims("prune"))).To(HaveKey("prune-on-demand-arm64"))

		update(wc, dropArm64)
		Eventually(func() bool {
			return apierrors.IsNotFound(cluster.Client.Get(ctx, client.ObjectKey{Name: "prune-on-demand-arm64"}, &karpv1.NodePool{}))
		}).Should(BeTrue())
		Eventually(func() map[string]int { return rungsOf(allNodeClaims("prune")) }).WithTimeout(3*time.Minute).
			ShouldNot(HaveKey("prune-on-demand-arm64"), "Karpenter drained the deleted rung's nodes")
		expectRunning("prune", 2)
		Expect(rungsOf(nodeClaims("prune"))).To(Equal(map[string]int{"prune-on-demand-amd64": len(nodeClaims("prune"))}))
	})
})

func ptr32(v int32) *int32 { return &v }

var _ = Describe("A Baseline tag change", func() {
	It("drifts the class's nodes and Karpenter replaces them, as status.driftNotice predicted", func() {
		base := baseline("drift", "prod")
		create(base, workloadClass("drift", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef.Name = "drift"
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64}
		}))
		expectClassReady("drift")
		create(deployment("drift", "drift", 2, "1"))
		expectRunning("drift", 2)
		before, instances := map[string]bool{}, map[string]bool{}
		for _, nc := range nodeClaims("drift") {
			before[nc.Name] = true
			instances[nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]] = true
		}

		update(base, func(b *v1alpha1.Baseline) { b.Spec.NodeClass.Tags["release"] = "2" })
		Eventually(func(g Gomega) {
			wc := &v1alpha1.WorkloadClass{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: "drift"}, wc)).To(Succeed())
			g.Expect(wc.Status.DriftNotice).To(ContainSubstring("will drift"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			claims := nodeClaims("drift")
			g.Expect(claims).NotTo(BeEmpty())
			for _, nc := range claims {
				g.Expect(before).NotTo(HaveKey(nc.Name), "NodeClaim %s predates the tag change", nc.Name)
			}
			g.Expect(allNodeClaims("drift")).To(HaveLen(len(claims)), "the drifted NodeClaims are gone")
		}).WithTimeout(4 * time.Minute).Should(Succeed())
		expectRunning("drift", 2)
		replacements := 0
		for _, l := range cluster.Cloud.Launches() {
			if l.Tags[karpv1.NodePoolLabelKey] == "drift-on-demand-amd64" && l.InstanceID != "" && !instances[l.InstanceID] {
				Expect(l.Tags).To(HaveKeyWithValue("release", "2"), "replacement instance %s carries the new tag", l.InstanceID)
				replacements++
			}
		}
		Expect(replacements).To(BeNumerically(">", 0))
		Expect(disruptions("drifted", "drift-on-demand-amd64")).To(BeNumerically(">=", 1), "Karpenter disrupted the nodes as drifted")
	})
})

// It waits past Karpenter's 3-minute memory of failed offerings, so it starts first and
// runs beside the others.
var _ = Describe("A fallback rung with fallbackExpireAfter", SpecPriority(10), func() {
	It("has its nodes expired by Karpenter once spot is back, and the pods return to the preferred rung", func() {
		// m7g only. The failed offerings are forgotten before this scenario ends (it waits
		// past the 3 minutes). While it remembers them, Karpenter leaves m7g spot out of
		// every launch (the top-rung scenario's class, which may take m7g, takes another
		// type), so no other scenario's launch renews the memory. It keeps Karpenter's own memory: flushing it when spot
		// comes back would not prove that the first expiry finds spot again.
		types := []string{"m7g.large", "m7g.xlarge", "m7g.2xlarge"}
		cluster.Cloud.SetAvailable(false, karpv1.CapacityTypeSpot, types)
		DeferCleanup(func() { cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, types) })
		failedAt := time.Now()

		create(workloadClass("return", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"m7g"}}
			// Past Karpenter's 3-minute memory of the failed spot offerings, so the first
			// expiry already finds spot again. Consolidation is off, so only expiry can
			// move these nodes: the class's own consolidateAfter: Never, since the General
			// profile's WhenEmptyOrUnderutilized after 1m outranks the Baseline's Never,
			// and Karpenter then replaced the on-demand node with spot as an underutilized
			// one moments before it expired.
			wc.Spec.FallbackExpireAfter = ptr.To(karpv1.MustParseNillableDuration("200s"))
			wc.Spec.Disruption = &v1alpha1.Disruption{ConsolidateAfter: ptr.To(karpv1.MustParseNillableDuration("Never"))}
		}))
		expectClassReady("return")
		np := &karpv1.NodePool{}
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: "return-on-demand-arm64"}, np)).To(Succeed())
		Expect(np.Spec.Template.Spec.ExpireAfter.String()).To(Equal("3m20s"), "the fallback rung carries fallbackExpireAfter")
		create(deployment("return", "return", 2, "1"))
		expectRunning("return", 2)
		fallback := nodeClaims("return")
		Expect(rungsOf(fallback)).To(Equal(map[string]int{"return-on-demand-arm64": len(fallback)}), describe(fallback))

		cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, types)
		Eventually(func(g Gomega) {
			claims := nodeClaims("return")
			g.Expect(rungsOf(claims)).To(Equal(map[string]int{"return-spot-arm64": len(claims)}), describe(claims))
			g.Expect(allNodeClaims("return")).To(HaveLen(len(claims)), "the fallback NodeClaims are gone")
		}).WithTimeout(6 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		expectRunning("return", 2)
		Expect(disruptions("expired", "return-on-demand-arm64")).To(BeNumerically(">=", 1), "Karpenter disrupted the fallback nodes as expired")
		Expect(disruptions("underutilized", "return-on-demand-arm64")+disruptions("empty", "return-on-demand-arm64")).To(BeZero(), "consolidation moved nothing")
		AddReportEntry("fallback return", "back on the preferred rung "+time.Since(failedAt).Round(time.Second).String()+" after spot failed\n"+describe(nodeClaims("return")))
	})
})

var _ = Describe("Consistency Family", func() {
	It("lands a zone-spread Deployment on one family, beside Karpenter's single diverse NodePool", func() {
		create(workloadClass("salad", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
			wc.Spec.Consistency = v1alpha1.ConsistencyFamily
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"c7g", "r7g", "c7i", "r7i"}}
		}))
		expectClassReady("salad")

		// Karpenter's documented general-purpose NodePool (config/samples/compare), on an
		// EC2NodeClass with the test Baseline's settings, reached through a label of its own.
		objs, err := manifest.Load([]string{"../../config/samples/compare/karpenter-general-purpose.yaml"}, nil)
		Expect(err).NotTo(HaveOccurred())
		diverse := objs[0].Unstructured
		Expect(unstructured.SetNestedField(diverse.Object, "diverse", "spec", "template", "spec", "nodeClassRef", "name")).To(Succeed())
		Expect(unstructured.SetNestedStringMap(diverse.Object, map[string]string{"e2e.poolsmith.dev/pool": "diverse"}, "spec", "template", "metadata", "labels")).To(Succeed())
		diverseClass := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "diverse"}, Spec: baseline("", "prod").Spec.NodeClass}
		create(diverseClass, diverse)

		spread := func(d *appsv1.Deployment, selector map[string]string) *appsv1.Deployment {
			d.Spec.Template.Spec.NodeSelector = selector
			d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
			}}
			return d
		}
		create(spread(deployment("web-family", "salad", 5, "1500m"), map[string]string{labelClass: "salad"}),
			spread(deployment("web-diverse", "", 5, "1500m"), map[string]string{"e2e.poolsmith.dev/pool": "diverse"}))
		expectRunning("web-family", 5)
		expectRunning("web-diverse", 5)

		family := nodeClaims("salad")
		list := &karpv1.NodeClaimList{}
		Expect(cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: "general-purpose"})).To(Succeed())
		count := func(claims []karpv1.NodeClaim, key string) int {
			seen := map[string]bool{}
			for _, nc := range claims {
				seen[nc.Labels[key]] = true
			}
			return len(seen)
		}
		zones := count(family, corev1.LabelTopologyZone)
		Expect(zones).To(Equal(3), describe(family))
		Expect(count(family, awsv1.LabelInstanceFamily)).To(Equal(1), "one family for the class:\n%s", describe(family))
		Expect(rungsOf(family)).To(Equal(map[string]int{"salad-spot-arm64-c7g": len(family)}))
		AddReportEntry("node salad", fmt.Sprintf("5 zone-spread replicas of 1500m/512Mi\n%-26s %6s %6s %8s\n%-26s %6d %6d %8d\n%-26s %6d %6d %8d",
			"", "nodes", "types", "families",
			"consistency: Family", len(family), count(family, corev1.LabelInstanceTypeStable), count(family, awsv1.LabelInstanceFamily),
			"one diverse NodePool", len(list.Items), count(list.Items, corev1.LabelInstanceTypeStable), count(list.Items, awsv1.LabelInstanceFamily))+
			"\n"+describe(family)+"\n"+describe(list.Items))
	})
})

// Serial: the signals ConfigMap it writes (prices that make one architecture's c types
// dearest) would reweight the NodeOverlay scenario's class, whose feed replaces its own.
var _ = Describe("A weight change from new spot signals", Serial, func() {
	It("reorders where new NodeClaims go and replaces no existing node", func() {
		wc := workloadClass("reorder", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"c"}, MinGeneration: ptr32(6)}
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingCost}
		})
		create(wc)
		expectClassReady("reorder")
		weights := func(g Gomega) map[string]int32 {
			out := map[string]int32{}
			for _, arch := range []string{"arm64", "amd64"} {
				np := &karpv1.NodePool{}
				g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: "reorder-spot-" + arch}, np)).To(Succeed())
				out[arch] = *np.Spec.Weight
			}
			return out
		}
		w := weights(Default)
		top, other := "arm64", "amd64"
		if w["amd64"] > w["arm64"] {
			top, other = other, top
		}
		d := deployment("reorder", "reorder", 2, "1")
		create(d)
		expectRunning("reorder", 2)
		before := nodeClaims("reorder")
		Expect(rungsOf(before)).To(Equal(map[string]int{"reorder-spot-" + top: len(before)}), describe(before))

		By("publishing spot prices that make the top rung's types the dearest")
		cat, err := catalog.Load()
		Expect(err).NotTo(HaveOccurred())
		prices := map[string]map[string]float64{}
		for name, t := range cat.Types {
			if t.Category == "c" && t.Arch == top {
				prices[name] = map[string]float64{"spot": 9.99}
			}
		}
		pricesJSON, err := json.Marshal(prices)
		Expect(err).NotTo(HaveOccurred())
		feed, err := os.ReadFile("../../internal/signals/testdata/spot-advisor-data.json")
		Expect(err).NotTo(HaveOccurred())
		if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-system"}}); err != nil {
			Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), err.Error())
		}
		create(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "poolsmith-system", Name: "poolsmith-signals",
				Annotations: map[string]string{"poolsmith.dev/fetched-at": time.Now().UTC().Format(time.RFC3339)}},
			Data: map[string]string{"spot-advisor-data.json": string(feed), "prices.json": string(pricesJSON)},
		})
		Eventually(classCondition("reorder", v1alpha1.ConditionSignalsCurrent)).Should(HaveField("Reason", v1alpha1.ReasonFresh))
		Eventually(func(g Gomega) {
			w := weights(g)
			g.Expect(w[other]).To(BeNumerically(">", w[top]), "weights %v", w)
		}).Should(Succeed())

		update(d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](4) })
		expectRunning("reorder", 4)
		after := nodeClaims("reorder")
		Expect(rungsOf(after)).To(HaveKey("reorder-spot-"+other), "new NodeClaims go to the reweighted rung:\n%s", describe(after))
		names := map[string]bool{}
		for _, nc := range after {
			names[nc.Name] = true
			Expect(nc.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue()).To(BeFalse(), "NodeClaim %s drifted", nc.Name)
		}
		for _, nc := range before {
			Expect(names).To(HaveKey(nc.Name), "NodeClaim %s was replaced", nc.Name)
		}
		AddReportEntry("weight reorder", describe(after))
	})
})

// Serial: see the weight-change scenario.
var _ = Describe("NodeOverlays", Serial, func() {
	It("steer Karpenter's choice inside a spot rung, through the prioritized fleet", func() {
		// Signals that put c6g.large, the cheapest spot type, in the >20% interruption
		// bucket: its overlay raises it by 35% above c7g.large, in the <5% bucket.
		raw, err := os.ReadFile("../../internal/signals/testdata/spot-advisor-data.json")
		Expect(err).NotTo(HaveOccurred())
		feed := map[string]any{}
		Expect(json.Unmarshal(raw, &feed)).To(Succeed())
		feed["spot_advisor"] = map[string]any{"us-east-1": map[string]any{"Linux": map[string]any{
			"c6g.large": map[string]any{"s": 50, "r": 4}, "c7g.large": map[string]any{"s": 50, "r": 0},
		}}}
		raw, err = json.Marshal(feed)
		Expect(err).NotTo(HaveOccurred())
		if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-system"}}); err != nil {
			Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), err.Error())
		}
		create(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "poolsmith-system", Name: "poolsmith-signals",
				Annotations: map[string]string{"poolsmith.dev/fetched-at": time.Now().UTC().Format(time.RFC3339)}},
			Data: map[string]string{"spot-advisor-data.json": string(raw)},
		})
		create(workloadClass("overlay", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"c6g", "c7g"}}
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingCost, NodeOverlays: true}
		}))
		expectClassReady("overlay")
		Eventually(func(g Gomega) {
			ov := &karpv1alpha1.NodeOverlay{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: "overlay-risk-over-20"}, ov)).To(Succeed())
			g.Expect(ov.Spec.Requirements).To(ContainElement(HaveField("Values", ContainElement("c6g.large"))))
			g.Expect(ov.StatusConditions().Root().IsTrue()).To(BeTrue(), "Karpenter reports the overlay Ready")
		}).Should(Succeed())

		launchesBefore := len(cluster.Cloud.Launches())
		create(deployment("overlay", "overlay", 1, "500m"))
		expectRunning("overlay", 1)
		claims := nodeClaims("overlay")
		Expect(claims).To(HaveLen(1))
		Expect(claims[0].Annotations).To(HaveKeyWithValue(karpv1alpha1.PriceOverlayAppliedAnnotationKey, "true"))
		Expect(claims[0].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "c7g.large"), "the overlay made c6g.large dearer than c7g.large")

		var launch *fakeec2.Launch
		for _, l := range cluster.Cloud.Launches()[launchesBefore:] {
			if l.Tags[karpv1.NodePoolLabelKey] == "overlay-spot-arm64" && l.InstanceID != "" {
				launch = &l
			}
		}
		Expect(launch).NotTo(BeNil())
		Expect(launch.Prioritized).To(BeTrue(), "Karpenter asked for a prioritized fleet")
		priority := map[string]float64{}
		for _, o := range launch.Overrides {
			if o.Priority != nil {
				priority[o.InstanceType] = *o.Priority
			}
		}
		Expect(priority["c6g.large"]).To(BeNumerically("~", 0.0272*1.35, 0.0005), "c6g.large's priority is its overlay-adjusted spot price")
		Expect(priority["c7g.large"]).To(BeNumerically("~", 0.0348, 0.0005))
		AddReportEntry("overlay", fmt.Sprintf("fleet priorities %v; launched %s", priority, launch.Chosen))
	})
})
