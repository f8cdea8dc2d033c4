package render_test

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

func TestAccessRendersOneAccessRulePerClass(t *testing.T) {
	res := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train")))
	if len(res.Policies) != 1 {
		t.Fatalf("policies = %v, want the AccessRule alone: the manager writes no admission policy", res.Policies)
	}
	rule := res.AccessRule()
	if rule == nil || rule.Name != "gpu" || rule.Spec.Class != "gpu" {
		t.Fatalf("AccessRule = %+v", rule)
	}
	if rule.Labels[v1alpha1.LabelClass] != "gpu" || rule.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || rule.Labels[v1alpha1.LabelRestricted] != "true" {
		t.Errorf("AccessRule labels = %v", rule.Labels)
	}
	if len(rule.Spec.Access) != 1 || rule.Spec.Access[0].Namespaces[0] != "ml-train" {
		t.Errorf("access = %+v", rule.Spec.Access)
	}
	for _, s := range []string{"namespaces ml-train", "namespaces labelled example.com/team=ml,example.com/tier notin (sandbox)"} {
		if !strings.Contains(rule.Spec.Allowed, s) {
			t.Errorf("allowed %q does not say %q", rule.Spec.Allowed, s)
		}
	}
	// Every rung's name is a way to select the class.
	for _, np := range res.NodePools {
		if !slices.Contains(rule.Spec.Rungs, np.Name) {
			t.Errorf("rungs %v lack %s", rule.Spec.Rungs, np.Name)
		}
	}
	// Both NoSchedule taints (the profile's nvidia.com/gpu and the class's own) must be tolerated.
	var keys []string
	for _, taint := range rule.Spec.Taints {
		keys = append(keys, taint.Key)
	}
	if !slices.Contains(keys, "nvidia.com/gpu") || !slices.Contains(keys, "example.com/dedicated") {
		t.Errorf("taints = %v", rule.Spec.Taints)
	}
}

func TestAdmissionPoliciesReadAccessRules(t *testing.T) {
	objs := render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters)
	if len(objs) != 10 {
		t.Fatalf("policies = %d", len(objs))
	}
	vap := objs[0].(*admissionv1.ValidatingAdmissionPolicy)
	if *vap.Spec.FailurePolicy != admissionv1.Fail || vap.Spec.ParamKind.Kind != render.KindAccessRule {
		t.Errorf("access policy: failurePolicy %s, paramKind %v", *vap.Spec.FailurePolicy, vap.Spec.ParamKind)
	}
	if ns := vap.Spec.MatchConstraints.NamespaceSelector.MatchExpressions[0]; ns.Values[0] != "kube-system" {
		t.Errorf("kube-system is not exempt: %v", ns)
	}
	binding := objs[1].(*admissionv1.ValidatingAdmissionPolicyBinding)
	if ref := binding.Spec.ParamRef; ref.Selector.MatchLabels[v1alpha1.LabelRestricted] != "true" || *ref.ParameterNotFoundAction != admissionv1.AllowAction {
		t.Errorf("access binding paramRef = %+v", ref)
	}
	mp := objs[2].(*admissionv1.MutatingAdmissionPolicy)
	if got := mp.Spec.MatchConstraints.NamespaceSelector.MatchExpressions[0]; !slices.Equal(got.Values, []string{"kube-system", render.DefaultHeadroomWriters.Namespace}) {
		t.Errorf("the defaults policy does not skip kube-system and the headroom namespace: %v", got)
	}
	if got := mp.Spec.MatchConstraints.NamespaceSelector.MatchExpressions[1]; got.Key != v1alpha1.LabelDefaultClass || got.Operator != metav1.LabelSelectorOpExists {
		t.Errorf("the defaults policy does not select namespaces labelled %s: %v", v1alpha1.LabelDefaultClass, got)
	}
	if *mp.Spec.FailurePolicy != admissionv1.Ignore || mp.Spec.Mutations[0].PatchType != admissionv1.PatchTypeJSONPatch {
		t.Errorf("defaults policy: failurePolicy %s, patch %s", *mp.Spec.FailurePolicy, mp.Spec.Mutations[0].PatchType)
	}
}

func TestOpenClassRendersAnUnrestrictedAccessRule(t *testing.T) {
	rule := mustRender(t, baseline(), class("web", v1alpha1.ProfileGeneral)).AccessRule()
	if rule == nil || len(rule.Spec.Access) != 0 || rule.Labels[v1alpha1.LabelRestricted] != "false" {
		t.Fatalf("AccessRule = %+v: an open class's rule serves namespace defaults only", rule)
	}
}

func TestAccessPoliciesCanBeTurnedOff(t *testing.T) {
	wc := class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train"))
	res, err := render.Render(baseline(), wc, render.Options{Capabilities: capabilities.Capabilities{NoAccessPolicies: true}})
	if err != nil || len(res.Policies) != 0 {
		t.Fatalf("NoAccessPolicies: %v, %d policies", err, len(res.Policies))
	}
}

func TestANarrowedAccessRuleIsTheIntersectionOfTheEnforcedAndTheSpec(t *testing.T) {
	wc := class("gpu", v1alpha1.ProfileGPU, withAccess("ml"))
	wc.Spec.Access.NamespaceSelector = nil
	live := mustRender(t, baseline(), wc).AccessRule()
	live.Spec.Rungs = append(live.Spec.Rungs, "gpu-retiring")
	live.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}

	// Narrowed: both entries, the live taints, both rules' rungs.
	wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml-only"}}
	rendered := mustRender(t, baseline(), wc).AccessRule()
	got := render.NarrowedAccessRule(wc, rendered, live)
	if len(got.Spec.Access) != 2 || got.Spec.Access[0].Namespaces[0] != "ml" || got.Spec.Access[1].Namespaces[0] != "ml-only" {
		t.Errorf("access = %+v", got.Spec.Access)
	}
	if !slices.Contains(got.Spec.Rungs, "gpu-retiring") || len(got.Spec.Taints) != 1 || got.Labels[v1alpha1.LabelRestricted] != "true" {
		t.Errorf("rule = %+v", got.Spec)
	}
	// The class opened up: the rule enforced before still holds until the family is written.
	wc.Spec.Access = nil
	if got := render.NarrowedAccessRule(wc, nil, live); len(got.Spec.Access) != 1 || got.Spec.Access[0].Namespaces[0] != "ml" {
		t.Errorf("opened: access = %+v", got.Spec.Access)
	}
	// Deleted while blocked: restored from the render.
	wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml-only"}}
	if got := render.NarrowedAccessRule(wc, rendered, nil); len(got.Spec.Access) != 1 || got.Spec.Access[0].Namespaces[0] != "ml-only" {
		t.Errorf("restored: access = %+v", got.Spec.Access)
	}
	if render.NarrowedAccessRule(wc, nil, nil) != nil {
		t.Error("nothing to enforce from, yet a rule")
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

// The policies compile in the API server's stored-expression environment, params included.
func TestAdmissionPoliciesCompile(t *testing.T) {
	crds, err := validate.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters) {
		doc, err := render.CleanJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := crds.Create(doc); err != nil {
			t.Errorf("%s: %v", p.GetName(), err)
		}
	}
}

// A restricted class's rungs each carry its own NoExecute taint, after the class's other
// taints; its AccessRule lists it, so the policy judges a toleration of it and the
// namespace defaults add one. An open class, or access policies turned off, add none.
func TestARestrictedClassTaintsItsRungsNoExecute(t *testing.T) {
	access := corev1.Taint{Key: v1alpha1.TaintAccess, Value: "gpu", Effect: corev1.TaintEffectNoExecute}
	res := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train")))
	for _, np := range res.NodePools {
		taints := np.Spec.Template.Spec.Taints
		if len(taints) != 3 || taints[len(taints)-1] != access {
			t.Errorf("%s taints = %v, want the class's two and then %v", np.Name, taints, access)
		}
		traced := 0
		for _, f := range res.Provenance {
			if f.Object == "NodePool/"+np.Name && strings.HasPrefix(f.Path, "spec.template.spec.taints[poolsmith.dev/access:NoExecute]") {
				traced++
				if f.Origin != render.OriginComputed("access") {
					t.Errorf("%s: %s has origin %q", np.Name, f.Path, f.Origin)
				}
			}
		}
		if traced == 0 {
			t.Errorf("%s: the access taint is not in the provenance", np.Name)
		}
	}
	if rule := res.AccessRule(); !slices.Contains(rule.Spec.Taints, access) {
		t.Errorf("AccessRule taints = %v lack %v", rule.Spec.Taints, access)
	}
	open := mustRender(t, baseline(), class("web", v1alpha1.ProfileGeneral))
	off, err := render.Render(baseline(), class("gpu", v1alpha1.ProfileGPU, withAccess("ml-train")), render.Options{Capabilities: capabilities.Capabilities{NoAccessPolicies: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*render.Result{open, off} {
		for _, np := range r.NodePools {
			for _, taint := range np.Spec.Template.Spec.Taints {
				if taint.Key == v1alpha1.TaintAccess {
					t.Errorf("%s carries %v though its access rule is not enforced", np.Name, taint)
				}
			}
		}
	}
}

// Only the renderer sets the access taint: a class or Baseline that sets the key could
// otherwise make a toleration of one class's taint mean another's nodes.
func TestTheAccessTaintKeyIsReserved(t *testing.T) {
	wc := class("web", v1alpha1.ProfileGeneral)
	wc.Spec.Taints = v1alpha1.Taints{taint(v1alpha1.TaintAccess, "gpu", corev1.TaintEffectNoExecute)}
	if _, err := render.Render(baseline(), wc, render.Options{}); err == nil || !strings.Contains(err.Error(), "spec.taints[0].key: poolsmith.dev/access is reserved") {
		t.Errorf("class: err = %v", err)
	}
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.StartupTaints = v1alpha1.Taints{taint(v1alpha1.TaintAccess, "x", corev1.TaintEffectNoSchedule)}
	})
	if _, err := render.Render(b, class("web", v1alpha1.ProfileGeneral), render.Options{}); err == nil || !strings.Contains(err.Error(), "baseline.spec.nodePool.startupTaints[0].key: poolsmith.dev/access is reserved") {
		t.Errorf("baseline: err = %v", err)
	}
}
