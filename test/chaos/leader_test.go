//go:build chaos

package chaos_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Lease timings for the leader-election scenario: short, so it runs in seconds, and with
// room for a loaded 2-core machine.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = 1 * time.Second
	// takeoverBound is the longest client-go's elector may take to replace a leader that
	// stopped renewing: the standby notices the last renewal up to one jittered retry
	// period late (JitterFactor 1.2: up to 2.2 periods), waits a lease duration from
	// then, and tries again up to one jittered retry period later; plus a second for the
	// requests themselves on a loaded machine.
	takeoverBound = leaseDuration + 2*(retryPeriod*22/10) + time.Second
)

func replica(t *testing.T, name string) *manager {
	t.Helper()
	// Its own user too: leader election's Lease requests carry client-go's user agent
	// (controller-runtime sets it), so the audit log tells replicas' Lease writes apart
	// by user.
	return startManager(t, "poolsmith-le-"+name, "poolsmith-chaos-le/"+name,
		"--leader-elect", "--leader-election-namespace=poolsmith-system",
		"--leader-elect-lease-duration="+leaseDuration.String(),
		"--leader-elect-renew-deadline="+renewDeadline.String(),
		"--leader-elect-retry-period="+retryPeriod.String())
}

// leaseWrites are a replica's successful writes of the Lease, in order.
func leaseWrites(t *testing.T, m *manager) []auditEvent {
	return audit(t, func(e auditEvent) bool { return e.User.Username == m.user && e.lease() && e.write() && e.ok() })
}

// objectWrites are a replica's writes (attempts included) but the elector's own: the
// Lease and the event recording a change of leader, which client-go's elector writes with
// its own client (user agent ".../leader-election") outside the fence, by design.
func objectWrites(t *testing.T, m *manager) []auditEvent {
	return audit(t, func(e auditEvent) bool {
		return e.User.Username == m.user && e.write() && !e.lease() && !strings.HasSuffix(e.UserAgent, "/leader-election")
	})
}

// takeover measures the standby's acquisition against the old leader's last renewal.
func takeover(t *testing.T, old, standby *manager, since time.Time) (time.Duration, time.Time) {
	t.Helper()
	var last time.Time
	for _, e := range leaseWrites(t, old) {
		if e.Completed.Time.Before(since) {
			last = e.Completed.Time
		}
	}
	var acquired time.Time
	eventually(t, 3*takeoverBound, standby.agent+" to take the Lease", func() (bool, string) {
		for _, e := range leaseWrites(t, standby) {
			if e.Completed.After(since) {
				acquired = e.Completed.Time
				return true, ""
			}
		}
		return false, "no Lease write yet"
	})
	return acquired.Sub(last), acquired
}

// TestLeaderElection runs two replicas, each with its own user agent. The leader is
// SIGSTOPped mid-rollout past its lease and then continued: the standby must take over
// within the elector's bound and finish, and the old leader must write nothing once
// continued (the audit log shows no overlapping writes). Then the new leader is
// SIGKILLed mid fan-out, likewise.
func TestLeaderElection(t *testing.T) {
	f := newFamily(t, "le")
	a := replica(t, "a")
	eventually(t, time.Minute, "replica a to lead", func() (bool, string) {
		return a.logContains("Successfully acquired lease"), "not yet"
	})
	b := replica(t, "b")
	const classes = 10
	for i := range classes {
		f.create(t, env.Client, f.class(fmt.Sprintf("le-c%02d", i), nil))
	}
	eventually(t, time.Minute, "the rollout to start", func() (bool, string) {
		n := familyNodePools(f)
		return n > 0, fmt.Sprintf("%d NodePools", n)
	})
	atStop := familyNodePools(f)
	a.signal(syscall.SIGSTOP)
	stopped := time.Now()
	took, acquired := takeover(t, a, b, stopped)
	// Past a's lease for certain, then continue it.
	time.Sleep(time.Until(stopped.Add(leaseDuration + 2*time.Second)))
	a.signal(syscall.SIGCONT)
	continued := time.Now()
	conv, v := f.converge(t, 2*time.Minute)
	exited := false
	select {
	case <-a.exited:
		exited = true
	case <-time.After(renewDeadline + 5*time.Second):
	}
	// Give the audit log a moment past the last request.
	time.Sleep(time.Second)
	var after, overlap []auditEvent
	var firstB time.Time
	for _, e := range objectWrites(t, b) {
		if firstB.IsZero() || e.Received.Time.Before(firstB) {
			firstB = e.Received.Time
		}
	}
	for _, e := range objectWrites(t, a) {
		if e.Received.After(continued) {
			after = append(after, e)
		}
		if !firstB.IsZero() && e.Completed.After(firstB) {
			overlap = append(overlap, e)
		}
	}
	t.Logf("FIGURES leader-sigstop: %d NodePools written when a was stopped; b took the Lease %s after a's last renewal (%s after SIGSTOP; bound %s = lease %s + 2 jittered retry periods + 1 s); a continued %s after SIGSTOP: writes by a afterwards %d (%s), writes by a after b's first %d; a exited by itself: %v; converged %s after SIGCONT: %s",
		atStop, took.Round(100*time.Millisecond), acquired.Sub(stopped).Round(100*time.Millisecond), takeoverBound, leaseDuration,
		continued.Sub(stopped).Round(100*time.Millisecond), len(after), summarise(after), len(overlap), exited, conv.Round(100*time.Millisecond), v)
	if took > takeoverBound {
		t.Errorf("takeover took %s, more than %s", took, takeoverBound)
	}
	if len(after) > 0 || len(overlap) > 0 {
		t.Errorf("the stopped leader wrote after it was continued: %s; overlapping b: %s", summarise(after), summarise(overlap))
	}
	if !exited {
		t.Errorf("replica a kept running after losing its Lease:\n%s", a.tail(10))
	}
	if !v.ok() {
		t.Fatalf("b did not finish: %s\n%s", v, b.tail(20))
	}

	// SIGKILL of the leader mid fan-out: a new standby, c, takes over and finishes.
	c := replica(t, "c")
	time.Sleep(2 * time.Second) // c is up and waiting for the Lease
	f.patchBaseline(t, env.Client, `{"spec":{"nodePool":{"expireAfter":"500h"}}}`)
	eventually(t, time.Minute, "b to start the fan-out", func() (bool, string) {
		pools := &karpv1.NodePoolList{}
		if err := env.Client.List(ctx, pools); err != nil {
			return false, err.Error()
		}
		for _, np := range pools.Items {
			if d := np.Spec.Template.Spec.ExpireAfter.Duration; d != nil && *d == 500*time.Hour {
				return true, ""
			}
		}
		return false, "no NodePool has the new expireAfter yet"
	})
	b.kill()
	killed := time.Now()
	took, acquired = takeover(t, b, c, killed)
	conv, v = f.converge(t, 2*time.Minute)
	t.Logf("FIGURES leader-sigkill: c took the Lease %s after b's last renewal (%s after SIGKILL; bound %s); converged %s after the kill: %s",
		took.Round(100*time.Millisecond), acquired.Sub(killed).Round(100*time.Millisecond), takeoverBound, time.Since(killed).Round(100*time.Millisecond), v)
	_ = conv
	if took > takeoverBound {
		t.Errorf("takeover took %s, more than %s", took, takeoverBound)
	}
	if !v.ok() {
		t.Fatalf("c did not finish: %s\n%s", v, c.tail(20))
	}
}
