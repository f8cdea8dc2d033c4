//go:build e2e

package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cli"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
)

// Capacity reservations (docs/commitments.md). Each scenario has its own Baseline, its
// own reservation in the simulated account and an instance type no other scenario
// selects (i4g.large, im4gn.large: categories i and im), so they run beside the others.

var _ = Describe("A capacity reservation selected by a reserved rung", func() {
	It("is used first, by Karpenter's reserved launches; once full, Karpenter v1.15.0 holds the next pod for a slot instead of falling to the next rung", func() {
		const class, base, crID = "reserved-first", "e2e-reserved", "cr-e2ereserved01"
		started := time.Now()
		cluster.Cloud.AddCapacityReservation(fakeec2.CapacityReservation{
			ID: crID, InstanceType: "i4g.large", Zone: "us-east-1b", Count: 2, Match: ec2types.InstanceMatchCriteriaTargeted,
		})
		b := baseline(base, "prod")
		b.Spec.NodeClass.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: crID}}
		wc := workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef.Name = base
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			// Listed last: a reserved rung ranks first under every strategy, Static included.
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"i4g"}}
			// No consolidation: the nodes counted stay the nodes launched.
			wc.Spec.Disruption = &v1alpha1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
				ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("Never")),
			}
		})
		create(b, wc)
		expectClassReady(class)

		By("the class's EC2NodeClass carries the Baseline's selector terms, and Karpenter found the reservation")
		Eventually(func(g Gomega) {
			nc := &awsv1.EC2NodeClass{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: class}, nc)).To(Succeed())
			g.Expect(nc.Spec.CapacityReservationSelectorTerms).To(ConsistOf(HaveField("ID", crID)))
			g.Expect(nc.Status.CapacityReservations).To(ConsistOf(And(HaveField("ID", crID), HaveField("InstanceType", "i4g.large"),
				HaveField("AvailabilityZone", "us-east-1b"), HaveField("InstanceMatchCriteria", "targeted"))))
		}).Should(Succeed())

		By("the reserved rung renders above the others")
		weights := rungWeights(Default, class)
		reserved, spot, onDemand := class+"-reserved-arm64", class+"-spot-arm64", class+"-on-demand-arm64"
		Expect(weights).To(HaveKey(reserved))
		Expect(weights[reserved]).To(BeNumerically(">", weights[spot]), "weights %v", weights)
		Expect(weights[spot]).To(BeNumerically(">", weights[onDemand]), "weights %v", weights)

		By("two pods, one a node: both nodes are reserved, in the reservation, which is then full")
		// Two pods of 1 CPU do not fit on one i4g.large (2 vCPUs, less allocatable).
		d := deployment(class, class, 2, "1")
		create(d)
		expectRunning(class, 2)
		Eventually(func(g Gomega) {
			claims := nodeClaims(class)
			g.Expect(claims).To(HaveLen(2))
			for _, nc := range claims {
				g.Expect(nc.Labels).To(And(HaveKeyWithValue(labelRung, reserved), HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeReserved),
					HaveKeyWithValue(awsv1.LabelCapacityReservationID, crID)), "NodeClaims:\n%s", describe(claims))
			}
		}).Should(Succeed())
		Expect(cluster.Cloud.CapacityReservation(crID).Available).To(BeZero())
		launched := launchesOf(reserved)
		Expect(launched).NotTo(BeEmpty())
		for _, l := range launched {
			Expect(l).To(And(HaveField("Reservation", crID), HaveField("Preference", "capacity-reservations-only")), "launch %+v", l)
		}
		firstTwo := time.Since(started)

		By("a third pod while the reservation is full: Karpenter v1.15.0 defers it, it does not fall to the next rung")
		// Its provisioner schedules in strict reserved-offering mode: a pod compatible only
		// with a full reservation on the highest-weight NodePool gets a ReservedOfferingError,
		// which stops the fall-through to lower-weight NodePools and is not logged
		// (sigs.k8s.io/karpenter v1.15.0 pkg/controllers/provisioning/provisioner.go:407,
		// scheduling/nodeclaim.go:385-391, scheduling/scheduler.go:765-778). The pod waits
		// for a slot; docs/commitments.md says so.
		update(d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })
		Eventually(func() []corev1.Pod { return pods(class) }).Should(HaveLen(3))
		Consistently(func(g Gomega) {
			g.Expect(rungsOf(nodeClaims(class))).To(Equal(map[string]int{reserved: 2}), "NodeClaims:\n%s", describe(nodeClaims(class)))
			pending := 0
			for _, p := range pods(class) {
				if p.Spec.NodeName == "" {
					pending++
				}
			}
			g.Expect(pending).To(Equal(1))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(launchesOf(spot)).To(BeEmpty(), "no spot launch while the reservation is full")
		Expect(launchesOf(onDemand)).To(BeEmpty(), "no on-demand launch while the reservation is full")
		deferred := time.Since(started)

		By("deleting a reserved node frees its slot in the account and in Karpenter, and the waiting pod takes it")
		var victim karpv1.NodeClaim
		for _, nc := range nodeClaims(class) {
			victim = nc
			break
		}
		Expect(cluster.Client.Delete(ctx, &victim)).To(Succeed())
		// The deleted node's pod and the waiting one want one slot: one of them gets it, and
		// the other waits again.
		Eventually(func(g Gomega) {
			claims := nodeClaims(class)
			g.Expect(rungsOf(claims)).To(Equal(map[string]int{reserved: 2}), "NodeClaims:\n%s", describe(claims))
			for _, nc := range claims {
				g.Expect(nc.Name).NotTo(Equal(victim.Name))
				g.Expect(nc.Labels).To(HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeReserved))
			}
		}).Should(Succeed())
		expectRunning(class, 2)
		Expect(cluster.Cloud.CapacityReservation(crID).Available).To(BeZero())
		Expect(launchesOf(spot)).To(BeEmpty())

		AddReportEntry("FIGURES reserved first", fmt.Sprintf("weights %v; 2 reserved nodes in %s after %s; a third pod waited with no launch on any rung for 20 s (until %s); the freed slot reused after %s; launches of the reserved rung %d, of the others 0\n%s",
			weights, crID, firstTwo.Round(time.Second), deferred.Round(time.Second), time.Since(started).Round(time.Second), len(launchesOf(reserved)), describe(nodeClaims(class))))
	})
})

// rungWeights are the class's NodePools' weights by name.
func rungWeights(g Gomega, class string) map[string]int32 {
	pools := &karpv1.NodePoolList{}
	g.Expect(cluster.Client.List(ctx, pools, client.MatchingLabels{labelClass: class})).To(Succeed())
	out := map[string]int32{}
	for _, np := range pools.Items {
		out[np.Name] = ptr.Deref(np.Spec.Weight, 0)
	}
	return out
}

// launchesOf are the simulated account's launches for a NodePool (by Karpenter's launch
// tag) that launched an instance.
func launchesOf(nodePool string) []fakeec2.Launch {
	GinkgoHelper()
	var out []fakeec2.Launch
	for _, l := range cluster.Cloud.Launches() {
		if l.Tags[karpv1.NodePoolLabelKey] == nodePool && l.InstanceID != "" {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Compare(out[i].InstanceID, out[j].InstanceID) < 0 })
	return out
}

// The trap (aws/karpenter-provider-aws#8176, #9518): an open reservation a class's
// on-demand rung could use, and no reserved rung. Karpenter launches the rung with
// CapacityReservationPreference none, so the reservation stays unused (the simulated
// account, like EC2, would have put an open-preference launch into it), and `poolsmith
// lint` on the same manifests, given what describe-capacity-reservations prints, says so.
var _ = Describe("An open capacity reservation and a class with no reserved rung", func() {
	It("stays unused by the class's on-demand launches, and lint warns open-reservations-unused", func() {
		const class, base, crID = "open-trap", "e2e-open-trap", "cr-e2eopentrap01"
		cluster.Cloud.AddCapacityReservation(fakeec2.CapacityReservation{
			ID: crID, InstanceType: "im4gn.large", Zone: "us-east-1a", Count: 2, Match: ec2types.InstanceMatchCriteriaOpen,
		})
		b := baseline(base, "prod")
		wc := workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef.Name = base
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"im4gn"}}
			wc.Spec.Zones = []string{"us-east-1a"}
		})
		create(b, wc)
		expectClassReady(class)
		create(deployment(class, class, 1, "1"))
		expectRunning(class, 1)
		rung := class + "-on-demand-arm64"
		Eventually(func(g Gomega) {
			claims := nodeClaims(class)
			g.Expect(claims).To(HaveLen(1))
			g.Expect(claims[0].Labels).To(And(HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand),
				HaveKeyWithValue(corev1.LabelInstanceTypeStable, "im4gn.large"), HaveKeyWithValue(corev1.LabelTopologyZone, "us-east-1a")))
		}).Should(Succeed())
		launched := launchesOf(rung)
		Expect(launched).To(HaveLen(1))
		Expect(launched[0]).To(And(HaveField("Preference", "none"), HaveField("Reservation", "")), "launch %+v", launched[0])
		Expect(cluster.Cloud.CapacityReservation(crID).Available).To(Equal(2), "the open reservation is untouched")

		dir := GinkgoT().TempDir()
		objects := filepath.Join(dir, "classes.json")
		var docs []string
		for _, o := range manifests(b, wc) {
			docs = append(docs, string(o.Raw))
		}
		Expect(os.WriteFile(objects, []byte(strings.Join(docs, "\n---\n")), 0o600)).To(Succeed())
		reservations := filepath.Join(dir, "cr.json")
		Expect(os.WriteFile(reservations, cluster.Cloud.AWSCLI("describe-capacity-reservations"), 0o600)).To(Succeed())
		var stdout, stderr bytes.Buffer
		code := cli.Execute([]string{"lint", "-f", objects, "--capacity-reservations", reservations}, strings.NewReader(""), &stdout, &stderr)
		Expect(stderr.String()).NotTo(ContainSubstring("error:"))
		Expect(code).To(Equal(cli.ExitOK), "%s%s", stdout.String(), stderr.String())
		var trap []string
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.Contains(line, "open-reservations-unused") {
				trap = append(trap, line)
			}
		}
		Expect(trap).To(ConsistOf(And(ContainSubstring("WorkloadClass/"+class),
			ContainSubstring("open reservation "+crID+" (im4gn.large, us-east-1a, 2 available) stays billed and unused"))))
		AddReportEntry("FIGURES open-reservation trap", fmt.Sprintf("launch preference %q, reservation %q; %s still has 2 of 2 available; lint: %s",
			launched[0].Preference, launched[0].Reservation, crID, trap[0]))
	})
})
