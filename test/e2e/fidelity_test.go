//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

// offeringsJQ is docs/cli.md's jq program: it turns the AWS CLI's
// describe-instance-type-offerings ($t, on-demand) and describe-spot-price-history ($s,
// spot) output into simulate's --offerings file.
const offeringsJQ = `{offerings: (
  [$t[0].InstanceTypeOfferings[] | {instanceType: .InstanceType, zone: .Location, capacityTypes: ["on-demand"]}] +
  [$s[0].SpotPriceHistory[] | {instanceType: .InstanceType, zone: .AvailabilityZone, capacityTypes: ["spot"]}])}`

// accountOfferings writes the simulated account's offerings as a user makes them for
// `simulate --offerings`: the AWS CLI's two outputs, converted as docs/cli.md says (with
// jq when it is installed, and checked against the same conversion in Go), and returns
// the file and what simulate reads from it.
func accountOfferings() (string, simulate.Offerings) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	types, spot := cluster.Cloud.AWSCLI("describe-instance-type-offerings"), cluster.Cloud.AWSCLI("describe-spot-price-history")
	var t struct {
		InstanceTypeOfferings []struct{ InstanceType, Location string }
	}
	var s struct {
		SpotPriceHistory []struct{ InstanceType, AvailabilityZone string }
	}
	Expect(json.Unmarshal(types, &t)).To(Succeed())
	Expect(json.Unmarshal(spot, &s)).To(Succeed())
	file := simulate.OfferingsFile{}
	for _, o := range t.InstanceTypeOfferings {
		file.Offerings = append(file.Offerings, simulate.OfferingEntry{InstanceType: o.InstanceType, Zone: o.Location, CapacityTypes: []string{karpv1.CapacityTypeOnDemand}})
	}
	for _, o := range s.SpotPriceHistory {
		file.Offerings = append(file.Offerings, simulate.OfferingEntry{InstanceType: o.InstanceType, Zone: o.AvailabilityZone, CapacityTypes: []string{karpv1.CapacityTypeSpot}})
	}
	data, err := json.Marshal(file)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "offerings.json")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	offerings, err := simulate.ParseOfferings(data)
	Expect(err).NotTo(HaveOccurred())

	if jq, err := exec.LookPath("jq"); err == nil {
		Expect(os.WriteFile(filepath.Join(dir, "types.json"), types, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "spot.json"), spot, 0o600)).To(Succeed())
		cmd := exec.Command(jq, "-n", "--slurpfile", "t", "types.json", "--slurpfile", "s", "spot.json", offeringsJQ)
		cmd.Dir = dir
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), "the jq of docs/cli.md")
		fromJQ, err := simulate.ParseOfferings(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(fromJQ).To(Equal(offerings), "docs/cli.md's jq and the conversion here read the AWS CLI's output alike")
	}
	return path, offerings
}

// manifests turns typed objects into what `poolsmith simulate -f` reads.
func manifests(objs ...client.Object) []manifest.Object {
	GinkgoHelper()
	var docs [][]byte
	for _, o := range objs {
		gvk, err := cluster.Client.GroupVersionKindFor(o)
		Expect(err).NotTo(HaveOccurred())
		o = o.DeepCopyObject().(client.Object)
		o.GetObjectKind().SetGroupVersionKind(gvk)
		data, err := json.Marshal(o)
		Expect(err).NotTo(HaveOccurred())
		docs = append(docs, data)
	}
	out, err := manifest.Decode("e2e", bytes.NewReader(bytes.Join(docs, []byte("\n---\n"))))
	Expect(err).NotTo(HaveOccurred())
	return out
}

// byDaemonSet says whether the DaemonSet controller made the pod.
func byDaemonSet(p corev1.Pod) bool {
	ref := metav1.GetControllerOf(&p)
	return ref != nil && ref.Kind == "DaemonSet"
}

var _ = Describe("A StatefulSet on a memory class", func() {
	It("gets its pods, with their stable names, from the StatefulSet controller, and Karpenter runs them on the class's memory rung", func() {
		create(workloadClass("ledger", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Profile = v1alpha1.ProfileMemoryOptimized
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"r"}, MinGeneration: ptr.To[int32](6)}
		}))
		expectClassReady("ledger")
		// No volumeClaimTemplates: no volume provisioner runs here. OrderedReady (the
		// default): each pod is created once the one before it is Running and Ready.
		d := deployment("ledger", "ledger", 3, "500m")
		d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("6Gi")
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: namespace},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), ServiceName: "ledger", Selector: d.Spec.Selector, Template: d.Spec.Template},
		}
		create(sts)
		running := expectRunning("ledger", 3)
		names := map[string]bool{}
		for _, p := range running {
			names[p.Name] = true
		}
		Expect(names).To(Equal(map[string]bool{"ledger-0": true, "ledger-1": true, "ledger-2": true}))
		Eventually(func(g Gomega) {
			live := &appsv1.StatefulSet{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sts), live)).To(Succeed())
			g.Expect(live.Status.ReadyReplicas).To(Equal(int32(3)))
		}).Should(Succeed())

		claims := nodeClaims("ledger")
		nodes := map[string]bool{}
		for _, nc := range claims {
			Expect(nc.Labels).To(HaveKeyWithValue(labelRung, "ledger-on-demand-arm64"), describe(claims))
			Expect(nc.Labels).To(HaveKeyWithValue("karpenter.k8s.aws/instance-category", "r"), describe(claims))
			nodes[nc.Status.NodeName] = true
		}
		for _, p := range running {
			Expect(nodes).To(HaveKey(p.Spec.NodeName), "pod %s runs on a node of the memory rung", p.Name)
		}
		AddReportEntry("StatefulSet on a memory class", describe(claims))
	})
})

var _ = Describe("DaemonSet overhead", func() {
	It("makes Karpenter pick a larger instance type where pods and DaemonSets no longer fit, and simulate agrees", func() {
		// Two classes of one rung each (c7g on spot, arm64): large (1930m allocatable)
		// and xlarge. The sample node agents (225m) select only "withagents".
		for _, name := range []string{"agentless", "withagents"} {
			create(workloadClass(name, func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
				wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
				wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"c7g"}}
			}))
		}
		expectClassReady("agentless")
		expectClassReady("withagents")

		samples, err := manifest.Load([]string{"../../config/samples/workloads/daemonsets.yaml"}, nil)
		Expect(err).NotTo(HaveOccurred())
		var inputs []client.Object
		for _, o := range samples {
			ds := &appsv1.DaemonSet{}
			Expect(o.Into(ds)).To(Succeed())
			ds.ObjectMeta = metav1.ObjectMeta{Name: "withagents-" + ds.Name, Namespace: namespace}
			ds.Spec.Template.Spec.NodeSelector = map[string]string{labelClass: "withagents"}
			ds.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			inputs = append(inputs, ds)
		}
		// Karpenter sizes nodes for the DaemonSets it knows when the pods come.
		create(inputs...)
		for _, name := range []string{"agentless", "withagents"} {
			d := deployment(name, name, 1, "1750m")
			inputs = append(inputs, d)
			create(d)
		}
		expectRunning("agentless", 1)
		expectRunning("withagents", 1)

		claims := map[string]karpv1.NodeClaim{}
		for _, name := range []string{"agentless", "withagents"} {
			list := nodeClaims(name)
			Expect(list).To(HaveLen(1), describe(list))
			claims[name] = list[0]
		}
		allowed := func(nc karpv1.NodeClaim) []string {
			for _, r := range nc.Spec.Requirements {
				if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
					return r.Values
				}
			}
			return nil
		}
		// Karpenter's own decision: the types the NodeClaim may launch as.
		Expect(allowed(claims["agentless"])).To(ContainElement("c7g.large"))
		Expect(allowed(claims["withagents"])).NotTo(ContainElement("c7g.large"))
		Expect(allowed(claims["withagents"])).To(ContainElement("c7g.xlarge"))
		// The fleet launches the cheapest.
		Expect(claims["agentless"].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "c7g.large"))
		Expect(claims["withagents"].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "c7g.xlarge"))

		By("the DaemonSet controller's pods run on the node sized for them, and on no other")
		Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(cluster.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
			agents := 0
			for _, p := range list.Items {
				if !byDaemonSet(p) || !strings.HasPrefix(p.Name, "withagents-") {
					continue
				}
				g.Expect(p.Spec.NodeName).To(Equal(claims["withagents"].Status.NodeName), "pod %s", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				agents++
			}
			g.Expect(agents).To(Equal(3))
		}).Should(Succeed())

		By("simulate, given the same DaemonSets and the account's offerings, makes the same choice")
		_, offerings := accountOfferings()
		objs := manifests(inputs...)
		pending, err := simulate.Pods(objs)
		Expect(err).NotTo(HaveOccurred())
		daemons, err := simulate.DaemonSetPods(objs)
		Expect(err).NotTo(HaveOccurred())
		Expect(daemons).To(HaveLen(3))
		pools := &karpv1.NodePoolList{}
		var live []*karpv1.NodePool
		for _, name := range []string{"agentless", "withagents"} {
			Expect(cluster.Client.List(ctx, pools, client.MatchingLabels{labelClass: name})).To(Succeed())
			for i := range pools.Items {
				live = append(live, pools.Items[i].DeepCopy())
			}
		}
		res, err := simulate.Run(ctx, live, pending, simulate.Options{Region: cluster.Cloud.Region(), Offerings: offerings, DaemonSetPods: daemons})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Unschedulable).To(BeEmpty())
		Expect(res.NodeClaims).To(HaveLen(2))
		for _, nc := range res.NodeClaims {
			class := strings.TrimSuffix(nc.NodePool, "-spot-arm64")
			Expect(nc.InstanceType).To(Equal(claims[class].Labels[corev1.LabelInstanceTypeStable]), "simulate's %s", nc.NodePool)
			Expect(nc.Options).To(Equal(len(allowed(claims[class]))), "instance types left to %s's launch", nc.NodePool)
		}
		AddReportEntry("DaemonSet overhead", describe(append(nodeClaims("agentless"), nodeClaims("withagents")...)))
	})
})
