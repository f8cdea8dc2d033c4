package rebalance_test

import (
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/rebalance"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// settings are a class's spec.rebalance as the renderer resolves it without a Baseline.
func settings(t *testing.T, r *v1alpha1.Rebalance) rebalance.Settings {
	t.Helper()
	class := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	class.Spec.Rebalance = r
	s := render.Resolve(render.Inputs{Class: class})
	if s.RebalanceErr != nil {
		t.Fatal(s.RebalanceErr)
	}
	return rebalance.Settings(s.Rebalance)
}

func preferred(mutate ...func(*v1alpha1.Rebalance)) *v1alpha1.Rebalance {
	r := &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred, After: &metav1.Duration{Duration: 10 * time.Minute}}
	for _, m := range mutate {
		m(r)
	}
	return r
}

// pool is a Ready rung of class web pinned to a capacity type and architecture.
func pool(name string, weight int32, capacity, arch string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Weight = ptr.To(weight)
	np.Spec.Template.Labels = map[string]string{v1alpha1.LabelClass: "web", v1alpha1.LabelRung: name}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{capacity}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
	}
	np.Status.Conditions = []status.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue}}
	return np
}

// ladder: spot arm64 (top), spot amd64, on-demand arm64.
func ladder() []rebalance.Rung {
	var out []rebalance.Rung
	for _, np := range []*karpv1.NodePool{pool("web-spot-arm64", 100, "spot", "arm64"), pool("web-spot-amd64", 99, "spot", "amd64"), pool("web-on-demand-arm64", 98, "on-demand", "arm64")} {
		r := rebalance.NewRung(np)
		r.Bucket = catalog.BucketUnder5
		out = append(out, r)
	}
	return out
}

func node(name, rung string, age time.Duration) rebalance.Node {
	return rebalance.Node{NodeClaim: name, Rung: rung, Created: now.Add(-age)}
}

func TestConcurrentAndQuiet(t *testing.T) {
	s := settings(t, preferred(func(r *v1alpha1.Rebalance) { r.MaxConcurrent = ptr.To(intstr.FromString("25%")) }))
	for fallback, want := range map[int]int{0: 1, 1: 1, 4: 1, 5: 2, 8: 2} {
		if got := s.Concurrent(fallback); got != want {
			t.Errorf("25%% of %d: got %d, want %d", fallback, got, want)
		}
	}
	if s.Quiet(1) != time.Hour || s.Quiet(3) != 4*time.Hour || s.Quiet(20) != rebalance.MaxQuietPeriod {
		t.Errorf("quiet: %s %s %s", s.Quiet(1), s.Quiet(3), s.Quiet(20))
	}
	if s.CapacityWindow() != time.Hour || settings(t, preferred(func(r *v1alpha1.Rebalance) { r.QuietPeriod = &metav1.Duration{Duration: time.Minute} })).CapacityWindow() != rebalance.KarpenterICEMemory {
		t.Error("the capacity window is the quiet period, at least Karpenter's ICE memory")
	}
}

func TestDecidePicksOldFallbackNodesWithinMaxConcurrent(t *testing.T) {
	in := rebalance.Input{Now: now, Settings: settings(t, preferred()), Rungs: ladder(), Nodes: []rebalance.Node{
		node("top-1", "web-spot-arm64", time.Hour),
		node("od-young", "web-on-demand-arm64", time.Minute),
		node("od-old", "web-on-demand-arm64", 2*time.Hour),
		node("od-older", "web-on-demand-arm64", 3*time.Hour),
	}}
	p := rebalance.Decide(in)
	if p.Slots != 1 || len(p.Candidates) != 2 || p.Candidates[0].NodeClaim != "od-older" {
		t.Fatalf("slots %d candidates %+v", p.Slots, p.Candidates)
	}
	if p.Status.FallbackNodes != 3 || !p.Status.OldestFallback.Time.Equal(now.Add(-3*time.Hour)) || p.RequeueAfter == 0 {
		t.Errorf("status %+v requeue %s", p.Status, p.RequeueAfter)
	}
	// One already moving fills maxConcurrent 1.
	in.Status.Moving = []v1alpha1.RebalanceMove{{NodeClaim: "od-older", From: "web-on-demand-arm64", To: "web-spot-arm64", Started: metav1.Time{Time: now.Add(-time.Minute)}}}
	in.Nodes[3].Marked = true
	if p := rebalance.Decide(in); p.Slots > 0 || !strings.Contains(p.Status.Message, "moving od-older") {
		t.Errorf("slots %d message %q", p.Slots, p.Status.Message)
	}
	// Off moves nothing.
	in.Settings.Policy = v1alpha1.RebalanceOff
	if p := rebalance.Decide(in); p.Slots != 0 || len(p.Candidates) != 0 {
		t.Errorf("Off: %+v", p)
	}
}

func TestDecideWaitsForAfter(t *testing.T) {
	p := rebalance.Decide(rebalance.Input{Now: now, Settings: settings(t, preferred()), Rungs: ladder(),
		Nodes: []rebalance.Node{node("od", "web-on-demand-arm64", 4*time.Minute)}})
	if len(p.Candidates) != 0 || p.RequeueAfter == 0 || p.RequeueAfter > 6*time.Minute+time.Second || !strings.Contains(p.Status.Message, "none has run there for 10m0s") {
		t.Errorf("candidates %v requeue %s message %q", p.Candidates, p.RequeueAfter, p.Status.Message)
	}
}

func TestSettleJudgesWhereTheReplacementLanded(t *testing.T) {
	started := now.Add(-5 * time.Minute)
	move := v1alpha1.RebalanceMove{NodeClaim: "od-1", From: "web-on-demand-arm64", To: "web-spot-arm64", Started: metav1.Time{Time: started}}
	for _, tc := range []struct {
		landed   string
		want     string
		failures int32
	}{
		{"web-spot-arm64", v1alpha1.ReasonRebalanceSucceeded, 0},
		{"web-spot-amd64", v1alpha1.ReasonRebalanceSucceeded, 0},
		{"web-on-demand-arm64", v1alpha1.ReasonRebalanceFailed, 2},
	} {
		in := rebalance.Input{Now: now, Settings: settings(t, preferred()), Rungs: ladder(),
			Status: v1alpha1.RebalanceStatus{Moving: []v1alpha1.RebalanceMove{move}, Started: 3, FailuresInARow: 1},
			Nodes:  []rebalance.Node{node("replacement", tc.landed, 4*time.Minute), node("before", "web-on-demand-arm64", time.Hour)}}
		p := rebalance.Decide(in)
		if len(p.Outcomes) != 1 || p.Outcomes[0].Reason != tc.want || p.Status.FailuresInARow != tc.failures || len(p.Status.Moving) != 0 {
			t.Errorf("landed on %s: outcomes %+v status %+v", tc.landed, p.Outcomes, p.Status)
			continue
		}
		if tc.want == v1alpha1.ReasonRebalanceFailed {
			// The second failure in a row doubles the quiet period, and nothing moves in it.
			if !p.Status.QuietUntil.Time.Equal(now.Add(2*time.Hour)) || p.Status.Failed != 1 || len(p.Candidates) != 0 || p.Slots != 0 {
				t.Errorf("quiet: %+v", p.Status)
			}
			in.Status = p.Status
			in.Now = now.Add(90 * time.Minute)
			if p := rebalance.Decide(in); len(p.Candidates) != 0 || !strings.Contains(p.Status.Message, "quiet until") || !strings.Contains(p.Status.Message, "replaced by replacement on rung web-on-demand-arm64") {
				t.Errorf("inside the quiet period: %+v", p)
			}
			in.Now = now.Add(2*time.Hour + time.Second)
			if p := rebalance.Decide(in); len(p.Candidates) != 2 || p.Slots != 1 {
				t.Errorf("after the quiet period: %+v", p)
			}
		} else if p.Status.Succeeded != 1 {
			t.Errorf("succeeded %d", p.Status.Succeeded)
		}
	}
}

func TestAMoveThatDoesNotFinishIsUnmarkedAndFails(t *testing.T) {
	move := v1alpha1.RebalanceMove{NodeClaim: "od-1", From: "web-on-demand-arm64", To: "web-spot-arm64", Started: metav1.Time{Time: now.Add(-rebalance.MoveTimeout - time.Second)}}
	n := node("od-1", "web-on-demand-arm64", time.Hour)
	n.Marked = true
	p := rebalance.Decide(rebalance.Input{Now: now, Settings: settings(t, preferred()), Rungs: ladder(), Nodes: []rebalance.Node{n},
		Status: v1alpha1.RebalanceStatus{Moving: []v1alpha1.RebalanceMove{move}}})
	if len(p.Unmark) != 1 || p.Status.Failed != 1 || p.Status.QuietUntil == nil {
		t.Errorf("%+v", p)
	}
}

func TestUnavailableNamesTheMissingEvidence(t *testing.T) {
	s := settings(t, preferred(func(r *v1alpha1.Rebalance) { r.MaxInterruption = "5-10%" }))
	need := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	for _, tc := range []struct {
		name   string
		mutate func(*rebalance.Rung)
		want   string
	}{
		{"fit", func(*rebalance.Rung) {}, ""},
		{"not ready", func(r *rebalance.Rung) { r.NodePool.Status.Conditions[0].Status = metav1.ConditionFalse }, "is not Ready"},
		{"at limits", func(r *rebalance.Rung) {
			r.NodePool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
			r.NodePool.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}
		}, "at its cpu limit (7 used of 8)"},
		{"recent capacity error", func(r *rebalance.Rung) { r.LastCapacityError = now.Add(-30 * time.Minute) }, "failed for insufficient capacity"},
		{"old capacity error", func(r *rebalance.Rung) { r.LastCapacityError = now.Add(-2 * time.Hour) }, ""},
		{"stale signals", func(r *rebalance.Rung) { r.SignalsProblem = "Stale: fetched long ago" }, "spot signals are not fresh: Stale"},
		{"interruption too high", func(r *rebalance.Rung) { r.Bucket = catalog.Bucket10To15 }, "is 10-15% at best, above maxInterruption 5-10%"},
		{"no figure", func(r *rebalance.Rung) { r.Bucket = catalog.BucketUnknown }, "no interruption figure"},
	} {
		r := ladder()[0]
		tc.mutate(&r)
		got := r.Unavailable(s, now, need)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// On-demand rungs need no spot signals.
	od := ladder()[2]
	od.SignalsProblem = "Missing"
	if got := od.Unavailable(s, now, need); got != "" {
		t.Errorf("on-demand: %q", got)
	}
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "web"}}}
	p.Spec.NodeSelector = map[string]string{v1alpha1.LabelClass: "web"}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestTargetIsTheHighestRungThatHostsEveryPod(t *testing.T) {
	amd64 := func(p *corev1.Pod) { p.Spec.NodeSelector[corev1.LabelArchStable] = "amd64" }
	for _, tc := range []struct {
		from string
		pods []*corev1.Pod
		want string
	}{
		{"web-on-demand-arm64", []*corev1.Pod{pod("a")}, "web-spot-arm64"},
		{"web-on-demand-arm64", []*corev1.Pod{pod("a"), pod("b", amd64)}, "web-spot-amd64"},
		{"web-spot-amd64", []*corev1.Pod{pod("b", amd64)}, ""},
		{"web-on-demand-arm64", []*corev1.Pod{pod("c", func(p *corev1.Pod) { p.Spec.NodeSelector[v1alpha1.LabelRung] = "web-on-demand-arm64" })}, ""},
	} {
		got, ok := rebalance.Target(ladder(), tc.from, tc.pods)
		if ok != (tc.want != "") || got.Name != tc.want {
			t.Errorf("from %s: got %q %v, want %q", tc.from, got.Name, ok, tc.want)
		}
	}
}

func TestBlockerHonoursDoNotDisruptAndPDBs(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "od-1"}}
	pdb := func(allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	pinned := pod("pinned", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		pdbs []policyv1.PodDisruptionBudget
		want string
	}{
		{"free", []*corev1.Pod{pod("a")}, nil, ""},
		{"do-not-disrupt pod", []*corev1.Pod{pod("a"), pinned}, nil, "pod shop/pinned has karpenter.sh/do-not-disrupt"},
		{"PDB at zero", []*corev1.Pod{pod("a")}, []policyv1.PodDisruptionBudget{pdb(0)}, "PodDisruptionBudget shop/web allows no disruption of pod a"},
		{"PDB allowing one", []*corev1.Pod{pod("a")}, []policyv1.PodDisruptionBudget{pdb(1)}, ""},
	} {
		if got := rebalance.Blocker(nc, nil, tc.pods, tc.pdbs); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	nc.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	if got := rebalance.Blocker(nc, nil, nil, nil); !strings.Contains(got, "NodeClaim od-1 has") {
		t.Errorf("NodeClaim annotation: %q", got)
	}
}

func TestCapacityErrorRung(t *testing.T) {
	if got := rebalance.CapacityErrorRung("web-spot-amd64-m7i-x8k2p"); got != "web-spot-amd64-m7i" {
		t.Errorf("got %q", got)
	}
}

func TestAMarkedNodeTheStatusDoesNotListStillCountsAsMoving(t *testing.T) {
	marked := node("od-1", "web-on-demand-arm64", time.Hour)
	marked.Marked = true
	p := rebalance.Decide(rebalance.Input{Now: now, Settings: settings(t, preferred()), Rungs: ladder(),
		Nodes: []rebalance.Node{marked, node("od-2", "web-on-demand-arm64", time.Hour)}})
	if p.Slots > 0 || len(p.Status.Moving) != 1 || p.Status.Moving[0].NodeClaim != "od-1" {
		t.Errorf("slots %d moving %+v", p.Slots, p.Status.Moving)
	}
}

// TestSignalsDatedInTheFutureJustifyNoMove: the evidence a spot rung gets from signals
// whose fetched-at is years ahead is that they are not fresh, so no move goes to it.
func TestSignalsDatedInTheFutureJustifyNoMove(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-signals", Namespace: "poolsmith-system",
			Annotations: map[string]string{signals.FetchedAtAnnotation: "2999-01-01T00:00:00Z"}},
		Data: map[string]string{signals.AdvisorKey: `{"ranges":[{"index":0,"label":"<5%"}],"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":60,"r":0}}}}}`},
	}
	s, err := signals.FromConfigMap(cm, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	r := ladder()[0]
	r.SignalsProblem = rebalance.SignalsProblem(signals.Assess(s, "", now, 48*time.Hour))
	got := r.Unavailable(settings(t, preferred()), now, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	if !strings.Contains(got, "spot signals are not fresh: Stale") || !strings.Contains(got, "in the future") {
		t.Errorf("a spot rung priced by signals from 2999: %q", got)
	}
	fresh := ladder()[0]
	cm.Annotations[signals.FetchedAtAnnotation] = now.Add(-time.Hour).Format(time.RFC3339)
	if s, err = signals.FromConfigMap(cm, "us-east-1"); err != nil {
		t.Fatal(err)
	}
	fresh.SignalsProblem = rebalance.SignalsProblem(signals.Assess(s, "", now, 48*time.Hour))
	if got := fresh.Unavailable(settings(t, preferred()), now, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}); got != "" {
		t.Errorf("fresh signals: %q", got)
	}
}
