package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/plan"
)

// A pass that plans to create a child this manager created moments ago waits for the
// cache instead (two requests for nothing, and a count past children + 2), but never
// for a child deleted since, nor past cacheLagBound, nor for a child it only updated.
func TestAwaitingCacheOnlyForOwnRecentCreates(t *testing.T) {
	r := &WorkloadClassReconciler{}
	create := &plan.Plan{Steps: []plan.Step{
		{Action: plan.Unchanged, Kind: "EC2NodeClass", Name: "c"},
		{Action: plan.Create, Kind: "NodePool", Name: "c-spot"},
	}}
	if got := r.awaitingCache(create); got != "" {
		t.Fatalf("nothing written yet: awaitingCache = %q, want none", got)
	}

	r.ownWrites.Store("NodePool/c-spot", ownWrite{resourceVersion: "7", created: time.Now()})
	if got := r.awaitingCache(create); got != "NodePool/c-spot" {
		t.Fatalf("created a moment ago: awaitingCache = %q, want NodePool/c-spot", got)
	}

	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "c-spot", ResourceVersion: "7"}}
	if !r.notOwnWrite().Delete(event.DeleteEvent{Object: np}) {
		t.Fatal("a deletion must plan the class")
	}
	if got := r.awaitingCache(create); got != "" {
		t.Fatalf("deleted since: awaitingCache = %q, want none (the pass must create it again)", got)
	}

	r.ownWrites.Store("NodePool/c-spot", ownWrite{resourceVersion: "8", created: time.Now().Add(-cacheLagBound)})
	if got := r.awaitingCache(create); got != "" {
		t.Fatalf("created %s ago: awaitingCache = %q, want none", cacheLagBound, got)
	}

	r.ownWrites.Store("NodePool/c-spot", ownWrite{resourceVersion: "9"})
	if got := r.awaitingCache(create); got != "" {
		t.Fatalf("only updated: awaitingCache = %q, want none", got)
	}
}
