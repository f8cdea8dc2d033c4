package controllers

import (
	"errors"
	"slices"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// The conditions function alone, without an API server: each outcome of a pass, with or
// without an error, against the conditions and status fields it must leave.

const statusGen = 3

func cond(typ string, s metav1.ConditionStatus, reason, message string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: gen}
}

// karpenterConds are a Karpenter object's conditions: Ready with s, and when it is False
// the condition that fails it.
func karpenterConds(s metav1.ConditionStatus) []status.Condition {
	conds := []status.Condition{{Type: status.ConditionReady, Status: s, Reason: "Test"}}
	if s == metav1.ConditionFalse {
		conds = append(conds, status.Condition{Type: "ValidationSucceeded", Status: metav1.ConditionFalse, Reason: "Refused", Message: "bad requirement"})
	}
	return conds
}

// rendered is a two-rung render of class web.
func rendered(costBased bool) *render.Result {
	res := &render.Result{Class: "web", Profile: v1alpha1.ProfileGeneral, CostBased: costBased,
		NodeClass: &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}}}
	for i, name := range []string{"web-spot-amd64", "web-on-demand-amd64"} {
		ct := []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand}[i]
		res.NodePools = append(res.NodePools, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}})
		res.Rungs = append(res.Rungs, render.Rung{Name: name, Weight: int32(100 - i), CapacityType: ct, Arch: v1alpha1.ArchitectureAMD64, WeightReason: "ladder order"})
	}
	return res
}

// live are web's children as Karpenter reports them: the EC2NodeClass with nodeClass,
// each NodePool with pools (nil: no such child).
func live(nodeClass []status.Condition, pools ...[]status.Condition) plan.Children {
	c := plan.Children{NodePools: map[string]*karpv1.NodePool{}}
	if nodeClass != nil {
		c.NodeClass = &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Status: awsv1.EC2NodeClassStatus{Conditions: nodeClass}}
	}
	for i, name := range []string{"web-spot-amd64", "web-on-demand-amd64"} {
		if i < len(pools) && pools[i] != nil {
			c.NodePools[name] = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodePoolStatus{Conditions: pools[i]}}
		}
	}
	return c
}

func allReady() plan.Children {
	return live(karpenterConds(metav1.ConditionTrue), karpenterConds(metav1.ConditionTrue), karpenterConds(metav1.ConditionTrue))
}

// applied is the outcome of a pass that wrote the whole family and finished.
func applied(res *render.Result, children plan.Children, mutate ...func(*outcome)) outcome {
	o := outcome{Rendered: res, Live: children, Applied: true, Ladder: true, Access: &access{},
		Signals: &signals.Freshness{Status: "True", Reason: v1alpha1.ReasonFresh, Message: "fresh"}, CostBased: res.CostBased}
	for _, m := range mutate {
		m(&o)
	}
	return o
}

func blocked(reason, message string, mutate ...func(*outcome)) outcome {
	o := outcome{}
	o.fail(reason, message)
	for _, m := range mutate {
		m(&o)
	}
	return o
}

const (
	appliedMsg      = "EC2NodeClass web and 2 NodePools match the render"
	allReadyMsg     = "Karpenter reports EC2NodeClass web and 2 NodePools Ready"
	openMsg         = "no access rule: any namespace may use the class"
	baselineMissing = `Baseline "default" does not exist; existing children are left as they are until it does`
)

var (
	syncedBefore = cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen-1)
	readyBefore  = cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen-1)
	accessBefore = cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen-1)
	oldRungs     = []v1alpha1.RungStatus{{Name: "web-old", Weight: 7}}
)

func TestSetStatus(t *testing.T) {
	transient := errors.New("etcdserver: request timed out")
	restricted := &v1alpha1.Access{Namespaces: []string{"team-a"}}
	cases := []struct {
		name   string
		access *v1alpha1.Access
		// before is the status the pass starts from.
		before v1alpha1.WorkloadClassStatus
		o      outcome
		err    error

		want           []metav1.Condition
		wantObserved   int64
		wantNewFailure bool
		check          func(t *testing.T, st v1alpha1.WorkloadClassStatus)
	}{{
		name: "applied, Karpenter reports every child Ready",
		o:    applied(rendered(false), allReady()),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.Profile != v1alpha1.ProfileGeneral || st.NodeClass != "web" || st.PoolCount != 2 {
				t.Errorf("profile, nodeClass, poolCount = %q, %q, %d", st.Profile, st.NodeClass, st.PoolCount)
			}
			if len(st.NodePools) != 2 || st.NodePools[0].Name != "web-spot-amd64" || st.NodePools[0].Ready != metav1.ConditionTrue || st.NodePools[0].Reason != "weight 100: ladder order" {
				t.Errorf("nodePools = %+v", st.NodePools)
			}
		},
	}, {
		name: "applied, Karpenter has not reported on every child",
		o:    applied(rendered(false), live(karpenterConds(metav1.ConditionTrue), karpenterConds(metav1.ConditionUnknown))),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonAwaitingKarpenter, "Karpenter has not reported Ready for NodePool/web-spot-amd64, NodePool/web-on-demand-amd64", statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
	}, {
		name: "applied, a NodePool reports Ready=False",
		o:    applied(rendered(false), live(karpenterConds(metav1.ConditionTrue), karpenterConds(metav1.ConditionTrue), karpenterConds(metav1.ConditionFalse))),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNodePoolNotReady, "NodePool web-on-demand-amd64: ValidationSucceeded=False (Refused): bad requirement", statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if r := st.NodePools[1]; r.Ready != metav1.ConditionFalse || r.Reason != "ValidationSucceeded=False (Refused): bad requirement" {
				t.Errorf("the failing rung reports %+v", r)
			}
		},
	}, {
		name: "applied, the EC2NodeClass reports Ready=False",
		o:    applied(rendered(false), live(karpenterConds(metav1.ConditionFalse))),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNodeClassNotReady, "EC2NodeClass web: ValidationSucceeded=False (Refused): bad requirement", statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
	}, {
		name: "a cost-weighted class reports its signals",
		o: applied(rendered(true), allReady(), func(o *outcome) {
			o.Signals = &signals.Freshness{Status: "False", Reason: v1alpha1.ReasonStale, Message: "signals are 3 days old"}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
			cond(v1alpha1.ConditionSignalsCurrent, metav1.ConditionFalse, v1alpha1.ReasonStale, "signals are 3 days old", statusGen),
		},
		wantObserved: statusGen,
	}, {
		name: "a class turned Static drops SignalsCurrent",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore, accessBefore,
			cond(v1alpha1.ConditionSignalsCurrent, metav1.ConditionTrue, v1alpha1.ReasonFresh, "fresh", statusGen-1)}},
		o: applied(rendered(false), allReady()),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
	}, {
		name:   "applied, then reading the namespace defaults failed: observedGeneration stays",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore, accessBefore}},
		o: applied(rendered(false), allReady(), func(o *outcome) {
			o.Access, o.Signals = nil, nil
		}),
		err: transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			accessBefore,
		},
		wantObserved: statusGen - 1,
	}, {
		name:   "the Baseline is missing: Synced and Ready False, the rest as it was",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore, accessBefore}, Profile: v1alpha1.ProfileGPU, NodePools: oldRungs, PoolCount: 1},
		o:      blocked(v1alpha1.ReasonBaselineNotFound, baselineMissing),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonBaselineNotFound, baselineMissing, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: BaselineNotFound", statusGen),
			accessBefore,
		},
		wantObserved:   statusGen - 1,
		wantNewFailure: true,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.Profile != v1alpha1.ProfileGPU || !equality.Semantic.DeepEqual(st.NodePools, oldRungs) || st.PoolCount != 1 {
				t.Errorf("a class that did not render changed profile, nodePools or poolCount: %+v", st)
			}
		},
	}, {
		name: "the same failure again is not announced again",
		before: v1alpha1.WorkloadClassStatus{Conditions: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonBaselineNotFound, baselineMissing, statusGen)}},
		o: blocked(v1alpha1.ReasonBaselineNotFound, baselineMissing),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonBaselineNotFound, baselineMissing, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: BaselineNotFound", statusGen),
		},
	}, {
		name: "the same failure on a new generation is announced",
		before: v1alpha1.WorkloadClassStatus{Conditions: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonBaselineNotFound, baselineMissing, statusGen-1)}},
		o: blocked(v1alpha1.ReasonBaselineNotFound, baselineMissing),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonBaselineNotFound, baselineMissing, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: BaselineNotFound", statusGen),
		},
		wantNewFailure: true,
	}, {
		name:   "a foreign object holds a name: the ladder is reported and the kept access rule lags",
		access: restricted,
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore,
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced, "enforced", statusGen-1)}},
		o: blocked(v1alpha1.ReasonOwnershipConflict, "NodePool/web-spot-amd64 already exists", func(o *outcome) {
			o.Rendered, o.Live, o.Ladder = rendered(false), live(nil), true
			o.Access = &access{Kept: &v1alpha1.AccessRule{Spec: v1alpha1.AccessRuleSpec{Allowed: "namespaces team-a", Access: []v1alpha1.Access{*restricted}}}}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonOwnershipConflict, "NodePool/web-spot-amd64 already exists", statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: OwnershipConflict", statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonAccessLagging, "the NodePool family is not written (OwnershipConflict): AccessRule web enforces access for namespaces team-a, with the taints and rungs of the family that exists; a wider spec.access takes effect once the family is written", statusGen),
		},
		wantObserved:   statusGen - 1,
		wantNewFailure: true,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if len(st.NodePools) != 2 || st.NodePools[0].Ready != metav1.ConditionUnknown || st.PoolCount != 2 || st.NodeClass != "web" {
				t.Errorf("a blocked class reports its ladder: %+v", st)
			}
		},
	}, {
		name:   "an open class's kept rule restricts nothing: Access stays",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore, accessBefore}, NodePools: oldRungs},
		o: blocked(v1alpha1.ReasonApplyFailed, "update NodePool/web-spot-amd64: refused", func(o *outcome) {
			o.Rendered, o.Live = rendered(false), allReady()
			o.Access = &access{Kept: &v1alpha1.AccessRule{}}
		}),
		err: transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, "update NodePool/web-spot-amd64: refused", statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: ApplyFailed", statusGen),
			accessBefore,
		},
		wantObserved:   statusGen - 1,
		wantNewFailure: true,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if !equality.Semantic.DeepEqual(st.NodePools, oldRungs) {
				t.Errorf("a failed apply changed status.nodePools: %+v", st.NodePools)
			}
		},
	}, {
		name:   "refused by Karpenter's CRDs: profile and nodeClass follow the render, nodePools stay",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Profile: v1alpha1.ProfileGPU, NodePools: oldRungs, PoolCount: 1},
		o: blocked(v1alpha1.ReasonInvalidSpec, "Karpenter's CRDs refuse the rendered objects", func(o *outcome) {
			o.Rendered, o.Live = rendered(false), live(nil)
		}),
		err: transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, "Karpenter's CRDs refuse the rendered objects", statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: InvalidSpec", statusGen),
		},
		wantObserved:   statusGen - 1,
		wantNewFailure: true,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.Profile != v1alpha1.ProfileGeneral || st.NodeClass != "web" || !equality.Semantic.DeepEqual(st.NodePools, oldRungs) || st.PoolCount != 1 {
				t.Errorf("status = %+v", st)
			}
		},
	}, {
		name:   "deleting: Synced says what the finalizer waits for, nothing else changes",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore}},
		o:      outcome{Deleting: "deleting EC2NodeClass web"},
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonDeleting, "deleting EC2NodeClass web", statusGen),
			readyBefore,
		},
		wantObserved: statusGen - 1,
	}, {
		name:   "an error after a spec change: Reconciling, and no stale Ready=True",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore, accessBefore}},
		err:    transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "generation 3 is not applied yet", statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "generation 3 is not applied yet; readiness is assessed once it is", statusGen),
			accessBefore,
		},
		wantObserved: statusGen - 1,
	}, {
		name:   "a lost write race after a spec change: the same, without an error",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen - 1, Conditions: []metav1.Condition{syncedBefore, readyBefore}},
		o:      outcome{Rendered: rendered(false), Live: allReady()},
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "generation 3 is not applied yet", statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "generation 3 is not applied yet; readiness is assessed once it is", statusGen),
		},
		wantObserved: statusGen - 1,
	}, {
		name: "an error on a new class: Reconciling, no Ready yet",
		err:  transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "generation 3 is not applied yet", statusGen),
		},
	}, {
		name: "an error on a generation already applied keeps its verdict",
		before: v1alpha1.WorkloadClassStatus{ObservedGeneration: statusGen, Conditions: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen)}},
		err: transient,
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
		},
		wantObserved: statusGen,
	}, {
		name: "access rules disabled",
		o:    applied(rendered(false), allReady(), func(o *outcome) { o.Access = &access{Disabled: true} }),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonAccessDisabled, "the manager runs with --access-policies=false: spec.access and namespace defaults are not enforced", statusGen),
		},
		wantObserved: statusGen,
	}, {
		name:   "a default namespace the rule excludes",
		access: restricted,
		o: applied(rendered(false), allReady(), func(o *outcome) {
			o.Access = &access{Defaults: []corev1.Namespace{namespace("team-b"), namespace("team-a")}}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonDefaultExcluded, "namespaces team-b name this class their default (poolsmith.dev/default-class) but spec.access excludes them: their pods get no defaults from it", statusGen),
		},
		wantObserved: statusGen,
	}, {
		name: "namespace defaults unavailable",
		o: applied(rendered(false), allReady(), func(o *outcome) {
			o.Access = &access{NoDefaults: true, Defaults: []corev1.Namespace{namespace("team-a")}}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonDefaultsUnavailable, "the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: namespace defaults (poolsmith.dev/default-class) are not applied; access rules are still enforced; default class of namespaces team-a", statusGen),
		},
		wantObserved: statusGen,
	}, {
		name:   "access enforced, with the namespaces that default to the class",
		access: restricted,
		o: applied(rendered(false), allReady(), func(o *outcome) {
			o.Access = &access{Defaults: []corev1.Namespace{namespace("team-a")}}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced, "ValidatingAdmissionPolicy poolsmith-access refuses pods of other namespaces that could run on the class, through AccessRule web; default class of namespaces team-a", statusGen),
		},
		wantObserved: statusGen,
	}, {
		name:   "a drift notice is kept until a write without drift",
		before: v1alpha1.WorkloadClassStatus{DriftNotice: "old notice"},
		o:      applied(rendered(false), allReady()),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.DriftNotice != "old notice" {
				t.Errorf("a pass that wrote nothing changed driftNotice to %q", st.DriftNotice)
			}
		},
	}, {
		name:   "a write without drift clears the notice, a retiring rung is listed",
		before: v1alpha1.WorkloadClassStatus{DriftNotice: "old notice"},
		o: applied(rendered(false), allReady(), func(o *outcome) {
			o.Changed = true
			o.Retiring = []*karpv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "web-spot-arm64"}, Spec: karpv1.NodePoolSpec{Weight: ptr.To(int32(98))}}}
		}),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.DriftNotice != "" {
				t.Errorf("driftNotice = %q", st.DriftNotice)
			}
			if len(st.NodePools) != 3 || st.NodePools[2].Name != "web-spot-arm64" || st.NodePools[2].Weight != 98 || st.NodePools[2].Ready != metav1.ConditionFalse || st.PoolCount != 2 {
				t.Errorf("nodePools = %+v, poolCount %d", st.NodePools, st.PoolCount)
			}
		},
	}, {
		name: "an update that drifts nodes sets the notice",
		o:    applied(rendered(false), allReady(), func(o *outcome) { o.Changed, o.Drift = true, "NodePool web-spot-amd64 will drift" }),
		want: []metav1.Condition{
			cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, appliedMsg, statusGen),
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, statusGen),
			cond(v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, openMsg, statusGen),
		},
		wantObserved: statusGen,
		check: func(t *testing.T, st v1alpha1.WorkloadClassStatus) {
			if st.DriftNotice != "NodePool web-spot-amd64 will drift" {
				t.Errorf("driftNotice = %q", st.DriftNotice)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: statusGen}, Spec: v1alpha1.WorkloadClassSpec{Access: tc.access}}
			wc.Status = *tc.before.DeepCopy()

			newFailure := setStatus(wc, tc.o, tc.err)

			got := slices.Clone(wc.Status.Conditions)
			for i := range got {
				got[i].LastTransitionTime = metav1.Time{}
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("conditions:\n got %+v\nwant %+v", got, tc.want)
			}
			if wc.Status.ObservedGeneration != tc.wantObserved {
				t.Errorf("status.observedGeneration = %d, want %d", wc.Status.ObservedGeneration, tc.wantObserved)
			}
			if newFailure != tc.wantNewFailure {
				t.Errorf("new failure to announce = %v, want %v", newFailure, tc.wantNewFailure)
			}
			// Whatever the outcome, an error never leaves Ready=True beside a Synced that
			// is not True for the current generation.
			if tc.err != nil {
				if r := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionReady); r != nil && r.Status == metav1.ConditionTrue {
					s := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
					if s.Status != metav1.ConditionTrue || s.ObservedGeneration != wc.Generation || r.ObservedGeneration != wc.Generation {
						t.Errorf("an error left Ready=True (generation %d) beside %s=%s (generation %d)", r.ObservedGeneration, s.Type, s.Status, s.ObservedGeneration)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, wc.Status)
			}
		})
	}
}

func namespace(name string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// A pass that reaches no verdict leaves every Ready=True standing only beside a Synced=True
// of the current generation, whatever status it starts from.
func TestSetStatusNeverLeavesStaleReady(t *testing.T) {
	statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	for _, synced := range statuses {
		for _, syncedGen := range []int64{statusGen - 1, statusGen} {
			for _, readyGen := range []int64{statusGen - 1, statusGen} {
				wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: statusGen}}
				wc.Status.Conditions = []metav1.Condition{
					cond(v1alpha1.ConditionSynced, synced, "Before", "before", syncedGen),
					cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady, allReadyMsg, readyGen),
				}
				setStatus(wc, outcome{}, errors.New("transient"))
				s := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
				r := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionReady)
				if r.Status == metav1.ConditionTrue && (s.Status != metav1.ConditionTrue || s.ObservedGeneration != statusGen) {
					t.Errorf("Synced=%s (generation %d), Ready=True (generation %d): after the error Ready is still True beside Synced=%s (generation %d)",
						synced, syncedGen, readyGen, s.Status, s.ObservedGeneration)
				}
			}
		}
	}
}
