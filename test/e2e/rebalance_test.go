//go:build e2e

package e2e_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// freshSignals writes the signals ConfigMap the manager reads, fetched now, with an
// interruption bucket for each type, and removes it when the scenario ends.
func freshSignals(buckets map[string]int) {
	GinkgoHelper()
	key := operator.DefaultSignalsConfigMap
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	types := ""
	for t, b := range buckets {
		if types != "" {
			types += ","
		}
		types += fmt.Sprintf(`%q:{"s":40,"r":%d}`, t, b)
	}
	feed := `{"ranges":[{"index":0,"label":"<5%","max":5},{"index":1,"label":"5-10%","max":11},{"index":2,"label":"10-15%","max":16},{"index":3,"label":"15-20%","max":22},{"index":4,"label":">20%","max":100}],` +
		fmt.Sprintf(`"spot_advisor":{%q:{"Linux":{%s}}}}`, cluster.Cloud.Region(), types)
	create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
			Annotations: map[string]string{signals.FetchedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Data: map[string]string{signals.AdvisorKey: feed},
	})
}

var _ = Describe("Rebalance (spec.rebalance) after spot capacity returns", func() {
	It("moves fallback nodes back to the top rung through Karpenter's drift, one at a time, through PDBs, and never a do-not-disrupt node", func() {
		// m6i only (no other scenario pins it). Karpenter remembers the failed offerings
		// for 3 minutes; Poolsmith waits that long after the last capacity error, so they
		// are forgotten before this scenario ends.
		types := []string{"m6i.large"}
		cluster.Cloud.SetAvailable(false, karpv1.CapacityTypeSpot, types)
		DeferCleanup(func() { cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, types) })
		failedAt := time.Now()
		freshSignals(map[string]int{"m6i.large": 0})

		const class = "rebal"
		wc := workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"m6i"}}
			wc.Spec.FallbackExpireAfter = ptr.To(karpv1.MustParseNillableDuration("Never"))
			// Karpenter's consolidation off (the General profile turns it on): only
			// Poolsmith's rebalance may move these nodes.
			wc.Spec.Disruption = &v1alpha1.Disruption{ConsolidateAfter: ptr.To(karpv1.MustParseNillableDuration("Never"))}
			wc.Spec.Rebalance = &v1alpha1.Rebalance{Policy: v1alpha1.RebalanceOff, After: &metav1.Duration{Duration: 20 * time.Second},
				QuietPeriod: &metav1.Duration{Duration: time.Minute}, MaxConcurrent: ptr.To(intstr.FromInt32(1))}
		})
		create(wc)
		expectClassReady(class)

		// One pod a node: two that may move, and one that does not-disrupt.
		spread := func(name string, replicas int32, annotations map[string]string) client.Object {
			d := deployment(name, class, replicas, "1")
			d.Spec.Template.Labels["e2e.poolsmith.dev/spread"] = class
			d.Spec.Template.Annotations = annotations
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey:   corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.poolsmith.dev/spread": class}},
				}}}}
			return d
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: class, Namespace: namespace},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: class}}}}
		create(pdb, spread(class, 2, nil), spread(class+"-pinned", 1, map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}))
		expectRunning(class, 2)
		expectRunning(class+"-pinned", 1)
		fallback := nodeClaims(class)
		Expect(rungsOf(fallback)).To(Equal(map[string]int{class + "-on-demand-amd64": 3}), describe(fallback))
		Eventually(func() []v1alpha1.RungStatus { return get(&v1alpha1.WorkloadClass{}, class).Status.NodePools }).
			Should(ContainElement(And(HaveField("Name", class+"-on-demand-amd64"), HaveField("Nodes", int32(3)))), "status counts each rung's nodes")

		By("spot back with policy Off: nothing moves")
		cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, types)
		pinnedNode := nodeOf(class + "-pinned")
		marked := func() int {
			n := 0
			for _, nc := range nodeClaims(class) {
				if nc.Annotations[karpv1.NodePoolHashAnnotationKey] == v1alpha1.RebalanceDriftHash {
					n++
				}
			}
			return n
		}
		Consistently(func(g Gomega) {
			g.Expect(marked()).To(BeZero())
			g.Expect(rungsOf(nodeClaims(class))).To(Equal(map[string]int{class + "-on-demand-amd64": 3}))
		}).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		By("policy Preferred with a PDB allowing no disruption: blocked, and the status says so")
		update(wc, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.Policy = v1alpha1.RebalancePreferred })
		Eventually(func() string {
			st := get(&v1alpha1.WorkloadClass{}, class).Status.Rebalance
			if st == nil {
				return ""
			}
			return st.Message
		}).Should(ContainSubstring("PodDisruptionBudget default/" + class + " allows no disruption"))
		Expect(marked()).To(BeZero())

		By("the PDB allows one: the two nodes move, one at a time")
		update(pdb, func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1)) })
		sawDrifted, most := false, 0
		Eventually(func(g Gomega) {
			claims := nodeClaims(class)
			n := 0
			for _, nc := range claims {
				if nc.Annotations[karpv1.NodePoolHashAnnotationKey] != v1alpha1.RebalanceDriftHash {
					continue
				}
				n++
				if c := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); c.IsTrue() && c.Reason == "NodePoolDrifted" {
					sawDrifted = true
				}
			}
			most = max(most, n)
			g.Expect(rungsOf(claims)).To(Equal(map[string]int{class + "-spot-amd64": 2, class + "-on-demand-amd64": 1}), describe(claims))
			g.Expect(allNodeClaims(class)).To(HaveLen(3), "the moved NodeClaims are gone")
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(most).To(Equal(1), "never more than maxConcurrent (1) NodeClaims marked at once")
		Expect(sawDrifted).To(BeTrue(), "Karpenter saw the marked NodeClaim statically drifted (NodePoolDrifted)")
		Expect(disruptions("drifted", class+"-on-demand-amd64")).To(BeNumerically("==", 2), "Karpenter replaced both through drift")
		Expect(disruptions("underutilized", class+"-on-demand-amd64")+disruptions("empty", class+"-on-demand-amd64")).To(BeZero(), "consolidation moved nothing")
		Expect(nodeOf(class+"-pinned")).To(Equal(pinnedNode), "the do-not-disrupt pod's node stays")
		expectRunning(class, 2)
		st := get(&v1alpha1.WorkloadClass{}, class).Status.Rebalance
		Expect(st.Started).To(BeNumerically("==", 2))
		Eventually(func() int64 { return get(&v1alpha1.WorkloadClass{}, class).Status.Rebalance.Succeeded }).Should(BeNumerically("==", 2))
		Expect(get(&v1alpha1.WorkloadClass{}, class).Status.Rebalance.Message).To(ContainSubstring("pod default/" + class + "-pinned-"))
		AddReportEntry("rebalance", "both movable nodes on the top rung "+time.Since(failedAt).Round(time.Second).String()+" after spot failed\n"+describe(nodeClaims(class)))
	})
})

// nodeOf is the node the app's single pod runs on.
func nodeOf(app string) string {
	GinkgoHelper()
	running := expectRunning(app, 1)
	return running[0].Spec.NodeName
}

func get[T client.Object](o T, name string) T {
	GinkgoHelper()
	Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, o)).To(Succeed())
	return o
}
