package controllers_test

import (
	"encoding/json"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// workedExampleExport is what `poolsmith signals commitments` writes for the worked
// example's plan: EC2Instance m7g us-east-1, $3.0/h, AWS's rate for m7g.xlarge.
func workedExampleExport() string {
	start, end := time.Now().Add(-30*24*time.Hour).UTC().Truncate(time.Second), time.Now().Add(335*24*time.Hour).UTC().Truncate(time.Second)
	data, err := json.Marshal(signals.CommitmentFacts{ExportedAt: time.Now().UTC().Truncate(time.Second), Region: "us-east-1",
		SavingsPlans: []signals.SavingsPlanFacts{{ID: "sp-0a1b2c3d", Type: "EC2Instance", Commitment: "3.0", Family: "m7g", Region: "us-east-1",
			State: "active", Start: &start, End: &end, Rates: map[string]string{"m7g.xlarge": "0.112608"}}}})
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// setExport sets the signals ConfigMap's commitments.json (creating the ConfigMap and its
// namespace when absent) and undoes it when the spec ends, so the spot signals specs find
// the ConfigMap as they left it.
func setExport(doc string) {
	ensureSignalsNamespace()
	cm := &corev1.ConfigMap{}
	switch err := env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm); {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: operator.DefaultSignalsConfigMap.Name, Namespace: operator.DefaultSignalsConfigMap.Namespace},
			Data: map[string]string{signals.CommitmentsKey: doc}}
		create(cm)
		DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cm))).To(Succeed()) })
	default:
		Expect(err).NotTo(HaveOccurred())
		_, had := cm.Data[signals.CommitmentsKey]
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[signals.CommitmentsKey] = doc
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		if !had {
			DeferCleanup(func() { updateExport(nil) })
		}
	}
}

// ensureSignalsNamespace creates the signals ConfigMap's namespace unless a spec already
// did (envtest never removes a namespace, and the specs run in any order).
func ensureSignalsNamespace() {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.DefaultSignalsConfigMap.Namespace}}); err != nil {
		ExpectWithOffset(1, apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
	}
}

// updateExport replaces commitments.json, or removes it (nil).
func updateExport(doc *string) {
	cm := &corev1.ConfigMap{}
	Expect(env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm)).To(Succeed())
	if doc == nil {
		delete(cm.Data, signals.CommitmentsKey)
	} else {
		cm.Data[signals.CommitmentsKey] = *doc
	}
	Expect(env.Client.Update(ctx, cm)).To(Succeed())
}

// markReady plays Karpenter reporting the class's EC2NodeClass and NodePools ready.
func markReady(class string) {
	setKarpenterConditions(get(&awsv1.EC2NodeClass{}, class), ready(metav1.ConditionTrue, ""))
	list := &karpv1.NodePoolList{}
	Expect(env.Client.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: class})).To(Succeed())
	for i := range list.Items {
		setKarpenterConditions(&list.Items[i], ready(metav1.ConditionTrue, ""))
	}
	Eventually(condition(class, v1alpha1.ConditionReady)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAllReady))
}

var _ = Describe("Commitments from the signals' commitments.json", func() {
	It("rank a Baseline naming only id and share as the declared plan, and a corrupt export stalls nothing", func() {
		setExport(workedExampleExport())
		b := newBaseline("commit-export")
		b.Spec.Commitments = &v1alpha1.Commitments{
			SavingsPlans: []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}}},
			Allocations:  []v1alpha1.CommitmentAllocation{{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTeam: "api"}}, Percent: 50}},
		}
		create(b, workedExampleClass("commit-export-api", "commit-export", "api"),
			withWorkedExamplePlan(newBaseline("commit-declared")), workedExampleClass("commit-declared-api", "commit-declared", "api"))

		// The export's facts rank the class exactly as the declared plan ranks the other.
		Eventually(rungWeights("commit-export-api")).Should(Equal(workedOpen))
		Eventually(rungWeights("commit-declared-api")).Should(Equal(workedOpen))
		Eventually(condition("commit-export-api", v1alpha1.ConditionCommitmentsCurrent)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCommitmentsCurrent))
		Eventually(func() string { return figures(classCommitment("commit-export-api", "sp-0a1b2c3d")()) }).Should(Equal("Open used $0.0000/h of $0.6000/h (0.000) nodes 0"))
		markReady("commit-declared-api")

		// A corrupt export: the class that needs it reports why and ranks at list; the class
		// whose Baseline declares its facts is untouched.
		corrupt := `{"exportedAt": "2026-12-02T12:00:00Z", "savingsPlans": [{"id": "sp-0a1b2c3d", "type": "EC2Instance", "commitment": "-3"`
		updateExport(&corrupt)
		Eventually(condition("commit-export-api", v1alpha1.ConditionCommitmentsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonCommitmentExportInvalid))
		Expect(condition("commit-export-api", v1alpha1.ConditionCommitmentsCurrent)().Message).To(ContainSubstring(
			"spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts in the Baseline, and the signals' commitments.json cannot be read: ConfigMap poolsmith-system/poolsmith-signals: commitments.json: not Poolsmith's commitments document"))
		Expect(condition("commit-export-api", v1alpha1.ConditionSynced)()).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonApplied))
		Eventually(rungWeights("commit-export-api")).Should(Equal(workedList))
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(get(&v1alpha1.Baseline{}, "commit-export").Status.Conditions, v1alpha1.ConditionCommitmentsCurrent)
		}).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonCommitmentExportInvalid))
		Consistently(func(g Gomega) {
			g.Expect(condition("commit-declared-api", v1alpha1.ConditionReady)()).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAllReady))
			g.Expect(condition("commit-declared-api", v1alpha1.ConditionCommitmentsCurrent)()).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCommitmentsCurrent))
			g.Expect(rungWeights("commit-declared-api")()).To(Equal(workedOpen))
		}).WithTimeout(3 * time.Second).Should(Succeed())

		// No export: the id has facts nowhere.
		updateExport(nil)
		Eventually(condition("commit-export-api", v1alpha1.ConditionCommitmentsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonCommitmentUnresolved))
		Expect(condition("commit-export-api", v1alpha1.ConditionCommitmentsCurrent)().Message).To(ContainSubstring(
			"spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts in the Baseline or the signals' commitments.json"))
	})
})
