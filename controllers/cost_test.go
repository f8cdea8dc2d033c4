package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
)

// gauge reads one series of a gauge, failing when it is absent.
func gauge(name string, labels map[string]string) float64 {
	v, ok := series(name, labels)
	ExpectWithOffset(1, ok).To(BeTrue(), "no series %s%v", name, labels)
	return v
}

// series reads one series of a gauge; ok is false when it is absent.
func series(name string, labels map[string]string) (float64, bool) {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Karpenter's part (launching NodeClaims: their type, zone and capacity type labels, node
// and allocatable) and the scheduler's (a pod bound to a node) are played here.
var _ = Describe("Cost controller", func() {
	It("prices each NodeClaim from the catalog, with the fallback premium, the idle part and a month to date kept in status", func() {
		create(newBaseline("cost"), newClass("cost", "cost", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic}
		}))
		waitSynced("cost")
		cat, err := catalog.Load()
		Expect(err).NotTo(HaveOccurred())
		m7 := cat.Prices[catalog.DefaultRegion]["m7i.large"]
		Expect(m7.SpotAvg).To(BeNumerically(">", 0))

		launch := func(pool, capacityType, node string) *karpv1.NodeClaim {
			nc := newNodeClaim("cost", pool)
			nc.Labels[corev1.LabelInstanceTypeStable] = "m7i.large"
			nc.Labels[karpv1.CapacityTypeLabelKey] = capacityType
			nc.Labels[corev1.LabelTopologyZone] = "us-east-1a"
			create(nc)
			nc.Status.NodeName = node
			nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("2"), corev1.ResourceMemory: resourceQuantity("8Gi")}
			Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())
			return nc
		}
		spot := launch("cost-spot-amd64", karpv1.CapacityTypeSpot, "cost-node-spot")
		onDemand := launch("cost-on-demand-amd64", karpv1.CapacityTypeOnDemand, "")
		pending := newNodeClaim("cost", "cost-spot-amd64")
		create(pending)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cost", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "cost-node-spot", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: cpu(1)}}}}}
		create(pod)
		DeferCleanup(func() {
			for _, o := range []client.Object{spot, onDemand, pending, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "cost"}}} {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o))).To(Succeed())
			}
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		costOf := func() *v1alpha1.CostStatus { return get(&v1alpha1.WorkloadClass{}, "cost").Status.Cost }

		By("the cost is the sum of the NodeClaims' catalog prices, each at its capacity type")
		// The spot node's pod requests half its CPU; the on-demand NodeClaim has no node yet,
		// so all of it is idle.
		// Writes of one class's status.cost are suiteCostMinWrite apart at least: the two
		// launches may need two.
		Eventually(costOf).Should(And(
			HaveField("PerHour", cost.Money(m7.SpotAvg+m7.OnDemand)),
			HaveField("FallbackPremiumPerHour", cost.Money(m7.OnDemand-m7.SpotAvg)),
			HaveField("IdlePerHour", cost.Money(m7.SpotAvg*0.5+m7.OnDemand)),
			HaveField("Unpriced", "not launched yet: "+pending.Name),
			HaveField("Month", cost.Month(time.Now()))))
		// Accrued from the first write on: seconds at most.
		Expect(cost.ParseMoney(costOf().MonthToDate)).To(BeNumerically("<", (m7.SpotAvg+m7.OnDemand)/60))
		source := cat.Source(catalog.SourceCatalog) + " (1)"
		Expect(costOf().Rungs).To(Equal([]v1alpha1.RungCost{
			{Rung: "cost-spot-amd64", CapacityType: "spot", Nodes: 1, PerHour: cost.Money(m7.SpotAvg), IdlePerHour: cost.Money(m7.SpotAvg * 0.5), PriceSources: source},
			{Rung: "cost-on-demand-amd64", CapacityType: "on-demand", Nodes: 1, PerHour: cost.Money(m7.OnDemand), IdlePerHour: cost.Money(m7.OnDemand),
				FallbackPremiumPerHour: cost.Money(m7.OnDemand - m7.SpotAvg), PriceSources: source},
		}))

		By("the gauges carry the class, the rung and the capacity type")
		od := map[string]string{"class": "cost", "rung": "cost-on-demand-amd64", "capacity_type": "on-demand"}
		Expect(gauge("poolsmith_class_cost_per_hour", od)).To(BeNumerically("~", m7.OnDemand, 1e-9))
		Expect(gauge("poolsmith_class_nodes", od)).To(Equal(1.0))
		Expect(gauge("poolsmith_class_fallback_premium_per_hour", od)).To(BeNumerically("~", m7.OnDemand-m7.SpotAvg, 1e-9))
		Expect(gauge("poolsmith_class_idle_cost_per_hour", map[string]string{"class": "cost", "rung": "cost-spot-amd64", "capacity_type": "spot"})).To(BeNumerically("~", m7.SpotAvg*0.5, 1e-9))
		_, premiumOnPreferred := series("poolsmith_class_fallback_premium_per_hour", map[string]string{"class": "cost", "rung": "cost-spot-amd64"})
		Expect(premiumOnPreferred).To(BeFalse(), "the preferred rung has no premium series")

		By("the month to date is taken from status, so a restarted manager goes on from it")
		// As a manager that stopped an hour ago left it.
		wc := get(&v1alpha1.WorkloadClass{}, "cost")
		orig := wc.DeepCopy()
		hourAgo := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		if cost.Month(hourAgo.Time) != cost.Month(time.Now()) {
			Skip("the month turned in the last hour: the carried figure starts again at 0")
		}
		wc.Status.Cost.MonthToDate, wc.Status.Cost.AccumulatedAt = "5.0000", &hourAgo
		Expect(env.Client.Status().Patch(ctx, wc, client.MergeFrom(orig))).To(Succeed())
		// A NodeClaim event brings the class back before CostPeriod.
		Expect(env.Client.Delete(ctx, pending)).To(Succeed())
		Eventually(func() float64 { return cost.ParseMoney(costOf().MonthToDate) }).Should(
			BeNumerically("~", 5+(m7.SpotAvg+m7.OnDemand), (m7.SpotAvg+m7.OnDemand)/60))
		Expect(costOf().Unpriced).To(BeEmpty())

		By("NodeClaims gone, the class costs nothing and its series are removed")
		Expect(env.Client.Delete(ctx, spot)).To(Succeed())
		Expect(env.Client.Delete(ctx, onDemand)).To(Succeed())
		Eventually(costOf).Should(And(HaveField("PerHour", "0.0000"), HaveField("Rungs", BeEmpty())))
		_, present := series("poolsmith_class_cost_per_hour", map[string]string{"class": "cost"})
		Expect(present).To(BeFalse())
	})

	It("holds every rung at its usage while the class costs its budget, says so, and lifts the hold under it", func() {
		cat, err := catalog.Load()
		Expect(err).NotTo(HaveOccurred())
		m7 := cat.Prices[catalog.DefaultRegion]["m7i.large"]
		create(newBaseline("budget"), newClass("budget", "budget", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic}
			// Below one on-demand m7i.large.
			wc.Spec.Budget = &v1alpha1.Budget{PerHour: cost.Money(m7.OnDemand / 2)}
		}))
		waitSynced("budget")
		Expect(condition("budget", v1alpha1.ConditionBudgetExceeded)()).To(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonUnderBudget))
		held := corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("2"), corev1.ResourceMemory: resourceQuantity("8Gi")}
		np := get(&karpv1.NodePool{}, "budget-on-demand-amd64")
		np.Status.Resources = held
		Expect(env.Client.Status().Update(ctx, np)).To(Succeed())
		limits := func(name string) func() karpv1.Limits {
			return func() karpv1.Limits { return get(&karpv1.NodePool{}, name).Spec.Limits }
		}
		// No class limit and under the budget: the only limit is the CPU the budget buys. An
		// m7i.large's vCPUs cost m7.SpotAvg/2 each on spot, so the room holds no more of them
		// than the budget pays for.
		spotLimits := limits("budget-spot-amd64")()
		Expect(spotLimits).To(HaveLen(1), "only cpu: %v", spotLimits)
		spotCPU := spotLimits[corev1.ResourceCPU]
		Expect(spotCPU.AsApproximateFloat64()*m7.SpotAvg/2).To(BeNumerically("<=", m7.OnDemand/2), "cpu limit %s", spotCPU.String())

		By("a launched on-demand m7i.large reaches the budget: every rung is held at its usage")
		nc := newNodeClaim("budget", "budget-on-demand-amd64")
		nc.Labels[corev1.LabelInstanceTypeStable] = "m7i.large"
		nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
		create(nc)
		DeferCleanup(func() {
			for _, o := range []client.Object{nc, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "budget"}}} {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o))).To(Succeed())
			}
		})
		Eventually(condition("budget", v1alpha1.ConditionBudgetExceeded)).Should(And(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonBudgetHeld),
			HaveField("Message", ContainSubstring("cost $"+cost.Money(m7.OnDemand)+"/h, its budget is $"+cost.Money(m7.OnDemand/2)+"/h"))))
		Eventually(limits("budget-on-demand-amd64")).Should(Equal(karpv1.Limits(held)))
		Expect(limits("budget-spot-amd64")()).To(Equal(karpv1.Limits{corev1.ResourceCPU: resourceQuantity("0"), corev1.ResourceMemory: resourceQuantity("0")}))
		Expect(gauge("poolsmith_class_budget_exceeded", map[string]string{"class": "budget"})).To(Equal(1.0))
		Eventually(classEvents("budget", v1alpha1.ConditionBudgetExceeded)).Should(Equal(1))

		By("mode Warn reports the same cost and holds nothing")
		wc := get(&v1alpha1.WorkloadClass{}, "budget")
		wc.Spec.Budget.Mode = v1alpha1.BudgetWarn
		updateClass(wc)
		Eventually(condition("budget", v1alpha1.ConditionBudgetExceeded)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonBudgetWarned))
		Eventually(limits("budget-spot-amd64")).Should(BeEmpty())

		By("a budget above the cost lifts the hold")
		wc = get(&v1alpha1.WorkloadClass{}, "budget")
		wc.Spec.Budget = &v1alpha1.Budget{PerHour: cost.Money(m7.OnDemand * 2)}
		updateClass(wc)
		Eventually(condition("budget", v1alpha1.ConditionBudgetExceeded)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonUnderBudget))
		lifted := limits("budget-on-demand-amd64")()
		Expect(lifted).NotTo(HaveKey(corev1.ResourceMemory), "no longer held: %v", lifted)
		liftedCPU := lifted[corev1.ResourceCPU]
		Expect(liftedCPU.Cmp(resourceQuantity("2"))).To(Equal(1), "room above the rung's 2 CPUs for what the budget left buys: %v", lifted)
		Expect(gauge("poolsmith_class_budget_exceeded", map[string]string{"class": "budget"})).To(Equal(0.0))

		By("without a budget the condition and the series are gone")
		wc = get(&v1alpha1.WorkloadClass{}, "budget")
		wc.Spec.Budget = nil
		updateClass(wc)
		Eventually(condition("budget", v1alpha1.ConditionBudgetExceeded)).Should(BeNil())
		_, present := series("poolsmith_class_budget_exceeded", map[string]string{"class": "budget"})
		Expect(present).To(BeFalse())
	})
})
