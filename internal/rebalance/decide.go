package rebalance

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// MoveTimeout bounds a move: one that has not replaced its node by then is unmarked and
// counted as failed.
const MoveTimeout = 15 * time.Minute

// Recheck is how often a class with nodes on fallback rungs, or moves in progress, is
// looked at again.
const Recheck = 30 * time.Second

// Node is one of the class's NodeClaims.
type Node struct {
	NodeClaim string
	Rung      string
	Created   time.Time
	Deleting  bool
	// Marked: it carries Poolsmith's drift mark.
	Marked bool
}

// Input is what one pass decides from.
type Input struct {
	Now      time.Time
	Settings Settings
	// Rungs are the class's NodePools.
	Rungs []Rung
	Nodes []Node
	// Status is status.rebalance as the last pass left it.
	Status v1alpha1.RebalanceStatus
}

// Outcome is a settled move, for an event.
type Outcome struct {
	Move    v1alpha1.RebalanceMove
	Reason  string // ReasonRebalanceSucceeded or ReasonRebalanceFailed
	Message string
}

// Pass is what one pass decided before any pod is read.
type Pass struct {
	// Status is the new status.rebalance, without the moves this pass starts.
	Status v1alpha1.RebalanceStatus
	// Candidates are fallback nodes old enough to move, oldest first; Slots of them may
	// start moving now.
	Candidates []Node
	Slots      int
	// Unmark are marked NodeClaims whose move timed out.
	Unmark   []string
	Outcomes []Outcome
	// RequeueAfter is when to look again; 0 when nothing is pending.
	RequeueAfter time.Duration
}

// Decide settles finished moves, counts the class's fallback nodes and picks which may
// move, within the quiet period and maxConcurrent.
func Decide(in Input) Pass {
	rungs := byName(in.Rungs)
	top := topWeight(in.Rungs)
	nodes := map[string]Node{}
	for _, n := range in.Nodes {
		nodes[n.NodeClaim] = n
	}
	st := in.Status
	st.Moving = nil
	out := Pass{}
	for _, m := range in.Status.Moving {
		n, ok := nodes[m.NodeClaim]
		switch {
		case ok && !n.Marked && !n.Deleting:
			// Unmarked by a cancellation or by hand: no longer a move.
		case ok && !n.Deleting && in.Now.Sub(m.Started.Time) > MoveTimeout:
			out.Unmark = append(out.Unmark, m.NodeClaim)
			out.Outcomes = append(out.Outcomes, fail(&st, in, m, fmt.Sprintf("NodeClaim %s was not replaced within %s", m.NodeClaim, MoveTimeout)))
		case ok:
			st.Moving = append(st.Moving, m)
		default:
			out.Outcomes = append(out.Outcomes, settle(&st, in, m, rungs))
		}
	}
	moving := map[string]bool{}
	for _, m := range st.Moving {
		moving[m.NodeClaim] = true
	}
	// A marked NodeClaim the status does not list (its write was lost) is still moving.
	for _, n := range in.Nodes {
		if n.Marked && !n.Deleting && !moving[n.NodeClaim] {
			st.Moving = append(st.Moving, v1alpha1.RebalanceMove{NodeClaim: n.NodeClaim, From: n.Rung, To: "unknown", Started: metav1.Time{Time: in.Now.Truncate(time.Second)}})
			moving[n.NodeClaim] = true
		}
	}
	st.FallbackNodes, st.OldestFallback = 0, nil
	var fallback []Node
	for _, n := range in.Nodes {
		r, ok := rungs[n.Rung]
		if !ok || r.Weight >= top || n.Deleting {
			continue
		}
		st.FallbackNodes++
		if st.OldestFallback == nil || n.Created.Before(st.OldestFallback.Time) {
			st.OldestFallback = &metav1.Time{Time: n.Created}
		}
		if !moving[n.NodeClaim] && !n.Marked {
			fallback = append(fallback, n)
		}
	}
	// sort.SliceStable, not slices.SortStableFunc: a generic sort of Node is its own copy
	// of the sort in the binary (issue #23).
	sort.SliceStable(fallback, func(i, j int) bool { return fallback[i].Created.Before(fallback[j].Created) })
	if len(st.Moving) > 0 || len(fallback) > 0 {
		out.RequeueAfter = Recheck
	}
	switch {
	case in.Settings.Policy != v1alpha1.RebalancePreferred:
		st.Message = "spec.rebalance.policy is Off: no node moves"
		out.RequeueAfter = 0
	case st.QuietUntil != nil && in.Now.Before(st.QuietUntil.Time):
		st.Message = fmt.Sprintf("quiet until %s after %d failed moves in a row; the last: %s", st.QuietUntil.UTC().Format(time.RFC3339), st.FailuresInARow, st.LastFailure)
		out.RequeueAfter = min(max(out.RequeueAfter, Recheck), st.QuietUntil.Sub(in.Now)+time.Second)
	case len(fallback) == 0 && len(st.Moving) == 0:
		st.Message = "no node runs on a fallback rung"
	default:
		out.Slots = in.Settings.Concurrent(int(st.FallbackNodes)) - len(st.Moving)
		var young []Node
		for _, n := range fallback {
			if age := in.Now.Sub(n.Created); age >= in.Settings.After {
				out.Candidates = append(out.Candidates, n)
			} else {
				young = append(young, n)
			}
		}
		switch {
		case len(st.Moving) > 0 && out.Slots <= 0:
			st.Message = fmt.Sprintf("moving %s (maxConcurrent %s)", MovingNames(st.Moving), in.Settings.MaxConcurrent.String())
		case len(out.Candidates) == 0 && len(young) > 0:
			st.Message = fmt.Sprintf("%d nodes on fallback rungs, none has run there for %s yet", len(young), in.Settings.After)
			out.RequeueAfter = min(out.RequeueAfter, in.Settings.After-in.Now.Sub(young[0].Created)+time.Second)
		}
	}
	if in.Settings.Policy != v1alpha1.RebalancePreferred {
		out.Candidates, out.Slots = nil, 0
	}
	out.Status = st
	return out
}

// settle judges a move whose NodeClaim is gone by where the class's nodes created since
// it started landed: on a higher rung than it left (or nowhere: its pods fit elsewhere)
// is a success; on its rung or lower is a failure.
func settle(st *v1alpha1.RebalanceStatus, in Input, m v1alpha1.RebalanceMove, rungs map[string]Rung) Outcome {
	from := rungs[m.From].Weight
	var landed []string
	for _, n := range in.Nodes {
		if n.Created.Before(m.Started.Time.Add(-time.Second)) {
			continue
		}
		if r, ok := rungs[n.Rung]; ok && r.Weight <= from {
			return fail(st, in, m, fmt.Sprintf("NodeClaim %s was replaced by %s on rung %s, not above %s", m.NodeClaim, n.NodeClaim, n.Rung, m.From))
		}
		landed = append(landed, n.NodeClaim+" on "+n.Rung)
	}
	st.Succeeded++
	st.FailuresInARow = 0
	msg := fmt.Sprintf("NodeClaim %s left rung %s", m.NodeClaim, m.From)
	if len(landed) > 0 {
		msg += "; replaced by " + strings.Join(landed, ", ")
	}
	return Outcome{Move: m, Reason: v1alpha1.ReasonRebalanceSucceeded, Message: msg}
}

func fail(st *v1alpha1.RebalanceStatus, in Input, m v1alpha1.RebalanceMove, why string) Outcome {
	st.Failed++
	st.FailuresInARow++
	quiet := in.Settings.Quiet(st.FailuresInARow)
	st.QuietUntil = &metav1.Time{Time: in.Now.Add(quiet).Truncate(time.Second)}
	st.LastFailure = why
	return Outcome{Move: m, Reason: v1alpha1.ReasonRebalanceFailed, Message: fmt.Sprintf("%s; no node moves for %s", why, quiet)}
}

// MovingNames lists moves as "claim (from -> to)" for status and events.
func MovingNames(moves []v1alpha1.RebalanceMove) string {
	var names []string
	for _, m := range moves {
		names = append(names, m.NodeClaim+" ("+m.From+" -> "+m.To+")")
	}
	return strings.Join(names, ", ")
}

func byName(rungs []Rung) map[string]Rung {
	out := map[string]Rung{}
	for _, r := range rungs {
		out[r.Name] = r
	}
	return out
}

func topWeight(rungs []Rung) int32 {
	var top int32
	for _, r := range rungs {
		top = max(top, r.Weight)
	}
	return top
}

// IsMarked says whether the NodeClaim carries Poolsmith's drift mark: it is being moved.
func IsMarked(nc *karpv1.NodeClaim) bool {
	return nc.Annotations[karpv1.NodePoolHashAnnotationKey] == v1alpha1.RebalanceDriftHash
}
