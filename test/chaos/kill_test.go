//go:build chaos

package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// killPoint is one SIGKILL: in which phase, how long after that run of the manager
// started, and what that run had written.
type killPoint struct {
	n      int
	phase  string
	after  time.Duration
	mode   string
	agent  string
	writes string
}

// TestSIGKILL kills the manager with SIGKILL at CHAOS_KILLS (default 20) seeded random
// moments spread over four phases (class creation, a Baseline fan-out, a Retire and a
// Delete prune, class deletion under the finalizer), restarting it each time, then
// checks the end state against the pure renderer.
func TestSIGKILL(t *testing.T) {
	kills := envInt(t, "CHAOS_KILLS", 20)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
	}
	t.Logf("seed %d (CHAOS_SEED=%d CHAOS_KILLS=%d replays these kill points)", seed, seed, kills)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	f := newFamily(t, "kill")
	const classes = 12
	name := func(i int) string { return fmt.Sprintf("kill-c%02d", i) }
	// clash's last rung is taken by someone else's NodePool: it must stay blocked, write
	// nothing, and roll back whatever a pass created before it met the name, kills or not.
	clash := f.class("kill-clash", nil)
	res, err := f.rendered(clash)
	if err != nil {
		t.Fatal(err)
	}
	last := res.NodePools[len(res.NodePools)-1]
	f.seedForeign(t, foreignCopy(last, last.Name, map[string]string{"team": "someone-else"}))
	// Look-alikes carrying Poolsmith's labels for a class but no owner reference: neither
	// pruning nor the finalizer may touch them.
	f.seedForeign(t, foreignCopy(res.NodePools[0], "kill-c01-legacy", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: name(1)}))
	f.seedForeign(t, foreignCopy(res.NodePools[0], "kill-c02-legacy", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: name(2)}))
	f.seedForeign(t, foreignCopy(res.NodeClass, "kill-c04-legacy", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: name(4)}))

	run := 0
	var m *manager
	start := func() {
		run++
		m = startManager(t, "poolsmith-kill", fmt.Sprintf("poolsmith-chaos-kill/%d", run), "--leader-elect=false")
	}
	// Each phase's work is cut into one slice per kill, handed to each run as it starts,
	// so every run has work in hand when it is killed.
	var toPrune, toDelete []string
	for i := range classes {
		if i%3 != 2 {
			toPrune = append(toPrune, name(i))
		}
		if i%2 == 0 {
			toDelete = append(toDelete, name(i))
		}
	}
	phases := []struct {
		name  string
		items func(slices int) []func()
	}{
		{"class creation", func(int) []func() {
			var items []func()
			for i := range classes {
				items = append(items, func() {
					f.create(t, env.Client, f.class(name(i), func(wc *v1alpha1.WorkloadClass) {
						switch i % 3 {
						case 0:
							wc.Spec.PrunePolicy = v1alpha1.PruneRetire
						case 2:
							wc.Spec.Profile = v1alpha1.ProfileMemoryOptimized
						}
					}))
				})
			}
			return append(items, func() { f.create(t, env.Client, clash); f.blocked[clash.Name] = true })
		}},
		{"Baseline fan-out", func(n int) []func() {
			var items []func()
			for k := range max(n, 1) {
				items = append(items, func() {
					f.patchBaseline(t, env.Client, fmt.Sprintf(`{"spec":{"nodeClass":{"tags":{"chaos":"fan-out-%d"}},"nodePool":{"expireAfter":"%dh"}}}`, k, 600-k))
				})
			}
			return items
		}},
		{"Retire and Delete prune", func(int) []func() {
			var items []func()
			for _, c := range toPrune {
				items = append(items, func() { patchClass(t, env.Client, c, `{"spec":{"architectures":["arm64"]}}`) })
			}
			return items
		}},
		{"class deletion", func(int) []func() {
			var items []func()
			for _, c := range toDelete {
				items = append(items, func() {
					if err := env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: c}}); err != nil {
						t.Fatal(err)
					}
					delete(f.present, c)
					f.deleted[c] = true
				})
			}
			return items
		}},
	}

	follow := &auditFollower{}
	follow.next(func(auditEvent) bool { return false }) // from here on
	start()
	var points []killPoint
	var lastKill time.Time
	crashed := 0
	for p, phase := range phases {
		n := kills / len(phases)
		if p < kills%len(phases) {
			n++
		}
		items := phase.items(n)
		for k := range max(n, 1) {
			lo, hi := k*len(items)/max(n, 1), (k+1)*len(items)/max(n, 1)
			for _, do := range items[lo:hi] {
				do()
			}
			if k >= n {
				break // no kills for this phase: its work is done by the running manager
			}
			// A quarter of the kills land while the run starts (0.2 to 1.2 s in), the rest
			// mid-work: up to a second after the run's first write.
			var mode string
			var after time.Duration
			if rng.IntN(4) == 0 {
				mode = "starting"
				after = 200*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
				time.Sleep(time.Until(m.started.Add(after)))
			} else {
				delay := time.Duration(rng.Int64N(int64(time.Second)))
				deadline := time.Now().Add(15 * time.Second)
				var first time.Time
				for first.IsZero() && time.Now().Before(deadline) {
					if ws := follow.next(func(e auditEvent) bool { return e.UserAgent == m.agent && e.write() }); len(ws) > 0 {
						first = ws[0].Received.Time
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				mode = fmt.Sprintf("%4dms after its first write", delay.Milliseconds())
				if first.IsZero() {
					mode = "no write in 15 s"
					first = time.Now()
				}
				time.Sleep(time.Until(first.Add(delay)))
				after = time.Since(m.started)
			}
			if !m.running() {
				crashed++
				t.Errorf("run %d exited on its own before its kill:\n%s", run, m.tail(20))
			}
			m.kill()
			lastKill = time.Now()
			points = append(points, killPoint{n: len(points) + 1, phase: phase.name, after: after, mode: mode, agent: m.agent})
			start()
		}
	}
	if len(points) == 0 {
		lastKill = time.Now()
	}
	took, v := f.converge(t, 3*time.Minute)
	sinceKill := time.Since(lastKill)

	for i := range points {
		points[i].writes = summarise(audit(t, func(e auditEvent) bool { return e.UserAgent == points[i].agent && e.write() }))
	}
	t.Logf("kill points (seed %d):", seed)
	for _, k := range points {
		t.Logf("  kill %2d  %-24s %5dms after start (%s); that run wrote: %s", k.n, k.phase, k.after.Milliseconds(), k.mode, k.writes)
	}
	t.Logf("FIGURES sigkill: kills survived %d/%d, runs that exited on their own %d, orphans %d, duplicates %d, missing %d, children without a controller ownerReference %d, foreign objects changed %d, time to converge after the last kill %s (check loop %s)",
		len(points)-crashed, len(points), crashed, v.orphans, v.duplicates, v.missing, v.unowned, v.foreignTouched, sinceKill.Round(100*time.Millisecond), took.Round(100*time.Millisecond))
	t.Logf("end state: %s", v)
	if !v.ok() {
		t.Fatalf("not converged 3 minutes after the last kill: %s\nmanager log (last 30 lines):\n%s", v, m.tail(30))
	}
	// A restart with nothing to do writes nothing. The Baseline's class count is part of
	// what converges: it is written once it has held for 2 s, and a kill before that leaves
	// it for the restart to write.
	eventually(t, time.Minute, "the Baseline's class count", func() (bool, string) {
		b := &v1alpha1.Baseline{}
		classes := &v1alpha1.WorkloadClassList{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: f.baseline}, b); err != nil {
			return false, err.Error()
		}
		if err := env.Client.List(ctx, classes); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, wc := range classes.Items {
			if wc.BaselineName() == f.baseline {
				n++
			}
		}
		return b.Status.Classes == int32(n), fmt.Sprintf("status.classes %d of %d", b.Status.Classes, n)
	})
	m.kill()
	run++
	agent := fmt.Sprintf("poolsmith-chaos-kill/%d", run)
	m = startManager(t, "poolsmith-kill", agent, "--leader-elect=false")
	time.Sleep(5 * time.Second)
	writes := audit(t, func(e auditEvent) bool { return e.UserAgent == agent && e.write() })
	t.Logf("FIGURES sigkill: writes in the first 5 s of a restart after convergence: %d (%s)", len(writes), summarise(writes))
	if len(writes) > 0 {
		t.Errorf("a restart over a converged cluster wrote: %s", summarise(writes))
	}
	// The family is deleted with the manager running: the finalizer removes every child.
	for name := range f.present {
		if err := env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		delete(f.present, name)
		f.deleted[name] = true
	}
	f.blocked = map[string]bool{}
	if _, v := f.converge(t, time.Minute); !v.ok() {
		t.Errorf("after deleting every class: %s", v)
	}
}
