package cli

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/controllers"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
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

	// signals commitments owns its key only: publishing the feed again keeps it, and it
	// kept the feed (two field managers, server-side apply on the real API server).
	if code, out, stderr := run(t, "", "signals", "commitments", "--savings-plans", "../signals/testdata/commitments/sp.json",
		"--reserved-instances", "../signals/testdata/commitments/ri.json", "--kubeconfig", kubeconfig); code != ExitOK ||
		!strings.Contains(out, "commitments.json with 2 Savings Plans and 2 Reserved Instances for us-east-1") {
		t.Fatalf("signals commitments: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "", "signals", "publish", "--feed", "../signals/testdata/spot-advisor-data.json", "--region", "us-east-1", "--kubeconfig", kubeconfig); code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	both := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), both); err != nil {
		t.Fatal(err)
	}
	var facts signals.CommitmentFacts
	if err := json.Unmarshal([]byte(both.Data[signals.CommitmentsKey]), &facts); err != nil || len(facts.SavingsPlans) != 2 || both.Data[signals.AdvisorKey] == "" {
		t.Fatalf("after publish, commitments.json %q (%v) and the feed (%d bytes) must both remain", both.Data[signals.CommitmentsKey], err, len(both.Data[signals.AdvisorKey]))
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

// recorder records the writes a client sends for Poolsmith's children, as
// "verb KIND/NAME".
type recorder struct{ writes []string }

func (r *recorder) client(c client.WithWatch) client.WithWatch {
	record := func(verb string, obj client.Object) {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			kind = plan.KindOf(obj)
		}
		switch kind {
		case plan.KindNodePool, plan.KindNodeClass, plan.KindNodeOverlay,
			plan.KindAccessRule:
			r.writes = append(r.writes, verb+" "+kind+"/"+obj.GetName())
		}
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			record("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			r.writes = append(r.writes, "apply")
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// reconcileOnce runs one reconcile of the real controller, recording its writes.
func reconcileOnce(t *testing.T, env *testenv.Env, class string) []string {
	t.Helper()
	cl, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	r := &controllers.WorkloadClassReconciler{Client: rec.client(cl), APIReader: cl,
		Signals: &signals.Provider{ConfigMap: operator.DefaultSignalsConfigMap, Region: "us-east-1", MaxAge: operator.DefaultSignalsMaxAge}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: class}}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	sort.Strings(rec.writes)
	return rec.writes
}

// diffThenReconcile returns a step that runs diff on files against the cluster, then one
// reconcile of class, and fails unless the reconcile wrote exactly what diff announced.
func diffThenReconcile(t *testing.T, env *testenv.Env, kubeconfig, class string, files ...string) func(step string) string {
	args := []string{"diff", "--kubeconfig", kubeconfig}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return func(step string) string {
		t.Helper()
		code, out, stderr := run(t, "", args...)
		planned := plannedWrites(out)
		if wantCode := map[bool]int{true: ExitFindings, false: ExitOK}[len(planned) > 0]; code != wantCode {
			t.Fatalf("%s: diff exit %d, want %d\n%s%s", step, code, wantCode, out, stderr)
		}
		written := reconcileOnce(t, env, class)
		if strings.Join(written, "\n") != strings.Join(planned, "\n") {
			t.Fatalf("%s: diff announced\n  %s\nthe reconcile wrote\n  %s\ndiff output:\n%s", step, strings.Join(planned, "\n  "), strings.Join(written, "\n  "), out)
		}
		return out
	}
}

// plannedWrites are the writes a diff output announces, as "verb KIND/NAME".
func plannedWrites(out string) []string {
	verbs := map[string]string{"create": "create", "update": "update", "retire": "update", "orphan": "update", "delete": "delete"}
	var writes []string
	for _, line := range strings.Split(out, "\n") {
		ref, rest, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(ref, "WorkloadClass/") {
			continue
		}
		action, _, _ := strings.Cut(rest, " ")
		action = strings.TrimSuffix(action, ":")
		if verb, ok := verbs[action]; ok {
			writes = append(writes, verb+" "+ref)
		}
	}
	sort.Strings(writes)
	return writes
}

func TestDiffShowsExactlyWhatTheNextReconcileWrites(t *testing.T) {
	env, kubeconfig := liveCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	base := samples + "/poolsmith_v1alpha1_baseline.yaml"
	classFile := filepath.Join(dir, "ci.yaml")
	objs, err := manifest.Load([]string{base, samples + "/poolsmith_v1alpha1_workloadclass_ci.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o.Unstructured); err != nil {
			t.Fatal(err)
		}
	}
	writeClass := func() {
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "ci"}, wc); err != nil {
			t.Fatal(err)
		}
		wc.APIVersion, wc.Kind = v1alpha1.GroupVersion.String(), "WorkloadClass"
		doc, _ := render.CleanJSON(wc)
		b, _ := yaml.Marshal(doc)
		if err := os.WriteFile(classFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := diffThenReconcile(t, env, kubeconfig, "ci", base, classFile)
	diffAndReconcile := func(step string) string {
		t.Helper()
		writeClass()
		return check(step)
	}

	out := diffAndReconcile("empty cluster")
	for _, want := range []string{"EC2NodeClass/ci: create", "NodePool/ci-spot-arm64: create"} {
		if !strings.Contains(out, want) {
			t.Errorf("empty cluster: diff lacks %q:\n%s", want, out)
		}
	}
	if out := diffAndReconcile("after the first reconcile"); strings.Count(out, ": unchanged") != 6 {
		t.Fatalf("after the first reconcile:\n%s", out)
	}

	// A hand edit Karpenter hashes, a weight edit it does not, a foreign taint, and a class
	// edit that drops a rung.
	edit := func(name string, f func(*karpv1.NodePool)) {
		np := &karpv1.NodePool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
			t.Fatal(err)
		}
		f(np)
		if err := env.Client.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	edit("ci-spot-arm64", func(np *karpv1.NodePool) { np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h") })
	edit("ci-spot-amd64", func(np *karpv1.NodePool) {
		np.Spec.Weight = ptrTo[int32](1)
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "evil", Effect: corev1.TaintEffectNoExecute})
	})
	edit("ci-on-demand-arm64", func(np *karpv1.NodePool) {
		np.Spec.Template.Annotations = map[string]string{"example.com/hand": "added"}
	})
	wc := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "ci"}, wc); err != nil {
		t.Fatal(err)
	}
	wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}
	if err := env.Client.Update(ctx, wc); err != nil {
		t.Fatal(err)
	}
	out = diffAndReconcile("after hand edits")
	for _, want := range []string{
		"NodePool/ci-spot-arm64: update (will drift)",
		`spec.template.spec.expireAfter: "1h" -> "24h"`,
		`spec.template.metadata.annotations: {"example.com/hand":"added"} -> (removed)`,
		"NodePool/ci-spot-amd64: delete: no longer rendered by class ci",
		"NodePool/ci-on-demand-amd64: delete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	// The AccessRule named the deleted rungs while their NodePools existed; now they are
	// gone, the next pass drops them, and then nothing is left to write.
	if out := diffAndReconcile("after the second reconcile"); strings.Count(out, ": unchanged") != 3 || !strings.Contains(out, "AccessRule/ci: update") {
		t.Fatalf("after the second reconcile:\n%s", out)
	}
	if out := diffAndReconcile("after the third reconcile"); strings.Count(out, ": unchanged") != 4 {
		t.Fatalf("after the third reconcile:\n%s", out)
	}
}

func ptrTo[T any](v T) *T { return &v }

// diff ranks a class's rungs by its Baseline's commitments as the manager does: each
// commitment's state from the class's status.commitments and NodeClaims, its part of the
// share from the Baseline's classes. Without them it announced the weights without
// commitments, which the manager never writes.
func TestDiffRanksWithCommitmentsAsTheManagerDoes(t *testing.T) {
	env, kubeconfig := liveCluster(t)
	ctx := context.Background()
	const file = "testdata/commitments.yaml" // docs/commitments.md's worked example
	objs, err := manifest.Load([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o.Unstructured); err != nil {
			t.Fatal(err)
		}
	}
	diffAndReconcile := diffThenReconcile(t, env, kubeconfig, "api", file)
	const covered = "api-on-demand-arm64-m7g-xlarge"
	weight := func() int32 {
		np := &karpv1.NodePool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: covered}, np); err != nil {
			t.Fatal(err)
		}
		return *np.Spec.Weight
	}

	diffAndReconcile("empty cluster")
	if w := weight(); w != 100 {
		t.Fatalf("the manager ranked %s at %d, want 100 (first, at the Savings Plan's rate)", covered, w)
	}
	if out := diffAndReconcile("after the first reconcile"); strings.Contains(out, ": update") {
		t.Fatalf("after the first reconcile the manager writes nothing, but diff announced:\n%s", out)
	}

	// Five m7g.xlarge at $0.112608/h use $0.563 of the class's $0.60/h: no room for a sixth.
	for i := 0; i < 5; i++ {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{GenerateName: covered + "-", Labels: map[string]string{
				karpv1.NodePoolLabelKey: covered, v1alpha1.LabelClass: "api", v1alpha1.LabelRung: covered,
				corev1.LabelInstanceTypeStable: "m7g.xlarge", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand,
				corev1.LabelTopologyZone: "us-east-1a"}},
			Spec: karpv1.NodeClaimSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "api"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
			},
		}
		if err := env.Client.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	if out := diffAndReconcile("exhausted"); !strings.Contains(out, "NodePool/"+covered+": update") {
		t.Fatalf("exhausted: diff does not announce %s's new weight:\n%s", covered, out)
	}
	if w := weight(); w == 100 {
		t.Fatalf("exhausted: %s still ranks first", covered)
	}
	if out := diffAndReconcile("after the exhausted reconcile"); strings.Contains(out, ": update") {
		t.Fatalf("after the exhausted reconcile the manager writes nothing (the state holds), but diff announced:\n%s", out)
	}
}

// The classes a diff splits commitments among are the cluster's with the input applied:
// an input class replaces the live one of its name, and a new one joins them.
func TestInputClassesListsTheClusterAsTheInputLeavesIt(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	class := func(name, team string) *v1alpha1.WorkloadClass {
		return &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelTeam: team}}}
	}
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class("a", "x"), class("b", "x")).Build()
	r := inputClasses{Reader: live, classes: []*v1alpha1.WorkloadClass{class("b", "y"), class("c", "z")}}
	list := &v1alpha1.WorkloadClassList{}
	if err := r.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, wc := range list.Items {
		got[wc.Name] = wc.Labels[v1alpha1.LabelTeam]
	}
	if want := map[string]string{"a": "x", "b": "y", "c": "z"}; !maps.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}
