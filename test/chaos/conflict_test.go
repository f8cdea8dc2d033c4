//go:build chaos

package chaos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// TestConflictingWriter has a second writer change generated NodePools' weights in a
// tight loop for CHAOS_CONFLICT_DURATION (default 30s). The manager must keep reverting
// them with at most one write per foreign write, settle once the writer stops, and then
// write nothing (no hot loop). The audit log counts both sides.
func TestConflictingWriter(t *testing.T) {
	duration := envDuration(t, "CHAOS_CONFLICT_DURATION", 30*time.Second)
	f := newFamily(t, "cf")
	m := startManager(t, "poolsmith-cf", "poolsmith-chaos-cf", "--leader-elect=false")
	for i := range 2 {
		f.create(t, env.Client, f.class(fmt.Sprintf("cf-c%02d", i), nil))
	}
	if _, v := f.converge(t, 2*time.Minute); !v.ok() {
		t.Fatalf("not converged before the writer starts: %s", v)
	}
	pools := &karpv1.NodePoolList{}
	if err := env.Client.List(ctx, pools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, np := range pools.Items {
		if strings.HasPrefix(np.Name, "cf-") {
			names = append(names, np.Name)
		}
	}
	slices.Sort(names)
	time.Sleep(2 * time.Second) // the stand-in's status writes have settled
	writer := clientFor(t, "chaos-writer", 500)
	begin := time.Now()
	failed := 0
	for n := 0; time.Since(begin) < duration; n++ {
		// Each visit to a pool flips its weight between 1 and 2: every patch changes it,
		// whether or not the manager has reverted the last one.
		np := &karpv1.NodePool{}
		np.Name = names[n%len(names)]
		patch := fmt.Sprintf(`{"spec":{"weight":%d}}`, 1+(n/len(names))%2)
		if err := writer.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			failed++
		}
	}
	end := time.Now()
	// Settled: every weight is the render's again, and the family checks out.
	want := map[string]int32{}
	for i := range 2 {
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: fmt.Sprintf("cf-c%02d", i)}, wc); err != nil {
			t.Fatal(err)
		}
		res, err := f.rendered(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, np := range res.NodePools {
			want[np.Name] = *np.Spec.Weight
		}
	}
	settle := eventually(t, 2*time.Minute, "the weights to be reverted", func() (bool, string) {
		for name, w := range want {
			np := &karpv1.NodePool{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
				return false, err.Error()
			}
			if np.Spec.Weight == nil || *np.Spec.Weight != w {
				return false, fmt.Sprintf("%s has weight %v, the render %d", name, np.Spec.Weight, w)
			}
		}
		return true, ""
	})
	settled := time.Now()
	if _, v := f.converge(t, time.Minute); !v.ok() {
		t.Fatalf("not converged once the weights were reverted: %s\n%s", v, m.tail(20))
	}
	const quiet = 10 * time.Second
	time.Sleep(quiet)
	events := audit(t, func(e auditEvent) bool {
		return e.UserAgent == m.agent || e.User.Username == "chaos-writer"
	})
	var foreign, writes, poolWrites, statusWrites, requests, quietWrites, conflicts int
	for _, e := range events {
		at := e.Received.Time
		if e.User.Username == "chaos-writer" {
			if e.write() && e.ok() && e.resource() == "nodepools" && !at.Before(begin) && !at.After(end) {
				foreign++
			}
			continue
		}
		switch {
		case !at.Before(begin) && !at.After(settled):
			requests++
			if e.write() {
				writes++
				if e.resource() == "workloadclasses/status" {
					statusWrites++
				}
				if e.resource() == "nodepools" {
					poolWrites++
					if e.ResponseStatus != nil && e.ResponseStatus.Code == 409 {
						conflicts++
					}
				}
			}
		case at.After(settled) && e.write():
			quietWrites++
		}
	}
	window := settled.Sub(begin).Seconds()
	t.Logf("FIGURES conflicts: %s of foreign writes: %d NodePool patches (%.0f/s, %d failed); the manager, until settled %s after the writer stopped: %d NodePool writes (%d refused with 409 Conflict), %.2f per foreign write, %d class status writes, %d writes in all (events included), %d requests (%.1f/s); writes in the %s after: %d",
		duration, foreign, float64(foreign)/end.Sub(begin).Seconds(), failed, settle.Round(100*time.Millisecond), poolWrites, conflicts, float64(poolWrites)/float64(max(foreign, 1)),
		statusWrites, writes, requests, float64(requests)/window, quiet, quietWrites)
	if foreign == 0 {
		t.Fatal("the writer wrote nothing")
	}
	if poolWrites > foreign {
		t.Errorf("the manager wrote NodePools %d times for %d foreign writes", poolWrites, foreign)
	}
	// A revert changes nothing the class reports, and losing a race to the writer (409)
	// is no failure of the class: its status is not rewritten for either.
	if statusWrites > 2 {
		t.Errorf("the class status was written %d times while only its NodePools were fought over", statusWrites)
	}
	if quietWrites > 0 {
		t.Errorf("the manager went on writing after it settled: %d writes in %s", quietWrites, quiet)
	}
}
