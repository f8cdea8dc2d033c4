package render_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
