package render_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// withAccess gives the class an access rule and a taint of its own.
func withAccess(namespaces ...string) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Taints = append(wc.Spec.Taints, taint("example.com/dedicated", wc.Name, corev1.TaintEffectNoSchedule))
		wc.Spec.Access = &v1alpha1.Access{
			Namespaces: namespaces,
			NamespaceSelector: &v1alpha1.NamespaceSelector{
				MatchLabels:      map[string]string{"example.com/team": "ml"},
				MatchExpressions: []v1alpha1.NamespaceSelectorRequirement{{Key: "example.com/tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"sandbox"}}},
			},
		}
	}
}

var _ = Describe("Access policies", func() {
	It("pass the in-process checks, and the API server stores them exactly as rendered (no default of its own to revert)", func() {
		crds, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		for _, p := range render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters) {
			doc, err := render.CleanJSON(p)
			Expect(err).NotTo(HaveOccurred())
			Expect(crds.Create(doc)).To(Succeed(), "in-process: %s", p.GetName())
			// testenv installs them as the chart does.
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(p.GetObjectKind().GroupVersionKind())
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: p.GetName()}, stored)).To(Succeed())
			live, err := render.CleanJSON(stored)
			Expect(err).NotTo(HaveOccurred())
			Expect(diff.Changes(doc, live)).To(BeEmpty(), "%s %s", stored.GetKind(), p.GetName())
			Expect(diff.Removed(doc["spec"].(map[string]any), live["spec"].(map[string]any))).To(BeEmpty(), "%s %s: the server added fields the render lacks", stored.GetKind(), p.GetName())
		}
	})

	It("take an AccessRule that passes a server-side dry run and the in-process validation", func() {
		res, err := render.Render(baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train", "ml-serve")), render.Options{})
		Expect(err).NotTo(HaveOccurred())
		crds, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		doc, err := render.CleanJSON(res.AccessRule())
		Expect(err).NotTo(HaveOccurred())
		Expect(crds.Create(doc)).To(Succeed())
		Expect(env.Client.Create(context.Background(), &unstructured.Unstructured{Object: doc}, client.DryRunAll)).To(Succeed())
	})

	It("are refused in-process when an expression does not compile, naming the field", func() {
		doc, err := render.CleanJSON(render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters)[0])
		Expect(err).NotTo(HaveOccurred())
		vals, _, _ := unstructured.NestedSlice(doc, "spec", "validations")
		vals[0].(map[string]any)["expression"] = "variables.selects &&"
		Expect(unstructured.SetNestedSlice(doc, vals, "spec", "validations")).To(Succeed())
		Expect(unstructured.SetNestedField(doc, "poolsmith-broken", "metadata", "name")).To(Succeed())
		crds, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		err = crds.Create(doc)
		Expect(err).To(MatchError(ContainSubstring("spec.validations[0].expression")))
		err = env.Client.Create(context.Background(), &unstructured.Unstructured{Object: doc}, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("spec.validations[0].expression")), "the API server refuses it too")
	})
})

// params is an AccessRule as the API server hands it to a policy.
func params(rule *v1alpha1.AccessRule) *unstructured.Unstructured {
	doc, err := render.CleanJSON(rule)
	Expect(err).NotTo(HaveOccurred())
	return &unstructured.Unstructured{Object: doc}
}

// The CEL test of a namespace against an access rule (the access policy's) and Go's
// Access.Admits (poolsmith lint's and the Access condition's) agree.
var _ = Describe("The access policy's namespace test", func() {
	It("agrees with Access.Admits", func() {
		vap := render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters)[0].(*admissionv1.ValidatingAdmissionPolicy)
		sel := func(labels map[string]string, exprs ...v1alpha1.NamespaceSelectorRequirement) *v1alpha1.NamespaceSelector {
			return &v1alpha1.NamespaceSelector{MatchLabels: labels, MatchExpressions: exprs}
		}
		req := func(key string, op metav1.LabelSelectorOperator, values ...string) v1alpha1.NamespaceSelectorRequirement {
			return v1alpha1.NamespaceSelectorRequirement{Key: key, Operator: op, Values: values}
		}
		accesses := []*v1alpha1.Access{
			{Namespaces: []string{"ml"}},
			{NamespaceSelector: sel(map[string]string{"team": "ml"})},
			{Namespaces: []string{"web"}, NamespaceSelector: sel(nil, req("tier", metav1.LabelSelectorOpNotIn, "sandbox"))},
			{NamespaceSelector: sel(nil, req("tier", metav1.LabelSelectorOpIn, "prod", "stage"), req("team", metav1.LabelSelectorOpExists))},
			{NamespaceSelector: sel(nil, req("sandbox", metav1.LabelSelectorOpDoesNotExist))},
		}
		namespaces := []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "sandbox"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "team-ml", Labels: map[string]string{"team": "ml", "tier": "prod"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Labels: map[string]string{"sandbox": "", "tier": "stage"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
		}
		checked := 0
		for i, a := range accesses {
			wc := class("agree", v1alpha1.ProfileGeneral, withAccess())
			wc.Spec.Access = a
			rule := mustRenderOK(wc).AccessRule()
			for _, ns := range namespaces {
				p := worstCasePod(ns.Name)
				Expect(unstructured.SetNestedStringMap(p.Object, map[string]string{v1alpha1.LabelClass: "agree"}, "spec", "nodeSelector")).To(Succeed())
				unstructured.RemoveNestedField(p.Object, "spec", "affinity")
				j, err := validate.Judge(vap, params(rule), p, ns)
				Expect(err).NotTo(HaveOccurred())
				Expect(j.Allowed).To(Equal(a.Admits(ns.Name, ns.Labels)), "access %d, namespace %s", i, ns.Name)
				checked++
			}
		}
		Expect(checked).To(Equal(len(accesses) * len(namespaces)))
	})
})

func mustRenderOK(wc *v1alpha1.WorkloadClass) *render.Result {
	res, err := render.Render(baseline(), wc, render.Options{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return res
}

// worstCasePod is a pod outside every class's allowed namespaces built to make each access
// policy do the most work and still admit it: 100 tolerations, the one that tolerates
// everything last; 10 required node-affinity terms of 10 expressions with 10 values each,
// every term pinning poolsmith.dev/class to a class that does not exist in its last
// expression, so every policy scans everything before it finds the pod selects elsewhere.
func worstCasePod(ns string) *unstructured.Unstructured {
	var tolerations []any
	for i := 0; i < 99; i++ {
		tolerations = append(tolerations, map[string]any{"key": fmt.Sprintf("example.com/other-%d", i), "operator": "Equal", "value": "x", "effect": "NoSchedule"})
	}
	tolerations = append(tolerations, map[string]any{"operator": "Exists"})
	var terms []any
	for t := 0; t < 10; t++ {
		var exprs []any
		for e := 0; e < 9; e++ {
			var values []any
			for v := 0; v < 10; v++ {
				values = append(values, fmt.Sprintf("zone-%d-%d", e, v))
			}
			exprs = append(exprs, map[string]any{"key": fmt.Sprintf("example.com/label-%d", e), "operator": "In", "values": values})
		}
		exprs = append(exprs, map[string]any{"key": v1alpha1.LabelClass, "operator": "In", "values": []any{"nowhere"}})
		terms = append(terms, map[string]any{"matchExpressions": exprs})
	}
	selector := map[string]any{}
	for i := 0; i < 20; i++ {
		selector[fmt.Sprintf("example.com/selector-%d", i)] = "x"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "worst-case", "namespace": ns},
		"spec": map[string]any{
			"containers":                   []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}},
			"automountServiceAccountToken": false,
			"nodeSelector":                 selector,
			"tolerations":                  tolerations,
			"affinity":                     map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": terms}}},
		},
	}}
}

var _ = Describe("The access policy over the AccessRules of 100 classes", func() {
	It("judges a worst-case pod with no evaluation error, each parameter within the API server's CEL budget", func() {
		ctx := context.Background()
		const classes = 100
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "outsider", Labels: map[string]string{"example.com/team": "web"}}})).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "outsider"}})).To(Succeed())
		var rules []*v1alpha1.AccessRule
		for i := 0; i < classes; i++ {
			name := fmt.Sprintf("team-%03d", i)
			// 12 rungs (2 capacity types x 2 architectures x 3 families), three own taints.
			wc := class(name, v1alpha1.ProfileGeneral, withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand),
				withFamilies(v1alpha1.ConsistencyFamily, "m7g", "c7g", "r7g", "m7i", "c7i", "r7i"), withAccess(name, name+"-staging"),
				func(wc *v1alpha1.WorkloadClass) {
					wc.Spec.Taints = append(wc.Spec.Taints, taint("example.com/team", name, corev1.TaintEffectNoExecute), taint("example.com/tier", "batch", corev1.TaintEffectNoSchedule))
				})
			res, err := render.Render(baseline(), wc, render.Options{})
			Expect(err).NotTo(HaveOccurred(), name)
			Expect(res.NodePools).To(HaveLen(12))
			rule := res.AccessRule()
			Expect(env.Client.Create(ctx, rule.DeepCopy())).To(Succeed())
			rules = append(rules, rule)
		}
		DeferCleanup(func() {
			Expect(env.Client.DeleteAllOf(ctx, &v1alpha1.AccessRule{})).To(Succeed())
		})
		// Every rule is loaded once the last class refuses a pod that selects it.
		last := worstCasePod("outsider")
		Expect(unstructured.SetNestedStringMap(last.Object, map[string]string{v1alpha1.LabelClass: fmt.Sprintf("team-%03d", classes-1)}, "spec", "nodeSelector")).To(Succeed())
		unstructured.RemoveNestedField(last.Object, "spec", "affinity")
		Eventually(func() error { return env.Client.Create(ctx, last.DeepCopy(), client.DryRunAll) }, "30s").Should(MatchError(ContainSubstring("could run on WorkloadClass team-099")))

		// The API server judges the worst case against all 100 rules: any evaluation error
		// (running out of budget included) would refuse it, failurePolicy being Fail.
		Expect(env.Client.Create(ctx, worstCasePod("outsider"), client.DryRunAll)).To(Succeed())

		policy, err := validate.CompilePolicy(render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters)[0].(*admissionv1.ValidatingAdmissionPolicy))
		Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "outsider"}, ns)).To(Succeed())
		var most, total int64
		var budget int64
		for _, rule := range rules {
			j, err := policy.Judge(params(rule), worstCasePod("outsider"), ns)
			Expect(err).NotTo(HaveOccurred(), rule.Name)
			Expect(j.Matched && j.Allowed).To(BeTrue(), rule.Name)
			most, total, budget = max(most, j.Cost), total+j.Cost, j.Budget
		}
		Expect(most).To(BeNumerically("<", budget/100), "each evaluation should stay far below its budget")
		AddReportEntry("CEL cost", fmt.Sprintf("worst-case pod, %d AccessRules: at most %d per rule (budget %d per evaluation), %d in all", classes, most, budget, total))
		GinkgoWriter.Printf("CEL cost of the worst-case pod: at most %d per rule (budget %d), %d across %d rules\n", most, budget, total, classes)

		// The in-process judgement agrees with the API server on a refusal too.
		j, err := policy.Judge(params(rules[classes-1]), last, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Matched && !j.Allowed).To(BeTrue())
	})
})

// podCreateLatency is the median and 95th percentile of n server-side dry-run creates of
// pod, in a namespace no restricted class admits: every AccessRule is evaluated in full.
func podCreateLatency(pod *unstructured.Unstructured, n int) (median, p95 time.Duration) {
	var took []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		Expect(env.Client.Create(context.Background(), pod.DeepCopy(), client.DryRunAll)).To(Succeed())
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[n/2], took[n*95/100]
}

// admissionCreates is how many dry-run creates each figure of the 500-class measurement
// takes: 10 in make test, which only checks that the measurement still works (each create
// of the worst-case pod evaluates all 500 rules, and 40 of them took about 135 of the package's
// 480 s on a loaded machine), 200 for the figures docs/access.md quotes
// (POOLSMITH_ADMISSION_CREATES=200).
func admissionCreates() int {
	if n, err := strconv.Atoi(os.Getenv("POOLSMITH_ADMISSION_CREATES")); err == nil && n > 0 {
		return n
	}
	return 10
}

// A measurement, not a timed test: docs/access.md quotes its figures
// (POOLSMITH_ADMISSION_CREATES=200 go test ./internal/render -run TestAcceptance
// -ginkgo.focus "500 restricted" -v).
var _ = Describe("Pod admission with 500 restricted classes", func() {
	It("is measured against the bare API server", func() {
		ctx := context.Background()
		const classes = 500
		creates := admissionCreates()
		Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "latency"}}))).To(Succeed())
		Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "latency"}}))).To(Succeed())
		pod := worstCasePod("latency")
		// Run first, this spec may start before the API server has loaded the access policy
		// (every pod is admitted) or synced its parameter informer (every pod it matches is
		// refused); one admitted pod proves neither. A refusal naming a sentinel class's rule
		// proves both, and the sentinel's deletion seen leaves no rule for the bare figure.
		sentinel := mustRenderOK(class("lat-sentinel", v1alpha1.ProfileGeneral, withAccess("elsewhere"))).AccessRule()
		Expect(env.Client.Create(ctx, sentinel)).To(Succeed())
		selectsSentinel := worstCasePod("latency")
		Expect(unstructured.SetNestedStringMap(selectsSentinel.Object, map[string]string{v1alpha1.LabelClass: "lat-sentinel"}, "spec", "nodeSelector")).To(Succeed())
		Eventually(func() error { return env.Client.Create(ctx, selectsSentinel.DeepCopy(), client.DryRunAll) }, "2m").Should(MatchError(ContainSubstring("could run on WorkloadClass lat-sentinel")))
		Expect(env.Client.Delete(ctx, sentinel)).To(Succeed())
		Eventually(func() error { return env.Client.Create(ctx, selectsSentinel.DeepCopy(), client.DryRunAll) }, "1m").Should(Succeed())
		bareMedian, bareP95 := podCreateLatency(pod, creates)
		for i := 0; i < classes; i++ {
			name := fmt.Sprintf("lat-%03d", i)
			wc := class(name, v1alpha1.ProfileGeneral, withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand), withAccess(name))
			res, err := render.Render(baseline(), wc, render.Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(env.Client.Create(ctx, res.AccessRule())).To(Succeed())
		}
		DeferCleanup(func() { Expect(env.Client.DeleteAllOf(ctx, &v1alpha1.AccessRule{})).To(Succeed()) })
		selects := worstCasePod("latency")
		Expect(unstructured.SetNestedStringMap(selects.Object, map[string]string{v1alpha1.LabelClass: fmt.Sprintf("lat-%03d", classes-1)}, "spec", "nodeSelector")).To(Succeed())
		Eventually(func() error { return env.Client.Create(ctx, selects, client.DryRunAll) }, "60s").Should(HaveOccurred())
		median, p95 := podCreateLatency(pod, creates)
		simple := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "simple", "namespace": "latency"},
			"spec": map[string]any{"automountServiceAccountToken": false, "containers": []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}}},
		}}
		simpleMedian, simpleP95 := podCreateLatency(simple, creates)
		figures := fmt.Sprintf("pod create (server-side dry run), %d creates: no AccessRule, worst-case pod: median %s, p95 %s; %d restricted classes, worst-case pod: median %s, p95 %s; plain pod: median %s, p95 %s",
			creates, bareMedian.Round(10*time.Microsecond), bareP95.Round(10*time.Microsecond), classes, median.Round(10*time.Microsecond), p95.Round(10*time.Microsecond), simpleMedian.Round(10*time.Microsecond), simpleP95.Round(10*time.Microsecond))
		AddReportEntry("pod-create latency", figures)
		GinkgoWriter.Println(figures)
		fmt.Println(figures)
	})
})
