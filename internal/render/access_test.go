package render_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

func TestAccessRendersAPolicyAndBindingPerClassAndADefaultsPolicy(t *testing.T) {
	res := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train")))
	var kinds []string
	for _, p := range res.Policies {
		kinds = append(kinds, p.GetObjectKind().GroupVersionKind().Kind+"/"+p.GetName())
		if p.GetLabels()[v1alpha1.LabelClass] != "gpu" || p.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Errorf("%s lacks the owner labels: %v", p.GetName(), p.GetLabels())
		}
	}
	want := "ValidatingAdmissionPolicy/poolsmith-access-gpu ValidatingAdmissionPolicyBinding/poolsmith-access-gpu MutatingAdmissionPolicy/poolsmith-default-gpu MutatingAdmissionPolicyBinding/poolsmith-default-gpu"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("policies = %s\nwant %s", got, want)
	}
	vap := res.Policies[0].(*admissionv1.ValidatingAdmissionPolicy)
	if *vap.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy = %s, want Fail: an access rule that cannot be judged refuses", *vap.Spec.FailurePolicy)
	}
	if ns := vap.Spec.MatchConstraints.NamespaceSelector.MatchExpressions[0]; ns.Values[0] != "kube-system" {
		t.Errorf("kube-system is not exempt: %v", ns)
	}
	msg := vap.Spec.Validations[0].MessageExpression
	for _, s := range []string{"WorkloadClass gpu", "namespaces ml-train", "namespaces labelled example.com/team=ml,example.com/tier notin (sandbox)"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not say %q", msg, s)
		}
	}
	// Every rung's name is a way to select the class.
	for _, np := range res.NodePools {
		if !strings.Contains(vap.Spec.Variables[6].Expression, `"`+np.Name+`"`) {
			t.Errorf("selects does not name rung %s", np.Name)
		}
	}
	// Both NoSchedule taints (the profile's nvidia.com/gpu and the class's own) must be tolerated.
	tol := vap.Spec.Variables[8].Expression
	if !strings.Contains(tol, `"nvidia.com/gpu"`) || !strings.Contains(tol, `"example.com/dedicated"`) {
		t.Errorf("tolerates = %s", tol)
	}
}

func TestOpenClassRendersOnlyTheDefaultsPolicy(t *testing.T) {
	res := mustRender(t, baseline(), class("web", v1alpha1.ProfileGeneral))
	if len(res.Policies) != 2 || res.Policies[0].GetObjectKind().GroupVersionKind().Kind != render.KindMutatingPolicy {
		t.Fatalf("policies = %v", res.Policies)
	}
	mp := res.Policies[0].(*admissionv1.MutatingAdmissionPolicy)
	if got := mp.Spec.MatchConstraints.NamespaceSelector.MatchExpressions[1]; got.Key != v1alpha1.LabelDefaultClass || got.Values[0] != "web" {
		t.Errorf("the defaults policy does not select namespaces labelled %s=web: %v", v1alpha1.LabelDefaultClass, got)
	}
	if *mp.Spec.FailurePolicy != admissionv1.Ignore || mp.Spec.Mutations[0].PatchType != admissionv1.PatchTypeJSONPatch {
		t.Errorf("defaults policy: failurePolicy %s, patch %s", *mp.Spec.FailurePolicy, mp.Spec.Mutations[0].PatchType)
	}
}

func TestAccessPoliciesCanBeTurnedOff(t *testing.T) {
	wc := class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train"))
	res, err := render.Render(baseline(), wc, render.Options{NoAccessPolicies: true})
	if err != nil || len(res.Policies) != 0 {
		t.Fatalf("NoAccessPolicies: %v, %d policies", err, len(res.Policies))
	}
	res, err = render.Render(baseline(), wc, render.Options{NoDefaultPolicies: true})
	if err != nil || len(res.Policies) != 2 || res.Policies[0].GetObjectKind().GroupVersionKind().Kind != render.KindValidatingPolicy {
		t.Fatalf("NoDefaultPolicies: %v, %v", err, res.Policies)
	}
}

func TestAccessNeedsATaintOfTheClassesOwn(t *testing.T) {
	// The GPU profile's nvidia.com/gpu taint is shared by every GPU class: it cannot tell them apart.
	wc := class("gpu", v1alpha1.ProfileGPU)
	wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml"}}
	_, err := render.Render(baseline(), wc, render.Options{})
	if err == nil || !strings.Contains(err.Error(), "spec.access: a class with an access rule needs a NoSchedule or NoExecute taint of its own") {
		t.Fatalf("err = %v", err)
	}
	// A PreferNoSchedule taint keeps nothing off.
	wc.Spec.Taints = v1alpha1.Taints{taint("example.com/dedicated", "gpu", corev1.TaintEffectPreferNoSchedule)}
	if _, err := render.Render(baseline(), wc, render.Options{}); err == nil {
		t.Fatal("a PreferNoSchedule taint was accepted as the class's own")
	}
	// BurstableCI adds poolsmith.dev/class=<name>: that one is the class's own.
	ci := class("ci", v1alpha1.ProfileBurstableCI)
	ci.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ci"}}
	mustRender(t, baseline(), ci)
}

func TestAccessSelectorCharactersAreCheckedAtRender(t *testing.T) {
	wc := class("gpu", v1alpha1.ProfileGPU, withAccess("ml"))
	wc.Spec.Access.NamespaceSelector.MatchLabels = map[string]string{"team": "bad value!"}
	_, err := render.Render(baseline(), wc, render.Options{})
	if err == nil || !strings.Contains(err.Error(), "spec.access.namespaceSelector.matchLabels") {
		t.Fatalf("err = %v", err)
	}
}
