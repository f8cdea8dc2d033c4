package render_test

import (
	"fmt"
	"math/rand/v2"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// The access rule exists twice: in Go (Access.Admits: poolsmith lint's and the Access
// condition's) and in CEL (the access policy the API server runs). Generated access rules,
// namespaces and pods hold the two together: the policy refuses a pod exactly when the pod
// could land on the class and Admits refuses its namespace.

// accessVocabulary keeps generated selectors and namespace labels on a few keys and values,
// so that they meet often.
var (
	accessKeys   = []string{"team", "tier", "example.com/env"}
	accessValues = []string{"a", "b", ""}
	accessNames  = []string{"ns-0", "ns-1", "ns-2", "ns-3"}
)

func pickSome[T any](r *rand.Rand, from []T, most int) []T {
	n := r.IntN(most + 1)
	out := slices.Clone(from)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(n, len(out))]
}

// generatedAccess is a valid access rule: names, a selector, both or neither, the selector
// empty or with labels and expressions of every operator.
func generatedAccess(r *rand.Rand) *v1alpha1.Access {
	a := &v1alpha1.Access{Namespaces: pickSome(r, accessNames, 2)}
	if r.IntN(4) == 0 {
		if len(a.Namespaces) == 0 {
			a.Namespaces = accessNames[:1]
		}
		return a
	}
	sel := &v1alpha1.NamespaceSelector{}
	for _, k := range pickSome(r, accessKeys, 2) {
		if sel.MatchLabels == nil {
			sel.MatchLabels = map[string]string{}
		}
		sel.MatchLabels[k] = accessValues[r.IntN(len(accessValues))]
	}
	for range r.IntN(3) {
		e := v1alpha1.NamespaceSelectorRequirement{Key: accessKeys[r.IntN(len(accessKeys))]}
		switch r.IntN(4) {
		case 0:
			e.Operator, e.Values = metav1.LabelSelectorOpIn, pickSome(r, accessValues, 2)
		case 1:
			e.Operator, e.Values = metav1.LabelSelectorOpNotIn, pickSome(r, accessValues, 2)
		case 2:
			e.Operator = metav1.LabelSelectorOpExists
		default:
			e.Operator = metav1.LabelSelectorOpDoesNotExist
		}
		if len(e.Values) == 0 && (e.Operator == metav1.LabelSelectorOpIn || e.Operator == metav1.LabelSelectorOpNotIn) {
			e.Values = []string{accessValues[r.IntN(len(accessValues))]}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, e)
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		sel.MatchExpressions = []v1alpha1.NamespaceSelectorRequirement{{Key: accessKeys[0], Operator: metav1.LabelSelectorOpExists}}
	}
	a.NamespaceSelector = sel
	return a
}

func generatedNamespace(r *rand.Rand, i int) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: accessNames[i%len(accessNames)]}}
	if i >= len(accessNames) {
		ns.Name = fmt.Sprintf("other-%d", i)
	}
	for _, k := range pickSome(r, accessKeys, 3) {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[k] = accessValues[r.IntN(len(accessValues))]
	}
	return ns
}

// podForm is one way a pod's spec may or may not reach the class, and whether it does.
type podForm struct {
	name  string
	lands bool
	spec  func(res *render.Result) map[string]any
}

func accessPodForms() []podForm {
	container := []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}}
	spec := func(fields map[string]any) map[string]any {
		fields["containers"] = container
		return fields
	}
	selector := func(key, value string) map[string]any { return map[string]any{key: value} }
	toleration := func(fields map[string]any) []any { return []any{fields} }
	classTaint := func(res *render.Result) corev1.Taint {
		for _, t := range res.NodePools[0].Spec.Template.Spec.Taints {
			if t.Key != v1alpha1.TaintAccess && t.Effect == corev1.TaintEffectNoSchedule {
				return t
			}
		}
		Fail("the class has no NoSchedule taint of its own")
		return corev1.Taint{}
	}
	return []podForm{
		{"plain", false, func(*render.Result) map[string]any { return spec(map[string]any{}) }},
		{"selects the class", true, func(res *render.Result) map[string]any {
			return spec(map[string]any{"nodeSelector": selector(v1alpha1.LabelClass, res.NodePools[0].Labels[v1alpha1.LabelClass])})
		}},
		{"selects another class", false, func(*render.Result) map[string]any {
			return spec(map[string]any{"nodeSelector": selector(v1alpha1.LabelClass, "elsewhere")})
		}},
		{"selects a rung", true, func(res *render.Result) map[string]any {
			return spec(map[string]any{"nodeSelector": selector(v1alpha1.LabelRung, res.NodePools[len(res.NodePools)-1].Name)})
		}},
		{"selects a NodePool", true, func(res *render.Result) map[string]any {
			return spec(map[string]any{"nodeSelector": selector(karpv1.NodePoolLabelKey, res.NodePools[0].Name)})
		}},
		{"requires the class among others", true, func(res *render.Result) map[string]any {
			return spec(map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{
					map[string]any{"matchExpressions": []any{map[string]any{"key": v1alpha1.LabelClass, "operator": "In", "values": []any{"elsewhere"}}}},
					map[string]any{"matchExpressions": []any{map[string]any{"key": v1alpha1.LabelClass, "operator": "In", "values": []any{"elsewhere", res.NodePools[0].Labels[v1alpha1.LabelClass]}}}},
				}}}}})
		}},
		{"tolerates the access taint (placed by name)", true, func(res *render.Result) map[string]any {
			return spec(map[string]any{"nodeName": "ip-10-0-0-1.ec2.internal", "tolerations": toleration(map[string]any{"key": v1alpha1.TaintAccess, "operator": "Exists"})})
		}},
		{"tolerates everything", true, func(*render.Result) map[string]any {
			return spec(map[string]any{"tolerations": toleration(map[string]any{"operator": "Exists"})})
		}},
		{"tolerates everything, selects another class", false, func(*render.Result) map[string]any {
			return spec(map[string]any{"tolerations": toleration(map[string]any{"operator": "Exists"}), "nodeSelector": selector(v1alpha1.LabelClass, "elsewhere")})
		}},
		{"tolerates the class's own taint", true, func(res *render.Result) map[string]any {
			t := classTaint(res)
			return spec(map[string]any{"tolerations": toleration(map[string]any{"key": t.Key, "operator": "Equal", "value": t.Value, "effect": string(t.Effect)})})
		}},
		{"tolerates the class's taint with another value", false, func(res *render.Result) map[string]any {
			t := classTaint(res)
			return spec(map[string]any{"tolerations": toleration(map[string]any{"key": t.Key, "operator": "Equal", "value": t.Value + "-not", "effect": string(t.Effect)})})
		}},
	}
}

// asKind wraps a pod spec as a Pod, a Deployment's template or a CronJob's: the policy
// reads each from its own place.
func asKind(kind, ns string, spec map[string]any) *unstructured.Unstructured {
	obj := map[string]any{"metadata": map[string]any{"name": "generated", "namespace": ns}}
	switch kind {
	case "Pod":
		obj["apiVersion"], obj["spec"] = "v1", spec
	case "Deployment":
		obj["apiVersion"], obj["spec"] = "apps/v1", map[string]any{"template": map[string]any{"spec": spec}}
	case "CronJob":
		obj["apiVersion"], obj["spec"] = "batch/v1", map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": spec}}}}
	}
	obj["kind"] = kind
	return &unstructured.Unstructured{Object: obj}
}

var _ = Describe("The access policy over generated rules, namespaces and pods", func() {
	// An empty selector, meaning every namespace to Admits, would vanish from the written
	// AccessRule (CleanJSON drops empty objects) and leave the policy enforcing the names
	// alone: the class is refused instead, before anything is written.
	It("is never given an empty namespaceSelector", func() {
		for _, a := range []*v1alpha1.Access{
			{NamespaceSelector: &v1alpha1.NamespaceSelector{}},
			{Namespaces: []string{"ns-0"}, NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{}}},
		} {
			wc := class("empty", v1alpha1.ProfileGeneral, withAccess())
			wc.Spec.Access = a
			_, err := render.Render(baseline(), wc, render.Options{})
			Expect(err).To(MatchError(ContainSubstring("spec.access.namespaceSelector: an empty namespaceSelector would admit every namespace")))
		}
	})

	It("refuses exactly the pods that could land on the class from a namespace Access.Admits refuses", func() {
		const rules, namespaces = 150, 8
		r := rand.New(rand.NewPCG(24, 5))
		policy, err := validate.CompilePolicy(render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters)[0].(*admissionv1.ValidatingAdmissionPolicy))
		Expect(err).NotTo(HaveOccurred())
		forms := accessPodForms()
		kinds := []string{"Pod", "Deployment", "CronJob"}
		var judged, refused, admitted int
		for i := range rules {
			a := generatedAccess(r)
			wc := class(fmt.Sprintf("gen-%02d", i), v1alpha1.ProfileGeneral, withAccess())
			wc.Spec.Access = a
			res := mustRenderOK(wc)
			rule := params(res.AccessRule())
			for n := range namespaces {
				ns := generatedNamespace(r, n)
				admits := a.Admits(ns.Name, ns.Labels)
				if admits {
					admitted++
				}
				for _, f := range forms {
					kind := kinds[r.IntN(len(kinds))]
					j, err := policy.Judge(rule, asKind(kind, ns.Name, f.spec(res)), ns)
					Expect(err).NotTo(HaveOccurred())
					Expect(j.Matched).To(BeTrue())
					Expect(j.Allowed).To(Equal(admits || !f.lands),
						"rule %d %+v (selector %+v), namespace %s %v, %s pod that %s", i, a, a.NamespaceSelector, ns.Name, ns.Labels, kind, f.name)
					judged++
					if !j.Allowed {
						refused++
					}
				}
			}
		}
		// The generator must reach both verdicts of Admits often enough to mean something.
		Expect(admitted).To(BeNumerically(">", rules*namespaces/10))
		Expect(rules*namespaces - admitted).To(BeNumerically(">", rules*namespaces/10))
		AddReportEntry("access agreement", fmt.Sprintf("%d judgements (%d refused), %d of %d namespace checks admitted", judged, refused, admitted, rules*namespaces))
		GinkgoWriter.Printf("access agreement: %d judgements (%d refused), %d of %d namespace checks admitted\n", judged, refused, admitted, rules*namespaces)
	})
})
