package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// signalsConfigMap is the signals ConfigMap with m7g.large and m7i.large priced 5% apart
// and the given advisor ranges (0 <5% ... 4 >20%).
func signalsConfigMap(m7gRange, m7iRange int, fetchedAt time.Time) *corev1.ConfigMap {
	feed := fmt.Sprintf(`{"ranges":[{"index":0,"label":"<5%%","max":5},{"index":1,"label":"5-10%%","max":11},{"index":2,"label":"10-15%%","max":16},{"index":3,"label":"15-20%%","max":22},{"index":4,"label":">20%%","max":100}],
"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":60,"r":%d},"m7i.large":{"s":60,"r":%d}}}}}`, m7gRange, m7iRange)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: operator.DefaultSignalsConfigMap.Name, Namespace: operator.DefaultSignalsConfigMap.Namespace,
			Annotations: map[string]string{signals.FetchedAtAnnotation: fetchedAt.UTC().Format(time.RFC3339)},
		},
		Data: map[string]string{
			signals.AdvisorKey: feed,
			signals.PricesKey:  `{"m7g.large": {"onDemand": 0.08, "spot": 0.050}, "m7i.large": {"onDemand": 0.1, "spot": 0.0525}}`,
		},
	}
}

func weightsOf(class string) func() string {
	return func() string {
		return fmt.Sprintf("m7g=%d m7i=%d",
			*get(&karpv1.NodePool{}, class+"-spot-arm64-m7g-large").Spec.Weight,
			*get(&karpv1.NodePool{}, class+"-spot-amd64-m7i-large").Spec.Weight)
	}
}

// catalogWeights are a class's weights without signals, as render gives them from the
// embedded catalog: what the controller falls back to.
func catalogWeights(class string) string {
	cat, err := catalog.Load()
	Expect(err).NotTo(HaveOccurred())
	res, err := render.Render(get(&v1alpha1.Baseline{}, class), get(&v1alpha1.WorkloadClass{}, class), render.Options{Catalog: cat, Region: catalog.DefaultRegion})
	Expect(err).NotTo(HaveOccurred())
	byName := map[string]int32{}
	for _, r := range res.Rungs {
		byName[r.Name] = r.Weight
	}
	return fmt.Sprintf("m7g=%d m7i=%d", byName[class+"-spot-arm64-m7g-large"], byName[class+"-spot-amd64-m7i-large"])
}

var _ = Describe("Spot signals", Ordered, func() {
	const class = "signals"

	BeforeAll(func() {
		ensureSignalsNamespace()
		create(newBaseline(class), newClass(class, class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Consistency = v1alpha1.ConsistencyType
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64}
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Types: []string{"m7g.large", "m7i.large"}}
		}), newClass("signals-static", class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic}
		}))
	})

	It("reports Missing without the ConfigMap, and nothing for a Static class", func() {
		Eventually(condition(class, v1alpha1.ConditionSignalsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonMissing))
		Expect(condition(class, v1alpha1.ConditionSignalsCurrent)().Message).To(ContainSubstring("ConfigMap poolsmith-system/poolsmith-signals not found"))
		waitSynced("signals-static")
		Expect(condition("signals-static", v1alpha1.ConditionSignalsCurrent)()).To(BeNil())
	})

	It("re-weighs rungs when the signals change, without a restart", func() {
		cm := signalsConfigMap(4, 0, time.Now()) // m7g cheaper but >20%; m7i <5%
		create(cm)
		Eventually(condition(class, v1alpha1.ConditionSignalsCurrent)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonFresh))
		Eventually(weightsOf(class)).Should(Equal("m7g=99 m7i=100"))
		Expect(get(&v1alpha1.WorkloadClass{}, class).Status.NodePools[0].Reason).To(ContainSubstring("interruption"))

		updated := signalsConfigMap(0, 4, time.Now()) // now m7g is the stable one
		cm.Data = updated.Data
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(weightsOf(class)).Should(Equal("m7g=100 m7i=99"))
	})

	It("prices spot at on-demand x (1 - savings) from the advisor and names the source in status", func() {
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm)).To(Succeed())
		// No overrides: m7i.large at 70% off is now cheaper per vCPU than m7g.large at 40% off.
		cm.Data = map[string]string{signals.AdvisorKey: `{"ranges":[{"index":0,"label":"<5%"}],
"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":40,"r":0},"m7i.large":{"s":70,"r":0}}}}}`}
		now := time.Now().UTC()
		cm.Annotations[signals.FetchedAtAnnotation] = now.Format(time.RFC3339)
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(weightsOf(class)).Should(Equal("m7g=99 m7i=100"))
		advisor := "advisor " + now.Format(time.DateOnly)
		Eventually(func() []string {
			var sources []string
			for _, r := range get(&v1alpha1.WorkloadClass{}, class).Status.NodePools {
				sources = append(sources, r.PriceSources)
			}
			return sources
		}).Should(Equal([]string{"spot: " + advisor + " (1)", "spot: " + advisor + " (1)"}))
		Expect(get(&v1alpha1.WorkloadClass{}, class).Status.NodePools[0].Reason).To(ContainSubstring("spot (" + advisor + ")"))
	})

	It("falls back to the catalog and says so when the signals are stale", func() {
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm)).To(Succeed())
		cm.Annotations[signals.FetchedAtAnnotation] = time.Now().Add(-10 * 24 * time.Hour).UTC().Format(time.RFC3339)
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(condition(class, v1alpha1.ConditionSignalsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonStale))
		Expect(condition(class, v1alpha1.ConditionSignalsCurrent)().Message).To(ContainSubstring("weights use the embedded catalog"))
	})

	It("does not believe a fetched-at in the future: Stale, with the embedded catalog's weights", func() {
		fallback := catalogWeights(class)
		// Fresh signals that order the rungs the other way, so the fallback is visible.
		fresh, m7gRange, m7iRange := "m7g=100 m7i=99", 0, 4
		if fallback == fresh {
			fresh, m7gRange, m7iRange = "m7g=99 m7i=100", 4, 0
		}
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm)).To(Succeed())
		want := signalsConfigMap(m7gRange, m7iRange, time.Now())
		cm.Data, cm.Annotations = want.Data, want.Annotations
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(condition(class, v1alpha1.ConditionSignalsCurrent)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonFresh))
		Eventually(weightsOf(class)).Should(Equal(fresh))

		cm.Annotations[signals.FetchedAtAnnotation] = "2999-01-01T00:00:00Z"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(condition(class, v1alpha1.ConditionSignalsCurrent)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonStale))
		Expect(condition(class, v1alpha1.ConditionSignalsCurrent)().Message).To(ContainSubstring("fetched at 2999-01-01T00:00:00Z, which is in the future"))
		Eventually(weightsOf(class)).Should(Equal(fallback))
	})

	It("refuses an absurd price override, naming the type, and prints no unbounded figure", func() {
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, operator.DefaultSignalsConfigMap, cm)).To(Succeed())
		cm.Annotations[signals.FetchedAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
		cm.Data[signals.PricesKey] = `{"m7g.large": {"onDemand": 0.08, "spot": 1.7e308}, "m7i.large": {"onDemand": -0.1}}`
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(func() string { return condition(class, v1alpha1.ConditionSignalsCurrent)().Message }).Should(
			ContainSubstring("m7g.large spot 1.7e+308 is above $1000 per hour; m7i.large onDemand -0.1 is negative"))
		Expect(condition(class, v1alpha1.ConditionSignalsCurrent)()).To(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonMissing))
		Eventually(weightsOf(class)).Should(Equal(catalogWeights(class)))
		for _, r := range get(&v1alpha1.WorkloadClass{}, class).Status.NodePools {
			Expect(r.Reason).NotTo(MatchRegexp(`\d{12}`))
		}
	})

	It("reports Missing for a region the catalog has no prices for", func() {
		s := &signals.Provider{ConfigMap: types.NamespacedName{Namespace: "poolsmith-system", Name: "poolsmith-signals"}, Region: "ap-south-9", MaxAge: time.Hour}
		_, fresh, err := s.Catalog(ctx, env.Client)
		Expect(err).NotTo(HaveOccurred())
		Expect(fresh.Reason).To(Equal(v1alpha1.ReasonMissing))
		Expect(fresh.Message).To(ContainSubstring("no prices for region ap-south-9"))
	})
})
