package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/signals"
	"github.com/poolsmith/poolsmith/internal/testenv"
)

// liveCluster starts a control plane for one test and writes a kubeconfig for it.
func liveCluster(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "cli", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return env, kubeconfig
}

func TestSignalsPublishWritesWhatTheControllerReads(t *testing.T) {
	env, kubeconfig := liveCluster(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-system"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run updates the same ConfigMap
		code, out, stderr := run(t, "", "signals", "publish", "--feed", "../signals/testdata/spot-advisor-data.json", "--region", "us-east-1", "--kubeconfig", kubeconfig)
		if code != ExitOK || !strings.Contains(out, "spot signals for us-east-1") {
			t.Fatalf("exit %d: %s%s", code, out, stderr)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "poolsmith-system", Name: "poolsmith-signals"}, cm); err != nil {
		t.Fatal(err)
	}
	s, err := signals.FromConfigMap(cm, "us-east-1")
	if err != nil || s == nil || len(s.Buckets) != 6 || time.Since(s.FetchedAt) > time.Minute {
		t.Fatalf("published signals: %+v, %v", s, err)
	}
	if strings.Contains(cm.Data[signals.AdvisorKey], "eu-west-1") {
		t.Error("other regions must be filtered out")
	}
	if code, _, stderr := run(t, "", "signals", "publish", "--feed", "../signals/testdata/spot-advisor-data.json", "--region", "ap-south-9", "--dry-run"); code != ExitFindings || !strings.Contains(stderr, "no Linux data for ap-south-9") {
		t.Errorf("unknown region: exit %d %s", code, stderr)
	}

	t.Run("an RBAC refusal is a runtime failure: exit 3, no usage hint", func(t *testing.T) {
		nobody, err := env.AddUser(envtest.User{Name: "nobody"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, err := nobody.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		forbidden := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(forbidden, data, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := run(t, "", "signals", "publish", "--feed", "../signals/testdata/spot-advisor-data.json", "--kubeconfig", forbidden)
		if code != ExitRuntime || !strings.Contains(stderr, "forbidden") || strings.Contains(stderr, "--help") {
			t.Errorf("exit %d, want 3: %s", code, stderr)
		}
	})
}

func TestDiffAgainstALiveCluster(t *testing.T) {
	env, kubeconfig := liveCluster(t)
	ctx := context.Background()
	ci := samples + "/poolsmith_v1alpha1_workloadclass_ci.yaml"
	base := samples + "/poolsmith_v1alpha1_baseline.yaml"

	code, out, stderr := run(t, "", "diff", "-f", base, "-f", ci, "--kubeconfig", kubeconfig)
	if code != ExitFindings || !strings.Contains(out, "EC2NodeClass/ci: create") || !strings.Contains(out, "NodePool/ci-spot-arm64: create") {
		t.Fatalf("empty cluster: exit %d\n%s%s", code, out, stderr)
	}

	// Apply exactly what render prints, as the controller would.
	_, rendered, _ := run(t, "", "render", "-f", base, "-f", ci)
	objs, err := manifest.Decode("render", strings.NewReader(rendered))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner("poolsmith"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = run(t, "", "diff", "-f", base, "-f", ci, "--kubeconfig", kubeconfig)
	if code != ExitOK || strings.Count(out, ": unchanged") != 5 {
		t.Fatalf("after apply: exit %d\n%s", code, out)
	}

	// A hand edit that Karpenter hashes, a weight edit that it does not, and a stale rung.
	np := &karpv1.NodePool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "ci-spot-arm64"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
	if err := env.Client.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "ci-spot-amd64"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Weight = ptrTo[int32](1)
	if err := env.Client.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	stale := np.DeepCopy()
	stale.ObjectMeta = np.ObjectMeta
	stale.Name, stale.ResourceVersion, stale.UID = "ci-reserved-amd64", "", ""
	if err := env.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "", "diff", "-f", base, "-f", ci, "--kubeconfig", kubeconfig)
	for _, want := range []string{
		"NodePool/ci-spot-arm64: update (will drift)",
		`spec.template.spec.expireAfter: "1h" -> "24h"`,
		"NodePool/ci-spot-amd64: update\n",
		"spec.weight: 1 -> 59",
		"NodePool/ci-reserved-amd64: no longer rendered by class ci",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	if code != ExitFindings {
		t.Errorf("exit %d, want 1", code)
	}
}

func ptrTo[T any](v T) *T { return &v }
