//go:build chaos

package chaos_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// secondAPIServer starts another kube-apiserver over the suite's etcd, as in a highly
// available control plane, and returns an admin client for it: edits made through it
// while the first is down reach the manager only through its re-established watches.
func secondAPIServer(t *testing.T) client.Client {
	t.Helper()
	log, err := os.Create(filepath.Join(logDir, "second-kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &envtest.APIServer{
		CertDir: t.TempDir(),
		EtcdURL: env.ControlPlane.Etcd.URL,
		Path:    filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver"),
		Out:     log, Err: log,
	}
	if err := s.Start(); err != nil {
		t.Fatalf("starting a second kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(); _ = log.Close() })
	plane := &envtest.ControlPlane{APIServer: s}
	u, err := plane.AddUser(envtest.User{Name: "chaos-second", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(u.Config(), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// A freshly started API server refuses class writes (failurePolicy Fail) until it has
	// discovered the Baseline CRD that poolsmith-guardrails names as its paramKind ("failed
	// to find resource referenced by paramKind"): serve the test only once a dry-run
	// create passes admission.
	probe := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "chaos-second-probe"}}
	probe.Spec.Architectures = []v1alpha1.Architecture{"arm64"}
	eventually(t, time.Minute, "the second API server to admit class writes", func() (bool, string) {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err == nil, fmt.Sprint(err)
	})
	return c
}

// familyNodePools counts the NodePools named with the family's prefix.
func familyNodePools(f *family) int {
	pools := &karpv1.NodePoolList{}
	if err := env.Client.List(ctx, pools); err != nil {
		return -1
	}
	n := 0
	for _, np := range pools.Items {
		if strings.HasPrefix(np.Name, f.prefix+"-") {
			n++
		}
	}
	return n
}

// TestAPIServerRestart stops the API server mid-rollout and starts it again over the
// same etcd (with the same serving CA): the manager must recover without restarting
// (same PID) and converge. While it is down, a class is edited, one created and one
// deleted through a second API server: no event may be lost with the watches.
func TestAPIServerRestart(t *testing.T) {
	down := envDuration(t, "CHAOS_APISERVER_DOWN", 10*time.Second)
	f := newFamily(t, "api")
	c2 := secondAPIServer(t)
	m := startManager(t, "poolsmith-api", "poolsmith-chaos-api", "--leader-elect=false")
	pid := m.pid()
	const classes = 10
	for i := range classes {
		f.create(t, env.Client, f.class(fmt.Sprintf("api-c%02d", i), nil))
	}
	// Mid-rollout: as soon as the first NodePool is written.
	eventually(t, time.Minute, "the rollout to start", func() (bool, string) {
		n := familyNodePools(f)
		return n > 0, fmt.Sprintf("%d NodePools", n)
	})
	atStop := familyNodePools(f)
	stopped := time.Now()
	// SIGTERM; SIGKILL after ControlPlaneStopTimeout (a timeout error then, and no harm).
	if err := env.ControlPlane.APIServer.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting") {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	stopTook := time.Since(stopped)
	// Whatever fails below, the tests after this one need the API server back.
	restartedOnce := false
	t.Cleanup(func() {
		if !restartedOnce {
			_ = env.ControlPlane.APIServer.Start()
		}
	})
	// The watches are down: edit, create and delete through the second API server.
	patchClass(t, c2, "api-c00", `{"spec":{"architectures":["arm64"],"capacityTypes":["on-demand"]}}`)
	f.create(t, c2, f.class("api-late", nil))
	if err := c2.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "api-c09"}}); err != nil {
		t.Fatal(err)
	}
	delete(f.present, "api-c09")
	f.deleted["api-c09"] = true
	time.Sleep(time.Until(stopped.Add(down)))
	restarting := time.Now()
	restartedOnce = true
	if err := env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	restarted := time.Now()
	took, v := f.converge(t, 3*time.Minute)
	t.Logf("FIGURES apiserver-restart: stopped with %d of %d NodePools written (stop took %s), down %s (restart took %s); converged %s after it was back; manager PID %d before, %d after, exited %v; %s",
		atStop, 4*classes, stopTook.Round(100*time.Millisecond), restarted.Sub(stopped).Round(100*time.Millisecond), restarted.Sub(restarting).Round(100*time.Millisecond),
		took.Round(100*time.Millisecond), pid, m.pid(), !m.running(), v)
	if !m.running() {
		t.Fatalf("the manager exited while the API server was down:\n%s", m.tail(30))
	}
	if !v.ok() {
		t.Fatalf("not converged 3 minutes after the API server came back: %s\nmanager log:\n%s", v, m.tail(30))
	}
	wc := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "api-c00"}, wc); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURES watch-drop: class api-c00 edited while the watch was down: generation %d, observedGeneration %d, rungs %d; api-late (created while down) Synced; api-c09 (deleted while down) gone with its children: %v",
		wc.Generation, wc.Status.ObservedGeneration, wc.Status.PoolCount, v.ok())
}
