package controllers

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/render"
)

// classCommitments is status.commitments from what the pass tracked and rendered: per
// declared commitment the class's entitlement, what its nodes use of it, its state and
// the rungs it priced. Entries the manager leaves out are named by CommitmentsCurrent.
func classCommitments(cov *observe.Coverage, res *render.Result) []v1alpha1.ClassCommitmentStatus {
	var out []v1alpha1.ClassCommitmentStatus
	for _, c := range cov.Declared {
		ent := cov.Entitlements[c.ID]
		used := cov.Ledger.Used[c.ID]
		s := v1alpha1.ClassCommitmentStatus{ID: c.ID, Kind: kindOf(c), Entitlement: amountOf(c, ent), Used: amountOf(c, used), UsedRatio: ratio(used, ent),
			Nodes: coveredNodes(cov.Ledger, c.ID)}
		switch st, ok := cov.States[c.ID]; {
		case cov.Ignore:
			s.State = v1alpha1.CommitmentIgnored
		case ok:
			s.State = v1alpha1.CommitmentExhausted
			if st.Open {
				s.State = v1alpha1.CommitmentOpen
			}
			s.Since = metaTime(st.Since)
			s.OpenPendingSince = metaTime(st.OpenPendingSince)
		}
		if res != nil {
			for _, rung := range res.Rungs {
				if rung.Commitment == c.ID {
					s.Rungs = append(s.Rungs, rung.Name)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// commitmentsCondition is CommitmentsCurrent: False naming every entry the manager leaves
// out (the first one's reason), True otherwise.
func commitmentsCondition(cov *observe.Coverage) (metav1.ConditionStatus, string, string) {
	if len(cov.LeftOut) == 0 {
		return metav1.ConditionTrue, v1alpha1.ReasonCommitmentsCurrent,
			fmt.Sprintf("every commitment of the Baseline is in use (%d); the class's part: %s", len(cov.Declared), cov.Rule)
	}
	msgs := make([]string, len(cov.LeftOut))
	for i, p := range cov.LeftOut {
		msgs[i] = p.Message
	}
	return metav1.ConditionFalse, cov.LeftOut[0].Reason,
		"left out, the class renders without them: " + strings.Join(msgs, "; ")
}

// requeueForCommitments brings the class back when an Exhausted commitment's dwell ends,
// and when a commitment ends.
func requeueForCommitments(result ctrl.Result, cov *observe.Coverage, dwell time.Duration, now time.Time) ctrl.Result {
	if cov == nil {
		return result
	}
	if dwell == 0 {
		dwell = commitment.DefaultOpenDwell
	}
	for _, st := range cov.States {
		if !st.Open && !st.OpenPendingSince.IsZero() {
			result.RequeueAfter = sooner(result.RequeueAfter, max(st.OpenPendingSince.Add(dwell).Sub(now), 0)+time.Second)
		}
	}
	// A plan that ends stops ranking then, without another event.
	for _, c := range cov.Declared {
		if c.End != nil {
			result.RequeueAfter = sooner(result.RequeueAfter, c.End.Sub(now)+time.Second)
		}
	}
	return result
}

// announceCommitments emits an event for each commitment whose state the pass changed,
// and sets the class's commitment gauges.
func (r *WorkloadClassReconciler) announceCommitments(wc *v1alpha1.WorkloadClass, o outcome) {
	if !o.Applied {
		return
	}
	cov := o.Commitments
	recordClassCommitments(wc.Name, wc.BaselineName(), cov)
	if cov == nil {
		return
	}
	for _, c := range cov.Flipped() {
		room := cov.Ledger.Room(c, cov.Entitlements[c.ID])
		if cov.States[c.ID].Open {
			r.event(wc, nil, "Normal", "CommitmentOpen", "Commitments", "%s is Open again: %s of room held for the dwell; the rungs it covers rank by its price", c.Describe(), amountOf(c, room))
		} else {
			r.event(wc, nil, "Normal", "CommitmentExhausted", "Commitments", "%s is Exhausted for the class: %s of room is less than one node (%s); the rungs it covers rank at list prices", c.Describe(), amountOf(c, room), amountOf(c, cov.NodeDraw[c.ID]))
		}
	}
}

func kindOf(c commitment.Commitment) string {
	if c.Kind == commitment.ReservedInstance {
		return v1alpha1.CommitmentKindReservedInstance
	}
	return v1alpha1.CommitmentKindSavingsPlan
}

// amountOf prints a figure in c's unit: "$0.6000/h", or "8 units" of a Reserved Instance.
func amountOf(c commitment.Commitment, v float64) string {
	if c.Kind == commitment.ReservedInstance {
		return fmt.Sprintf("%.4g units", v)
	}
	return fmt.Sprintf("$%.4f/h", v)
}

// ratio is used over of, from 0 to 1, three decimals.
func ratio(used, of float64) string {
	if of <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.3f", min(used/of, 1))
}

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}
