package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// commitmentDwell is the suite manager's --commitment-open-dwell.
const commitmentDwell = 3 * time.Second

// withWorkedExamplePlan declares docs/commitments.md's Savings Plan: EC2Instance m7g
// us-east-1, $3.00/h, 31 % off m7g, this cluster's share 40 % ($1.20/h), half of it
// allocated to team api.
func withWorkedExamplePlan(b *v1alpha1.Baseline) *v1alpha1.Baseline {
	end := metav1.NewTime(time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second))
	b.Spec.Commitments = &v1alpha1.Commitments{
		SavingsPlans: []v1alpha1.SavingsPlan{{
			ID: "sp-0a1b2c3d", Type: v1alpha1.SavingsPlanEC2Instance, Commitment: "3.00", Family: "m7g", Region: "us-east-1",
			Discount: &v1alpha1.Discount{Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: "31%"}}},
			End:      &end, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)},
		}},
		Allocations: []v1alpha1.CommitmentAllocation{{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTeam: "api"}}, Percent: 50}},
	}
	return b
}

// workedExampleClass is the docs' class: arm64, spot then on-demand, one rung per type of
// m7g.xlarge and c7g.xlarge, the default RiskAdjustedCost, of team.
func workedExampleClass(name, baseline, team string) *v1alpha1.WorkloadClass {
	return newClass(name, baseline, func(wc *v1alpha1.WorkloadClass) {
		wc.Labels = map[string]string{v1alpha1.LabelTeam: team}
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
		wc.Spec.Consistency = v1alpha1.ConsistencyType
		wc.Spec.Instances = &v1alpha1.InstanceShape{Types: []string{"m7g.xlarge", "c7g.xlarge"}}
	})
}

// rungWeights are the class's NodePools' weights, by rung suffix (the part after the class).
func rungWeights(class string) func() map[string]int32 {
	return func() map[string]int32 {
		list := &karpv1.NodePoolList{}
		Expect(env.Client.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: class})).To(Succeed())
		out := map[string]int32{}
		for _, np := range list.Items {
			if np.Spec.Weight != nil {
				out[np.Name[len(class)+1:]] = *np.Spec.Weight
			}
		}
		return out
	}
}

// The worked example's weights, with the plan Open and without it (or Exhausted).
var (
	workedOpen = map[string]int32{"on-demand-arm64-m7g-xlarge": 100, "spot-arm64-c7g-xlarge": 99, "spot-arm64-m7g-xlarge": 98, "on-demand-arm64-c7g-xlarge": 97}
	workedList = map[string]int32{"spot-arm64-c7g-xlarge": 100, "spot-arm64-m7g-xlarge": 99, "on-demand-arm64-c7g-xlarge": 98, "on-demand-arm64-m7g-xlarge": 97}
)

// classCommitment is the class's status.commitments entry for id.
func classCommitment(class, id string) func() v1alpha1.ClassCommitmentStatus {
	return func() v1alpha1.ClassCommitmentStatus {
		wc := &v1alpha1.WorkloadClass{}
		if env.Client.Get(ctx, client.ObjectKey{Name: class}, wc) != nil {
			return v1alpha1.ClassCommitmentStatus{}
		}
		for _, c := range wc.Status.Commitments {
			if c.ID == id {
				return c
			}
		}
		return v1alpha1.ClassCommitmentStatus{}
	}
}

// launchOnDemand plays Karpenter launching a NodeClaim of instanceType on the class's rung.
func launchOnDemand(class, rung, instanceType string) *karpv1.NodeClaim {
	nc := newNodeClaim(class, class+"-"+rung)
	nc.Labels[corev1.LabelInstanceTypeStable] = instanceType
	nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
	nc.Labels[corev1.LabelTopologyZone] = "us-east-1a"
	create(nc)
	return nc
}

func figures(c v1alpha1.ClassCommitmentStatus) string {
	return fmt.Sprintf("%s used %s of %s (%s) nodes %d", c.State, c.Used, c.Entitlement, c.UsedRatio, c.Nodes)
}

var _ = Describe("Commitments in the manager", func() {
	It("rank the worked example's rungs by the Savings Plan while it has room, and at list once five nodes exhaust it", func() {
		create(withWorkedExamplePlan(newBaseline("commit-sp")), workedExampleClass("commit-api", "commit-sp", "api"))
		waitSynced("commit-api")
		Eventually(rungWeights("commit-api")).Should(Equal(workedOpen))
		c := classCommitment("commit-api", "sp-0a1b2c3d")()
		Expect(figures(c)).To(Equal("Open used $0.0000/h of $0.6000/h (0.000) nodes 0"))
		Expect(c.Kind).To(Equal(v1alpha1.CommitmentKindSavingsPlan))
		Expect(c.Rungs).To(ConsistOf("commit-api-on-demand-arm64-m7g-xlarge"))
		Expect(condition("commit-api", v1alpha1.ConditionCommitmentsCurrent)()).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCommitmentsCurrent))
		wc := get(&v1alpha1.WorkloadClass{}, "commit-api")
		for _, np := range wc.Status.NodePools {
			if np.Name == "commit-api-on-demand-arm64-m7g-xlarge" {
				Expect(np.Commitment).To(Equal("sp-0a1b2c3d"))
				Expect(np.Reason).To(ContainSubstring("Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1) has room for class commit-api (entitlement $0.6000/h, Open since"))
			}
		}
		Expect(gauge("poolsmith_commitment_used_ratio", map[string]string{"baseline": "commit-sp", "commitment": "sp-0a1b2c3d", "class": "commit-api"})).To(BeZero())
		Expect(gauge("poolsmith_commitment_open", map[string]string{"class": "commit-api", "commitment": "sp-0a1b2c3d"})).To(Equal(1.0))

		// docs/commitments.md's table, one node at a time: each m7g.xlarge draws $0.112608/h.
		rows := []string{
			"Open used $0.1126/h of $0.6000/h (0.188) nodes 1",
			"Open used $0.2252/h of $0.6000/h (0.375) nodes 2",
			"Open used $0.3378/h of $0.6000/h (0.563) nodes 3",
			"Open used $0.4504/h of $0.6000/h (0.751) nodes 4",
			"Exhausted used $0.5630/h of $0.6000/h (0.938) nodes 5",
		}
		var nodes []*karpv1.NodeClaim
		for i, row := range rows {
			nodes = append(nodes, launchOnDemand("commit-api", "on-demand-arm64-m7g-xlarge", "m7g.xlarge"))
			Eventually(func() string { return figures(classCommitment("commit-api", "sp-0a1b2c3d")()) }).Should(Equal(row), "after node %d", i+1)
			if i < 4 {
				Expect(rungWeights("commit-api")()).To(Equal(workedOpen), "after node %d", i+1)
			}
		}
		Eventually(rungWeights("commit-api")).Should(Equal(workedList))
		Expect(gauge("poolsmith_commitment_used_ratio", map[string]string{"class": "commit-api"})).To(BeNumerically("~", 0.56304/0.6, 1e-6))
		Expect(gauge("poolsmith_commitment_open", map[string]string{"class": "commit-api"})).To(BeZero())
		Eventually(classEvents("commit-api", "CommitmentExhausted")).Should(Equal(1))
		// The covered rung keeps consolidating only when empty, whatever the state.
		np := get(&karpv1.NodePool{}, "commit-api-on-demand-arm64-m7g-xlarge")
		Expect(np.Spec.Disruption.ConsolidationPolicy).To(Equal(karpv1.ConsolidationPolicyWhenEmpty))

		// Scale-in: at 4 nodes the room ($0.149568) is under two nodes, so it stays
		// Exhausted with nothing pending.
		Expect(env.Client.Delete(ctx, nodes[4])).To(Succeed())
		Eventually(func() string { return figures(classCommitment("commit-api", "sp-0a1b2c3d")()) }).Should(Equal("Exhausted used $0.4504/h of $0.6000/h (0.751) nodes 4"))
		Consistently(func() *metav1.Time { return classCommitment("commit-api", "sp-0a1b2c3d")().OpenPendingSince }, commitmentDwell+time.Second).Should(BeNil())
		Expect(rungWeights("commit-api")()).To(Equal(workedList))
		// At 3 it has two nodes of room: pending, then Open once that held for the dwell.
		Expect(env.Client.Delete(ctx, nodes[3])).To(Succeed())
		Eventually(func() *metav1.Time { return classCommitment("commit-api", "sp-0a1b2c3d")().OpenPendingSince }).ShouldNot(BeNil())
		pending := classCommitment("commit-api", "sp-0a1b2c3d")().OpenPendingSince
		Eventually(rungWeights("commit-api"), 2*commitmentDwell+10*time.Second).Should(Equal(workedOpen))
		// The status is written after the NodePools, in the same pass.
		Eventually(func() string { return figures(classCommitment("commit-api", "sp-0a1b2c3d")()) }).Should(Equal("Open used $0.3378/h of $0.6000/h (0.563) nodes 3"))
		c = classCommitment("commit-api", "sp-0a1b2c3d")()
		Expect(c.OpenPendingSince).To(BeNil())
		Expect(c.Since.Sub(pending.Time)).To(BeNumerically(">=", commitmentDwell), "opened before the dwell")
		Eventually(classEvents("commit-api", "CommitmentOpen")).Should(Equal(1))
	})

	It("report an expired plan and rank with the others, never stalling the class", func() {
		create(withWorkedExamplePlan(newBaseline("commit-expired")), workedExampleClass("commit-exp", "commit-expired", "api"))
		waitSynced("commit-exp")
		b := get(&v1alpha1.Baseline{}, "commit-expired")
		past := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		// An update is admitted (CEL has no clock; the create-time policy does not judge it).
		b.Spec.Commitments.SavingsPlans = append(b.Spec.Commitments.SavingsPlans, v1alpha1.SavingsPlan{
			ID: "sp-expired", Type: v1alpha1.SavingsPlanCompute, Commitment: "10.00", End: &past,
			Discount: &v1alpha1.Discount{Default: "50%"}, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](100)}})
		Expect(env.Client.Update(ctx, b)).To(Succeed())
		Eventually(condition("commit-exp", v1alpha1.ConditionCommitmentsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonCommitmentExpired))
		Expect(condition("commit-exp", v1alpha1.ConditionCommitmentsCurrent)().Message).To(ContainSubstring("spec.commitments.savingsPlans[1].end: " + past.UTC().Format(time.RFC3339) + " is past"))
		Expect(condition("commit-exp", v1alpha1.ConditionSynced)()).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonApplied))
		// Left out: a Compute plan at 50 % would put on-demand c7g above spot too.
		Consistently(rungWeights("commit-exp")).Should(Equal(workedOpen))
		wc := get(&v1alpha1.WorkloadClass{}, "commit-exp")
		Expect(wc.Status.Commitments).To(HaveLen(1))
		Expect(wc.Status.Commitments[0].ID).To(Equal("sp-0a1b2c3d"))
		// The Baseline names it too, at once (a change of its condition is not held).
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(get(&v1alpha1.Baseline{}, "commit-expired").Status.Conditions, v1alpha1.ConditionCommitmentsCurrent)
		}).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonCommitmentExpired))
		var leftOut []string
		for _, s := range get(&v1alpha1.Baseline{}, "commit-expired").Status.Commitments {
			leftOut = append(leftOut, s.ID+": "+s.LeftOut)
		}
		Expect(leftOut).To(ConsistOf("sp-0a1b2c3d: ", "sp-expired: spec.commitments.savingsPlans[1].end: "+past.UTC().Format(time.RFC3339)+" is past"))
	})

	It("give each team its own part: another team's classes and nodes change neither its share nor its weights", func() {
		web1 := workedExampleClass("commit-web-1", "commit-teams", "web")
		// Between what web's six nodes cost at list ($0.9792/h) and at their effective
		// price ($0.8893/h): the budget is judged on the effective one.
		web1.Spec.Budget = &v1alpha1.Budget{PerHour: "0.90", Mode: v1alpha1.BudgetWarn}
		create(withWorkedExamplePlan(newBaseline("commit-teams")), workedExampleClass("commit-team-api", "commit-teams", "api"), web1)
		waitSynced("commit-team-api")
		waitSynced("commit-web-1")
		Eventually(func() string { return classCommitment("commit-web-1", "sp-0a1b2c3d")().Entitlement }).Should(Equal("$0.6000/h"))
		// Team web adds classes: they split web's half, not api's.
		create(workedExampleClass("commit-web-2", "commit-teams", "web"), workedExampleClass("commit-web-3", "commit-teams", "web"))
		for _, name := range []string{"commit-web-1", "commit-web-2", "commit-web-3"} {
			Eventually(func() string { return classCommitment(name, "sp-0a1b2c3d")().Entitlement }).Should(Equal("$0.2000/h"), name)
		}
		Expect(classCommitment("commit-team-api", "sp-0a1b2c3d")().Entitlement).To(Equal("$0.6000/h"))
		// Web launches six covered nodes: its own part is exhausted, api's is untouched.
		for range 6 {
			launchOnDemand("commit-web-1", "on-demand-arm64-m7g-xlarge", "m7g.xlarge")
		}
		Eventually(func() string { return figures(classCommitment("commit-web-1", "sp-0a1b2c3d")()) }).Should(Equal("Exhausted used $0.2000/h of $0.2000/h (1.000) nodes 2"))
		Eventually(rungWeights("commit-web-1")).Should(Equal(workedList))
		// Cost: node 1 drawn whole ($0.112608), node 2 for $0.087392 and its rest at list,
		// nodes 3 to 6 at list: $0.2000 + 0.2239 x 0.1632 + 4 x 0.1632 = $0.8893/h.
		Eventually(func() string {
			c := get(&v1alpha1.WorkloadClass{}, "commit-web-1").Status.Cost
			if c == nil {
				return ""
			}
			return fmt.Sprintf("list %s effective %s unused %s", c.PerHour, c.EffectivePerHour, c.UnusedEntitlementPerHour)
		}, 20*time.Second).Should(Equal("list 0.9792 effective 0.8893 unused 0.0000"))
		Eventually(condition("commit-web-1", v1alpha1.ConditionBudgetExceeded)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonUnderBudget))
		Consistently(condition("commit-web-1", v1alpha1.ConditionBudgetExceeded)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonUnderBudget))
		api := get(&v1alpha1.WorkloadClass{}, "commit-team-api").Status.Cost
		if api != nil { // no NodeClaim: the cost controller may write none
			Expect(api.UnusedEntitlementPerHour).To(Or(BeEmpty(), Equal("0.6000")))
		}
		Consistently(func() string { return figures(classCommitment("commit-team-api", "sp-0a1b2c3d")()) }).Should(Equal("Open used $0.0000/h of $0.6000/h (0.000) nodes 0"))
		Expect(rungWeights("commit-team-api")()).To(Equal(workedOpen))
		// The Baseline's pooled figure counts every class's nodes against the cluster's
		// share, as the bill would: web's six nodes use more than web's part.
		Eventually(func() string {
			b := get(&v1alpha1.Baseline{}, "commit-teams")
			if len(b.Status.Commitments) != 1 {
				return fmt.Sprint(b.Status.Commitments)
			}
			s := b.Status.Commitments[0]
			return fmt.Sprintf("%s %s used %s of %s (%s) nodes %d", s.ID, s.Kind, s.Used, s.Share, s.UsedRatio, s.Nodes)
		}, 10*time.Second).Should(Equal("sp-0a1b2c3d SavingsPlan used $0.6756/h of $1.2000/h (0.563) nodes 6"))
		Expect(gauge("poolsmith_commitment_used_ratio", map[string]string{"baseline": "commit-teams", "commitment": "sp-0a1b2c3d", "class": ""})).To(BeNumerically("~", 6*0.112608/1.2, 1e-6))
		Expect(gauge("poolsmith_commitment_end_timestamp_seconds", map[string]string{"baseline": "commit-teams", "commitment": "sp-0a1b2c3d"})).To(BeNumerically(">", float64(time.Now().Unix())))
		Expect(meta.FindStatusCondition(get(&v1alpha1.Baseline{}, "commit-teams").Status.Conditions, v1alpha1.ConditionCommitmentsCurrent)).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCommitmentsCurrent))
	})
})
