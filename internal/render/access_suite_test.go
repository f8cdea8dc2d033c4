package render_test

import (
	"context"
	"fmt"

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
	It("pass a server-side dry run, and the API server stores them exactly as rendered (no default of its own to revert)", func() {
		res, err := render.Render(baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train", "ml-serve")), render.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Policies).To(HaveLen(4))
		crds, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		objs, err := res.Objects()
		Expect(err).NotTo(HaveOccurred())
		policies := 0
		for _, doc := range objs {
			u := &unstructured.Unstructured{Object: doc}
			Expect(env.Client.Create(context.Background(), u.DeepCopy(), client.DryRunAll)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
			if !validate.IsPolicy(u.GroupVersionKind()) {
				continue
			}
			policies++
			Expect(crds.Create(doc)).To(Succeed(), "in-process: %s %s", u.GetKind(), u.GetName())
			stored := u.DeepCopy()
			Expect(env.Client.Create(context.Background(), stored)).To(Succeed())
			live, err := render.CleanJSON(stored)
			Expect(err).NotTo(HaveOccurred())
			Expect(diff.Changes(doc, live)).To(BeEmpty(), "%s %s", u.GetKind(), u.GetName())
			Expect(diff.Removed(doc["spec"].(map[string]any), live["spec"].(map[string]any))).To(BeEmpty(), "%s %s: the server added fields the render lacks", u.GetKind(), u.GetName())
			Expect(env.Client.Delete(context.Background(), stored)).To(Succeed())
		}
		Expect(policies).To(Equal(4))
	})

	It("are refused in-process when an expression does not compile, naming the field", func() {
		res, err := render.Render(baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train")), render.Options{})
		Expect(err).NotTo(HaveOccurred())
		doc, err := render.CleanJSON(res.Policies[0])
		Expect(err).NotTo(HaveOccurred())
		vals, _, _ := unstructured.NestedSlice(doc, "spec", "validations")
		vals[0].(map[string]any)["expression"] = "variables.selects &&"
		Expect(unstructured.SetNestedSlice(doc, vals, "spec", "validations")).To(Succeed())
		crds, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		err = crds.Create(doc)
		Expect(err).To(MatchError(ContainSubstring("spec.validations[0].expression")))
		err = env.Client.Create(context.Background(), &unstructured.Unstructured{Object: doc}, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("spec.validations[0].expression")), "the API server refuses it too")
	})
})

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

var _ = Describe("Access policies of 100 classes", func() {
	It("judge a worst-case pod with no evaluation error, each within the API server's CEL budget", func() {
		ctx := context.Background()
		const classes = 100
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "outsider", Labels: map[string]string{"example.com/team": "web"}}})).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "outsider"}})).To(Succeed())
		var vaps []*admissionv1.ValidatingAdmissionPolicy
		for i := 0; i < classes; i++ {
			name := fmt.Sprintf("team-%03d", i)
			// 12 rungs (2 capacity types x 2 architectures x 3 families), three own taints.
			wc := class(name, v1alpha1.ProfileGeneral, withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand),
				withFamilies(v1alpha1.ConsistencyFamily, "m7g", "c7g", "r7g", "m7i", "c7i", "r7i"), withAccess(name, name+"-staging"),
				func(wc *v1alpha1.WorkloadClass) {
					wc.Spec.Taints = append(wc.Spec.Taints, taint("example.com/team", name, corev1.TaintEffectNoExecute), taint("example.com/tier", "batch", corev1.TaintEffectNoSchedule))
				})
			res, err := render.Render(baseline(), wc, render.Options{NoDefaultPolicies: true})
			Expect(err).NotTo(HaveOccurred(), name)
			Expect(res.NodePools).To(HaveLen(12))
			for _, p := range res.Policies {
				Expect(env.Client.Create(ctx, p)).To(Succeed())
			}
			vaps = append(vaps, res.Policies[0].(*admissionv1.ValidatingAdmissionPolicy))
		}
		// Every policy is loaded once the last class refuses a pod that selects it.
		last := worstCasePod("outsider")
		Expect(unstructured.SetNestedStringMap(last.Object, map[string]string{v1alpha1.LabelClass: fmt.Sprintf("team-%03d", classes-1)}, "spec", "nodeSelector")).To(Succeed())
		unstructured.RemoveNestedField(last.Object, "spec", "affinity")
		Eventually(func() error { return env.Client.Create(ctx, last.DeepCopy(), client.DryRunAll) }, "30s").Should(MatchError(ContainSubstring("could run on WorkloadClass team-099")))

		// The API server judges the worst case with all 100 policies: any evaluation error
		// (running out of budget included) would refuse it, failurePolicy being Fail.
		Expect(env.Client.Create(ctx, worstCasePod("outsider"), client.DryRunAll)).To(Succeed())

		ns := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "outsider"}, ns)).To(Succeed())
		var most, total int64
		var budget int64
		for _, vap := range vaps {
			j, err := validate.Judge(vap, worstCasePod("outsider"), ns)
			Expect(err).NotTo(HaveOccurred(), vap.Name)
			Expect(j.Matched && j.Allowed).To(BeTrue(), vap.Name)
			most, total, budget = max(most, j.Cost), total+j.Cost, j.Budget
		}
		Expect(most).To(BeNumerically("<", budget/100), "each policy should stay far below its budget")
		AddReportEntry("CEL cost", fmt.Sprintf("worst-case pod, %d access policies: at most %d per policy (budget %d per evaluation), %d in all", classes, most, budget, total))
		GinkgoWriter.Printf("CEL cost of the worst-case pod: at most %d per policy (budget %d), %d across %d policies\n", most, budget, total, classes)

		// The in-process judgement agrees with the API server on a refusal too.
		j, err := validate.Judge(vaps[classes-1], last, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Matched && !j.Allowed).To(BeTrue())
	})
})
