package controllers_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// An object stored before its CRD bounded a field (or written straight into etcd) may not
// decode into its Go type. These specs write one past admission by relaxing the CRD for a
// moment, and show that it costs only itself (internal/decode).
var _ = Describe("A class or Baseline that does not decode", func() {
	It("is reported InvalidSpec, keeps its children, and every other class still reconciles", func() {
		create(newBaseline("undecodable"))
		good := newClass("decodes", "undecodable")
		bad := newClass("undecodable", "undecodable")
		create(good, bad)
		waitSynced("decodes")
		waitSynced("undecodable")
		pools := nodePoolNames("undecodable")()
		Expect(pools).NotTo(BeEmpty())

		writePastAdmission("workloadclasses", "undecodable", []string{"spec", "rebalance", "maxConcurrent"})
		Eventually(rawCondition("workloadclasses", "undecodable", v1alpha1.ConditionSynced)).Should(And(
			HaveKeyWithValue("status", "False"), HaveKeyWithValue("reason", v1alpha1.ReasonInvalidSpec),
			HaveKeyWithValue("message", ContainSubstring("spec.rebalance: "))))
		Consistently(nodePoolNames("undecodable"), "2s").Should(ConsistOf(pools))

		By("a new class reconciles")
		create(newClass("decodes-new", "undecodable"))
		waitSynced("decodes-new")
		By("an edited class reconciles")
		wc := get(&v1alpha1.WorkloadClass{}, "decodes")
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64}
		updateClass(wc)
		Eventually(nodePoolNames("decodes")).Should(HaveLen(4))
		waitSynced("decodes")

		By("fixing the field brings the class back")
		Expect(env.Client.Patch(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "undecodable"}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rebalance":{"maxConcurrent":2}}}`)))).To(Succeed())
		waitSynced("undecodable")
	})

	It("stops only the classes of a Baseline that does not decode, which say so", func() {
		create(newBaseline("fine"), newBaseline("broken"))
		create(newClass("on-fine", "fine"), newClass("on-broken", "broken"))
		waitSynced("on-fine")
		waitSynced("on-broken")

		writePastAdmission("baselines", "broken", []string{"spec", "rebalance", "maxConcurrent"})
		// The Baseline's generation changed, so its classes are reconciled again.
		Eventually(condition("on-broken", v1alpha1.ConditionSynced)).Should(And(haveCondition("False", v1alpha1.ReasonInvalidSpec),
			WithTransform(func(c *metav1.Condition) string { return c.Message }, ContainSubstring(`Baseline "broken" does not decode`))))

		wc := get(&v1alpha1.WorkloadClass{}, "on-fine")
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
		updateClass(wc)
		Eventually(nodePoolNames("on-fine")).Should(ConsistOf("on-fine-spot-arm64", "on-fine-on-demand-arm64"))
		waitSynced("on-fine")
	})
})

// rawCondition reads a condition of an object the typed client cannot decode.
func rawCondition(resource, name, typ string) func() map[string]any {
	return func() map[string]any {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kindOf(resource))
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == typ {
				return m
			}
		}
		return nil
	}
}

func kindOf(resource string) schema.GroupVersionKind {
	kind := map[string]string{"workloadclasses": "WorkloadClass", "baselines": "Baseline"}[resource]
	return v1alpha1.GroupVersion.WithKind(kind)
}

// writePastAdmission sets the field at path of the named object to 2147483648, one past
// the int32 its Go type holds, by dropping the field's CEL rule from the CRD for the write
// and restoring the CRD after it.
func writePastAdmission(resource, name string, path []string) {
	GinkgoHelper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	key := client.ObjectKey{Name: resource + "." + v1alpha1.GroupVersion.Group}
	Expect(env.Client.Get(ctx, key, crd)).To(Succeed())
	original, _, _ := unstructured.NestedFieldCopy(crd.Object, "spec")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	fieldPath := []string{"schema", "openAPIV3Schema"}
	for _, p := range path {
		fieldPath = append(fieldPath, "properties", p)
	}
	v0 := versions[0].(map[string]any)
	unstructured.RemoveNestedField(v0, append(fieldPath, "x-kubernetes-validations")...)
	Expect(unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")).To(Succeed())
	Expect(env.Client.Update(ctx, crd)).To(Succeed())

	patch := map[string]any{}
	m := patch
	for _, p := range path[:len(path)-1] {
		next := map[string]any{}
		m[p] = next
		m = next
	}
	m[path[len(path)-1]] = int64(2147483648)
	body, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(kindOf(resource))
	obj.SetName(name)
	// The API server takes the relaxed schema up a moment after the update.
	Eventually(func() error {
		return env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
	}).Should(Succeed())

	Eventually(func() error {
		if err := env.Client.Get(ctx, key, crd); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(crd.Object, original, "spec"); err != nil {
			return err
		}
		return env.Client.Update(ctx, crd)
	}).Should(Succeed())
}
