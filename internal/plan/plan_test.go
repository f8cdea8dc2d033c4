package plan_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

func fixture(t *testing.T, mutate ...func(*v1alpha1.WorkloadClass)) (*v1alpha1.WorkloadClass, *render.Result) {
	t.Helper()
	return fixtureWith(t, render.Options{}, mutate...)
}

// fixtureWith is fixture rendered with opts.
func fixtureWith(t *testing.T, opts render.Options, mutate ...func(*v1alpha1.WorkloadClass)) (*v1alpha1.WorkloadClass, *render.Result) {
	t.Helper()
	b := &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineSpec{NodeClass: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
		}},
	}
	wc := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web"},
		Spec: v1alpha1.WorkloadClassSpec{
			Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
			Limits:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
		},
	}
	for _, m := range mutate {
		m(wc)
	}
	res, err := render.Render(b, wc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return wc, res
}

func schema(t *testing.T) *validate.Validator {
	t.Helper()
	v, err := validate.Default()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stored is obj as the API server stores it after Poolsmith created it: defaulted, owned
// by wc, with a resourceVersion.
func stored[T client.Object](t *testing.T, wc *v1alpha1.WorkloadClass, obj T, into T) T {
	t.Helper()
	doc, err := render.CleanJSON(obj)
	if err != nil {
		t.Fatal(err)
	}
	doc["metadata"].(map[string]any)["ownerReferences"] = []any{plan.OwnerReference(wc)}
	doc["metadata"].(map[string]any)["resourceVersion"] = "42"
	doc, err = schema(t).Defaulted(doc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
	return into
}

// synced is the cluster after Poolsmith wrote res.
func synced(t *testing.T, wc *v1alpha1.WorkloadClass, res *render.Result) plan.Children {
	live := plan.Children{NodePools: map[string]*karpv1.NodePool{}, NodeOverlays: map[string]*karpv1alpha1.NodeOverlay{}}
	live.NodeClass = stored(t, wc, res.NodeClass, &awsv1.EC2NodeClass{})
	for _, np := range res.NodePools {
		live.NodePools[np.Name] = stored(t, wc, np, &karpv1.NodePool{})
	}
	live.Policies = map[string]client.Object{}
	for _, pol := range res.Policies {
		live.Policies[plan.KindOf(pol)+"/"+pol.GetName()] = stored(t, wc, pol, pol.DeepCopyObject().(client.Object))
	}
	return live
}

func compute(t *testing.T, in plan.Input) *plan.Plan {
	t.Helper()
	p, err := plan.Compute(in, schema(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func actions(p *plan.Plan) string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, string(s.Action)+" "+s.Ref())
	}
	return strings.Join(out, "; ")
}

func TestAnEmptyClusterGetsEveryChildCreatedInOrder(t *testing.T) {
	wc, res := fixture(t)
	p := compute(t, plan.Input{Class: wc, Result: res})
	if got, want := actions(p), "create EC2NodeClass/web; create NodePool/web-spot-amd64; create NodePool/web-on-demand-amd64; create AccessRule/web"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	for _, s := range p.Steps {
		refs := s.Object["metadata"].(map[string]any)["ownerReferences"].([]any)
		if len(refs) != 1 || refs[0].(map[string]any)["uid"] != "uid-web" || !s.Verified {
			t.Errorf("%s: owner %v verified %v", s.Ref(), refs, s.Verified)
		}
	}
	if invalid := p.Validate(schema(t)); len(invalid) > 0 {
		t.Fatalf("Karpenter's CRDs refuse: %v", invalid[0].Err)
	}
	if p := compute(t, plan.Input{Class: wc, Result: res, Unverified: true}); p.Steps[0].Verified {
		t.Error("a create whose name was not asked about is not verified")
	}
}

func TestWhatTheClusterHoldsAlreadyIsNotWritten(t *testing.T) {
	wc, res := fixture(t)
	p := compute(t, plan.Input{Class: wc, Result: res, Live: synced(t, wc, res)})
	if p.Changed() || strings.Count(actions(p), "unchanged") != 4 {
		t.Fatalf("a synced family must plan no write: %s", actions(p))
	}
}

func TestForeignFieldsAreRemovedAndMetadataKept(t *testing.T) {
	wc, res := fixture(t)
	live := synced(t, wc, res)
	np := live.NodePools["web-spot-amd64"]
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "evil", Effect: corev1.TaintEffectNoExecute}}
	np.Spec.Template.Annotations = map[string]string{"example.com/hand": "added"}
	np.Annotations = map[string]string{"karpenter.sh/nodepool-hash": "123"}
	np.Finalizers = []string{"karpenter.sh/termination"}

	p := compute(t, plan.Input{Class: wc, Result: res, Live: live})
	s := p.Steps[1]
	if s.Action != plan.Update || len(s.Changes) != 0 {
		t.Fatalf("want an update with no changed rendered field, got %s %v", s.Action, s.Changes)
	}
	var removed []string
	for _, r := range s.Removed {
		removed = append(removed, r.Path)
	}
	if got := strings.Join(removed, " "); got != "spec.template.metadata.annotations spec.template.spec.taints" {
		t.Fatalf("removed %q", got)
	}
	spec := s.Object["spec"].(map[string]any)["template"].(map[string]any)
	if _, ok := spec["spec"].(map[string]any)["taints"]; ok {
		t.Error("the update still carries the foreign taint")
	}
	md := s.Object["metadata"].(map[string]any)
	if md["resourceVersion"] != "42" || md["annotations"].(map[string]any)["karpenter.sh/nodepool-hash"] != "123" || len(md["finalizers"].([]any)) != 1 {
		t.Errorf("Karpenter's metadata and the live resourceVersion must stay: %v", md)
	}
	if s.Drift != diff.WillDrift {
		t.Errorf("removing a taint changes Karpenter's hash; drift %q", s.Drift)
	}
}

func TestAForeignObjectBlocksTheWholeFamily(t *testing.T) {
	wc, res := fixture(t)
	foreign := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web-on-demand-amd64"}}
	p := compute(t, plan.Input{Class: wc, Result: res, Foreign: []client.Object{foreign}})
	if !p.Blocked() || len(p.Writes()) != 0 || strings.Join(p.Conflicts(), ",") != "NodePool/web-on-demand-amd64" {
		t.Fatalf("blocked %v writes %d conflicts %v", p.Blocked(), len(p.Writes()), p.Conflicts())
	}
}

func TestPrunePolicies(t *testing.T) {
	for _, tc := range []struct {
		policy v1alpha1.PrunePolicy
		nodes  *int64
		// claims are NodeClaims of the rung that status.nodes does not count yet.
		claims int
		want   plan.Action
	}{
		{"", nil, 0, plan.Delete},
		{v1alpha1.PruneDelete, ptr.To[int64](3), 0, plan.Delete},
		{v1alpha1.PruneOrphan, nil, 0, plan.Orphan},
		{v1alpha1.PruneRetire, ptr.To[int64](3), 0, plan.Retire},
		{v1alpha1.PruneRetire, ptr.To[int64](0), 0, plan.Delete},
		// A NodeClaim launched just before Karpenter's last status.nodes refresh.
		{v1alpha1.PruneRetire, ptr.To[int64](0), 1, plan.Retire},
	} {
		wc, res := fixture(t, func(wc *v1alpha1.WorkloadClass) { wc.Spec.PrunePolicy = tc.policy })
		live := synced(t, wc, res)
		live.NodePools["web-on-demand-amd64"].Status.Nodes = tc.nodes
		live.NodeClaims = map[string][]*karpv1.NodeClaim{}
		for i := range tc.claims {
			live.NodeClaims["web-on-demand-amd64"] = append(live.NodeClaims["web-on-demand-amd64"], &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-on-demand-amd64-%d", i)}})
		}
		_, fewer := fixture(t, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.PrunePolicy = tc.policy
			wc.Spec.CapacityTypes = wc.Spec.CapacityTypes[:1]
		})
		p := compute(t, plan.Input{Class: wc, Result: fewer, Live: live})
		last := p.Steps[len(p.Steps)-1]
		if last.Ref() != "NodePool/web-on-demand-amd64" || last.Action != tc.want {
			t.Errorf("%q with nodes %v and %d NodeClaims: got %s %s, want %s", tc.policy, tc.nodes, tc.claims, last.Action, last.Ref(), tc.want)
			continue
		}
		if invalid := p.Validate(schema(t)); len(invalid) > 0 {
			t.Errorf("%q: %v", tc.policy, invalid[0].Err)
		}
		switch last.Action {
		case plan.Orphan:
			md := last.Object["metadata"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			if _, ok := md["ownerReferences"]; ok || labels[v1alpha1.LabelClass] != nil {
				t.Errorf("orphaned object keeps Poolsmith's marks: %v", md)
			}
		case plan.Retire:
			limits := last.Object["spec"].(map[string]any)["limits"].(map[string]any)
			if limits["cpu"] != "0" || last.Object["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationRetired] != "true" {
				t.Errorf("retire: limits %v", limits)
			}
		}
	}
}

func TestARetiredRungRenderedAgainIsRevived(t *testing.T) {
	wc, res := fixture(t, func(wc *v1alpha1.WorkloadClass) { wc.Spec.PrunePolicy = v1alpha1.PruneRetire })
	live := synced(t, wc, res)
	np := live.NodePools["web-on-demand-amd64"]
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("0")}
	np.Annotations = map[string]string{v1alpha1.AnnotationRetired: "true"}
	p := compute(t, plan.Input{Class: wc, Result: res, Live: live})
	s := p.Steps[2]
	if s.Action != plan.Revive {
		t.Fatalf("got %s", s.Action)
	}
	if _, ok := s.Object["metadata"].(map[string]any)["annotations"]; ok {
		t.Error("the retirement mark must go")
	}
	if got := s.Object["spec"].(map[string]any)["limits"].(map[string]any)["cpu"]; got != "100" {
		t.Errorf("limits not restored: %v", got)
	}
	// A retired rung still waiting for its nodes to drain is not written again.
	_, fewer := fixture(t, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.PrunePolicy = v1alpha1.PruneRetire
		wc.Spec.CapacityTypes = wc.Spec.CapacityTypes[:1]
	})
	np.Status.Nodes = ptr.To[int64](2)
	if p := compute(t, plan.Input{Class: wc, Result: fewer, Live: live}); p.Steps[len(p.Steps)-1].Action != plan.Retiring || p.Changed() {
		t.Errorf("got %s", actions(p))
	}
}

// withAccess restricts the class to namespace ml with a taint of its own.
func withAccess(wc *v1alpha1.WorkloadClass) {
	wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: wc.Name, Effect: corev1.TaintEffectNoSchedule}}
	wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml"}}
}

func TestTheAccessRuleIsPlannedAfterTheLadderAndLosesItsRestrictionUnderEveryPrunePolicyWhenTheRuleGoes(t *testing.T) {
	wc, res := fixture(t, withAccess)
	p := compute(t, plan.Input{Class: wc, Result: res})
	if got := actions(p); !strings.HasSuffix(got, "create AccessRule/web") {
		t.Fatalf("got %s, want it to end with create AccessRule/web", got)
	}
	if invalid := p.Validate(schema(t)); len(invalid) > 0 {
		t.Fatalf("refused in-process: %s: %v", invalid[0].Step.Ref(), invalid[0].Err)
	}
	live := synced(t, wc, res)
	if p := compute(t, plan.Input{Class: wc, Result: res, Live: live}); p.Changed() {
		t.Fatalf("a synced class with access must plan no write: %s", actions(p))
	}
	for _, policy := range []v1alpha1.PrunePolicy{v1alpha1.PruneDelete, v1alpha1.PruneRetire, v1alpha1.PruneOrphan} {
		open, opened := fixture(t, func(wc *v1alpha1.WorkloadClass) { wc.Spec.PrunePolicy = policy })
		open.UID = wc.UID
		p := compute(t, plan.Input{Class: open, Result: opened, Live: live})
		if got := actions(p); !strings.Contains(got, "update AccessRule/web") {
			t.Errorf("%s: removing spec.access must update its AccessRule: %s", policy, got)
		}
	}
}

func TestAHandEditedAccessRuleIsReverted(t *testing.T) {
	wc, res := fixture(t, withAccess)
	live := synced(t, wc, res)
	rule := live.Policies["AccessRule/web"].(*v1alpha1.AccessRule)
	rule.Spec.Rungs = nil
	p := compute(t, plan.Input{Class: wc, Result: res, Live: live})
	for _, s := range p.Steps {
		if s.Ref() == "AccessRule/web" {
			if s.Action != plan.Update || len(s.Changes) != 1 || s.Changes[0].Path != "spec.rungs" {
				t.Fatalf("got %s %v", s.Action, s.Changes)
			}
			return
		}
	}
	t.Fatal("no step for the AccessRule")
}

// A memo skips comparing a child that matched the same render over the same live object,
// and nothing else: a changed render or a changed live object is compared again.
func TestAMemoRemembersOnlyWhatStillHolds(t *testing.T) {
	wc, res := fixture(t)
	live := synced(t, wc, res)
	memo := &plan.Memo{}
	first := compute(t, plan.Input{Class: wc, Result: res, Live: live, Memo: memo})
	again := compute(t, plan.Input{Class: wc, Result: res, Live: live, Memo: memo})
	if actions(first) != actions(again) || again.Changed() {
		t.Fatalf("with a memo: %s, then %s", actions(first), actions(again))
	}

	// A hand edit: the live NodePool has a new resourceVersion and a foreign taint.
	edited := live.NodePools["web-spot-amd64"].DeepCopy()
	edited.ResourceVersion = "43"
	edited.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "evil", Effect: corev1.TaintEffectNoSchedule}}
	live.NodePools["web-spot-amd64"] = edited
	if got := actions(compute(t, plan.Input{Class: wc, Result: res, Live: live, Memo: memo})); !strings.Contains(got, "update NodePool/web-spot-amd64") {
		t.Fatalf("a live object edited since is compared again: %s", got)
	}

	// A new render (a Baseline tag) over the same live objects.
	_, tagged := fixture(t, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{Tags: map[string]string{"team": "web"}}
	})
	if got := actions(compute(t, plan.Input{Class: wc, Result: tagged, Live: synced(t, wc, res), Memo: memo})); !strings.Contains(got, "update EC2NodeClass/web") {
		t.Fatalf("a changed render is compared again: %s", got)
	}

	// Another class of the same name (deleted and created again) owns nothing remembered.
	other := wc.DeepCopy()
	other.UID = "uid-web-2"
	if got := actions(compute(t, plan.Input{Class: other, Result: res, Live: synced(t, wc, res), Memo: memo})); !strings.Contains(got, "update NodePool/web-on-demand-amd64") {
		t.Fatalf("children owned by an earlier class of the name are compared again: %s", got)
	}
}

// Adding the access taint to a restricted class's rungs (the upgrade that brings it, or
// spec.access newly set) changes Karpenter's NodePool hash: every rung drifts once, like a
// Baseline tag, and the notice says the taint is new and what pods need.
func TestTheAccessTaintDriftsEveryRungOnceAndTheNoticeSaysSo(t *testing.T) {
	wc, res := fixture(t, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
		wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"web"}}
	})
	// The family as a version without the access taint wrote it.
	live := synced(t, wc, res)
	for _, np := range live.NodePools {
		np.Spec.Template.Spec.Taints = slices.DeleteFunc(np.Spec.Template.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintAccess })
	}
	p := compute(t, plan.Input{Class: wc, Result: res, Live: live})
	for _, s := range p.Steps {
		if s.Kind == plan.KindNodePool && (s.Action != plan.Update || s.Drift != diff.WillDrift) {
			t.Errorf("%s: %s, drift %q; want an update that drifts", s.Ref(), s.Action, s.Drift)
		}
	}
	want := "NodePool/web-spot-amd64, NodePool/web-on-demand-amd64 will drift: Karpenter replaces their nodes; " +
		"the access taint poolsmith.dev/access:NoExecute is new on NodePool/web-spot-amd64, NodePool/web-on-demand-amd64: pods need its toleration to run on their nodes"
	if got := p.DriftNotice(); got != want {
		t.Errorf("notice:\n got %s\nwant %s", got, want)
	}
	// Once written, nothing drifts again.
	if again := compute(t, plan.Input{Class: wc, Result: res, Live: synced(t, wc, res)}); again.Changed() || again.DriftNotice() != "" {
		t.Errorf("after the write: %s, notice %q", actions(again), again.DriftNotice())
	}
}

func waves(p *plan.Plan) string {
	var out []string
	for _, w := range p.Waves() {
		var refs []string
		for _, s := range w {
			refs = append(refs, string(s.Action)+" "+s.Ref())
		}
		out = append(out, strings.Join(refs, ", "))
	}
	return strings.Join(out, " | ")
}

func TestWavesSendTheNodeClassFirstThenTheFamilyThenPruning(t *testing.T) {
	wc, res := fixture(t, withAccess)
	if got, want := waves(compute(t, plan.Input{Class: wc, Result: res})),
		"create EC2NodeClass/web | create NodePool/web-spot-amd64, create NodePool/web-on-demand-amd64, create AccessRule/web"; got != want {
		t.Errorf("a new class: got %s, want %s", got, want)
	}
	// One rung fewer, the other's expireAfter changed: the update goes before the delete
	// (the AccessRule keeps naming the rung while it exists).
	live := synced(t, wc, res)
	_, fewer := fixture(t, withAccess, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.CapacityTypes = wc.Spec.CapacityTypes[:1]
		wc.Spec.ExpireAfter = ptr.To(karpv1.MustParseNillableDuration("48h"))
	})
	got := waves(compute(t, plan.Input{Class: wc, Result: fewer, Live: live}))
	if want := "update NodePool/web-spot-amd64 | delete NodePool/web-on-demand-amd64"; got != want {
		t.Errorf("a rung fewer: got %s, want %s", got, want)
	}
	foreign := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web-on-demand-amd64"}}
	if w := compute(t, plan.Input{Class: wc, Result: res, Foreign: []client.Object{foreign}}).Waves(); len(w) != 0 {
		t.Errorf("a blocked plan has waves: %v", w)
	}
}
