//go:build e2e

package e2e_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cli"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

// decision is one NodeClaim as Karpenter decided it (or simulate predicts it): the rung,
// the capacity type, the zone when the NodeClaim pins one, the number of instance types
// left to the launch, and the workloads of its pods; instanceType is the fleet's pick.
type decision struct {
	rung, capacityType, zone, instanceType string
	allowed                                int
	workloads                              map[string]int
}

// Serial: it compares every pod, NodeClaim and NodePool of the cluster, and needs
// Karpenter to take the released pods in one batch, which other scenarios' pods would
// split.
var _ = Describe("poolsmith simulate", Serial, func() {
	It("agrees with what Karpenter launches for the sample workloads, given the account's offerings", func() {
		applySamples()
		workloads, err := manifest.Load([]string{"../../config/samples/workloads"}, nil)
		Expect(err).NotTo(HaveOccurred())
		pending, err := simulate.Pods(workloads)
		Expect(err).NotTo(HaveOccurred())
		// The sample node agents first, ungated: Karpenter sizes nodes for the DaemonSets
		// it knows when the pods come, and simulate counts those in its input.
		daemonSetFirst := func(o manifest.Object) int {
			if o.GetKind() == "DaemonSet" {
				return 0
			}
			return 1
		}
		slices.SortStableFunc(workloads, func(a, b manifest.Object) int { return cmp.Compare(daemonSetFirst(a), daemonSetFirst(b)) })
		daemonSets := 0
		for _, o := range workloads {
			if o.GetNamespace() == "" {
				o.SetNamespace(namespace)
			}
			// No namespace controller runs: namespaces are created once and never deleted.
			if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}); err != nil {
				Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), err.Error())
			}
			if o.GetKind() == "DaemonSet" {
				daemonSets++
				// Like every pod here, they may go at once when the scenario ends.
				Expect(unstructured.SetNestedField(o.Object, int64(0), "spec", "template", "spec", "terminationGracePeriodSeconds")).To(Succeed())
			} else {
				// simulate plans for pods that are pending together; Karpenter batches pods
				// as they come. Gate the pods until every one exists, then release them at once.
				Expect(unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "e2e.poolsmith.dev/hold"}},
					"spec", "template", "spec", "schedulingGates")).To(Succeed())
			}
			create(o.Unstructured)
		}
		Expect(daemonSets).To(Equal(3), "the sample node agents")
		var gated []corev1.Pod
		Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(cluster.Client.List(ctx, list)).To(Succeed())
			gated = slices.DeleteFunc(list.Items, byDaemonSet)
			g.Expect(gated).To(HaveLen(len(pending)))
		}).Should(Succeed())
		// Released in parallel, so the pods reach Karpenter within one batching window.
		var released sync.WaitGroup
		for i := range gated {
			released.Go(func() {
				defer GinkgoRecover()
				patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schedulingGates":null}}`))
				Expect(cluster.Client.Patch(ctx, &gated[i], patch)).To(Succeed())
			})
		}
		released.Wait()
		Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(cluster.Client.List(ctx, list)).To(Succeed())
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && !byDaemonSet(p) {
					running++
				}
			}
			g.Expect(running).To(Equal(len(pending)))
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		By("the node agents run a pod on every node Karpenter launched for the classes")
		Eventually(func(g Gomega) {
			claims := &karpv1.NodeClaimList{}
			g.Expect(cluster.Client.List(ctx, claims, client.HasLabels{v1alpha1.LabelClass})).To(Succeed())
			list := &corev1.PodList{}
			g.Expect(cluster.Client.List(ctx, list)).To(Succeed())
			agents := map[string]int{}
			for _, p := range list.Items {
				if byDaemonSet(p) && p.Status.Phase == corev1.PodRunning {
					agents[p.Spec.NodeName]++
				}
			}
			for _, nc := range claims.Items {
				g.Expect(agents[nc.Status.NodeName]).To(Equal(daemonSets), "node agents running on %s (%s)", nc.Status.NodeName, nc.Name)
			}
		}).Should(Succeed())

		got := karpenterDecisions()
		offerings, _ := accountOfferings()
		want := simulated(pending, offerings)
		score := compare(want, got)
		AddReportEntry("simulate vs Karpenter", score.String())
		GinkgoWriter.Println(score.String())
		// 100% when Karpenter takes the released pods in one batch and kube-scheduler places
		// them as Karpenter planned. On a loaded machine Karpenter can still split them over
		// two batches, or kube-scheduler fill the first Ready node so that a zone-spread pod
		// finds no room in its zone (one more NodeClaim on general-spot-arm64: 91.8% and
		// 98.0% measured), which simulate, planning for pods pending at once, cannot model.
		Expect(score.karpenter()).To(BeNumerically(">=", 0.90), "%s", score.String())
	})
})

// applySamples applies config/samples, waits until Karpenter reports every class Ready,
// and deletes them when the scenario ends.
func applySamples() []string {
	GinkgoHelper()
	objs, err := manifest.Load([]string{"../../config/samples"}, nil)
	Expect(err).NotTo(HaveOccurred())
	var classes []string
	var applied []client.Object
	for _, o := range objs {
		Expect(cluster.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner("e2e"), client.ForceOwnership)).To(Succeed(), o.Where())
		applied = append(applied, o.Unstructured)
		if o.GetKind() == "WorkloadClass" {
			classes = append(classes, o.GetName())
		}
	}
	DeferCleanup(func() {
		for i := len(applied) - 1; i >= 0; i-- {
			remove(applied[i])
		}
	})
	for _, name := range classes {
		expectClassReady(name)
	}
	return classes
}

// karpenterDecisions reads what Karpenter launched for Poolsmith's classes.
func karpenterDecisions() []decision {
	GinkgoHelper()
	claims := &karpv1.NodeClaimList{}
	Expect(cluster.Client.List(ctx, claims, client.HasLabels{v1alpha1.LabelClass})).To(Succeed())
	pods := &corev1.PodList{}
	Expect(cluster.Client.List(ctx, pods)).To(Succeed())
	var out []decision
	for _, nc := range claims.Items {
		d := decision{rung: nc.Labels[v1alpha1.LabelRung], capacityType: nc.Labels[karpv1.CapacityTypeLabelKey],
			instanceType: nc.Labels[corev1.LabelInstanceTypeStable], workloads: map[string]int{}}
		for _, r := range nc.Spec.Requirements {
			switch {
			case r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn:
				d.allowed = len(r.Values)
			case r.Key == corev1.LabelTopologyZone && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1:
				d.zone = r.Values[0]
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Spec.NodeName == nc.Status.NodeName && !byDaemonSet(p) {
				d.workloads[workloadOf(p.Namespace, p.Name)]++
			}
		}
		out = append(out, d)
	}
	return out
}

// simulated runs the command docs/karpenter-in-the-loop.md gives a user, in process:
// `poolsmith simulate -f config/samples/ -f config/samples/workloads/ --offerings FILE -o json`,
// with the account's offerings (the AWS CLI's output converted as docs/cli.md says).
func simulated(pods []*corev1.Pod, offerings string) []decision {
	GinkgoHelper()
	var stdout, stderr bytes.Buffer
	code := cli.Execute([]string{"simulate", "-f", "../../config/samples/", "-f", "../../config/samples/workloads/",
		"--offerings", offerings, "-o", "json"}, nil, &stdout, &stderr)
	Expect(code).To(Equal(cli.ExitOK), stderr.String())
	var out struct {
		Poolsmith simulate.Result `json:"poolsmith"`
	}
	Expect(json.Unmarshal(stdout.Bytes(), &out)).To(Succeed())
	res := out.Poolsmith
	Expect(res.Unschedulable).To(BeEmpty())
	Expect(res.Totals.DaemonSets).To(Equal(3), "simulate counted the sample node agents")
	var ds []decision
	for _, nc := range res.NodeClaims {
		d := decision{rung: nc.NodePool, capacityType: nc.CapacityType, instanceType: nc.InstanceType, allowed: nc.Options, workloads: map[string]int{}}
		if spread(pods, nc.Pods) {
			d.zone = nc.Zone
		}
		for _, p := range nc.Pods {
			ns, name, _ := strings.Cut(p, "/")
			d.workloads[workloadOf(ns, name)]++
		}
		ds = append(ds, d)
	}
	return ds
}

// spread says whether any of the pods spreads over zones, the only case where Karpenter
// pins a NodeClaim's zone.
func spread(pods []*corev1.Pod, names []string) bool {
	for _, p := range pods {
		for _, n := range names {
			if p.Namespace+"/"+p.Name == n && len(p.Spec.TopologySpreadConstraints) > 0 {
				return true
			}
		}
	}
	return false
}

// workloadOf is the workload a pod belongs to: the pod name less its generated suffixes.
func workloadOf(ns, name string) string {
	parts := strings.Split(name, "-")
	switch {
	case len(parts) >= 3 && len(parts[len(parts)-1]) == 5 && len(parts[len(parts)-2]) >= 9:
		parts = parts[:len(parts)-2] // Deployment: <name>-<hash>-<suffix>
	case len(parts) >= 2:
		parts = parts[:len(parts)-1] // Job or simulate: <name>-<suffix or index>
	}
	return ns + "/" + strings.Join(parts, "-")
}

// agreement counts matching decisions per dimension.
type agreement struct {
	items      map[string][2]int // dimension -> matched, total
	details    []string
	nodeClaims [2]int // simulate, Karpenter
}

func (a *agreement) add(dim string, ok bool, detail string) {
	v := a.items[dim]
	v[1]++
	if ok {
		v[0]++
	} else {
		a.details = append(a.details, dim+": "+detail)
	}
	a.items[dim] = v
}

// karpenter is the share of Karpenter's own decisions simulate predicted: every
// dimension but the fleet's instance pick.
func (a *agreement) karpenter() float64 {
	matched, total := 0, 0
	for dim, v := range a.items {
		if dim != "instance type (fleet)" {
			matched, total = matched+v[0], total+v[1]
		}
	}
	if total == 0 {
		return 0
	}
	return float64(matched) / float64(total)
}

func (a *agreement) String() string {
	dims := make([]string, 0, len(a.items))
	for d := range a.items {
		dims = append(dims, d)
	}
	sort.Strings(dims)
	var b strings.Builder
	fmt.Fprintf(&b, "simulate agrees with Karpenter on %.1f%% of Karpenter's decisions\n", 100*a.karpenter())
	fmt.Fprintf(&b, "  NodeClaims: simulate %d, Karpenter %d\n", a.nodeClaims[0], a.nodeClaims[1])
	for _, d := range dims {
		v := a.items[d]
		fmt.Fprintf(&b, "  %-24s %3d/%-3d\n", d, v[0], v[1])
	}
	for _, d := range a.details {
		fmt.Fprintf(&b, "  differs: %s\n", d)
	}
	return b.String()
}

// compare matches NodeClaims rung by rung (ordered by zone and pods) and scores each
// dimension: NodeClaims per rung, capacity type, pinned zone, instance types allowed,
// pod assignment (pods per workload and rung) and, apart, the fleet's instance pick.
func compare(want, got []decision) *agreement {
	a := &agreement{items: map[string][2]int{}, nodeClaims: [2]int{len(want), len(got)}}
	byRung := func(ds []decision) map[string][]decision {
		m := map[string][]decision{}
		for _, d := range ds {
			m[d.rung] = append(m[d.rung], d)
		}
		for _, list := range m {
			sort.Slice(list, func(i, j int) bool {
				if list[i].zone != list[j].zone {
					return list[i].zone < list[j].zone
				}
				return fmt.Sprint(list[i].workloads) < fmt.Sprint(list[j].workloads)
			})
		}
		return m
	}
	w, g := byRung(want), byRung(got)
	rungs := map[string]bool{}
	for r := range w {
		rungs[r] = true
	}
	for r := range g {
		rungs[r] = true
	}
	pods := map[[2]string][2]int{} // (workload, rung) -> simulate, karpenter
	for r := range rungs {
		a.add("NodeClaims per rung", len(w[r]) == len(g[r]), fmt.Sprintf("%s: simulate %d, Karpenter %d", r, len(w[r]), len(g[r])))
		for i := 0; i < min(len(w[r]), len(g[r])); i++ {
			s, k := w[r][i], g[r][i]
			a.add("capacity type", s.capacityType == k.capacityType, fmt.Sprintf("%s: simulate %s, Karpenter %s", r, s.capacityType, k.capacityType))
			a.add("zone (pinned)", s.zone == k.zone, fmt.Sprintf("%s: simulate %q, Karpenter %q", r, s.zone, k.zone))
			a.add("instance types allowed", s.allowed == k.allowed, fmt.Sprintf("%s: simulate %d, Karpenter %d", r, s.allowed, k.allowed))
			a.add("instance type (fleet)", s.instanceType == k.instanceType, fmt.Sprintf("%s: simulate %s, fleet %s", r, s.instanceType, k.instanceType))
		}
		for _, d := range w[r] {
			for wl, n := range d.workloads {
				v := pods[[2]string{wl, r}]
				v[0] += n
				pods[[2]string{wl, r}] = v
			}
		}
		for _, d := range g[r] {
			for wl, n := range d.workloads {
				v := pods[[2]string{wl, r}]
				v[1] += n
				pods[[2]string{wl, r}] = v
			}
		}
	}
	for key, v := range pods {
		for i := 0; i < max(v[0], v[1]); i++ {
			a.add("pod assignment", i < min(v[0], v[1]), fmt.Sprintf("%s on %s: simulate %d pods, Karpenter %d", key[0], key[1], v[0], v[1]))
		}
	}
	return a
}
