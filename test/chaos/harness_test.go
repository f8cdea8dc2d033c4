//go:build chaos

package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

var (
	ctx = context.Background()
	env *testenv.Env
	// root is the module's directory; bin the manager binary the suite built.
	root, bin string
	// logDir keeps the managers' logs, the kubeconfigs and the audit log.
	logDir, auditPath string
	// kubeconfig is an admin kubeconfig, for `poolsmith diff`.
	kubeconfig string
	cat        *catalog.Catalog
	// sampleBaseline is config/samples' Baseline spec, every scenario's starting point.
	sampleBaseline v1alpha1.BaselineSpec
)

// auditPolicy logs every request but the API server's own, at Metadata level, once
// the response is complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:apiserver"]
- level: Metadata
`

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "chaos:", err); return 1 }
	var err error
	if root, err = testenv.ModuleDir(""); err != nil {
		return fail(err)
	}
	if logDir = os.Getenv("CHAOS_LOG_DIR"); logDir == "" {
		if logDir, err = os.MkdirTemp("", "poolsmith-chaos-"); err != nil {
			return fail(err)
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fail(err)
	}
	fmt.Fprintln(os.Stderr, "chaos: logs, kubeconfigs and the audit log in", logDir)
	bin = filepath.Join(logDir, "poolsmith")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail(fmt.Errorf("building the manager: %w", err))
	}
	policy := filepath.Join(logDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return fail(err)
	}
	auditPath = filepath.Join(logDir, "audit.log")
	certDir := filepath.Join(logDir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fail(err)
	}
	apiLog, err := os.Create(filepath.Join(logDir, "kube-apiserver.log"))
	if err != nil {
		return fail(err)
	}
	defer apiLog.Close()
	env, err = testenv.Start(
		testenv.WithEnvironment(func(e *envtest.Environment) {
			api := e.ControlPlane.GetAPIServer()
			api.Out, api.Err = apiLog, apiLog
			// kube-apiserver stops serving at once on SIGTERM, but here its process lingers
			// past envtest's 20 s; SIGKILL follows after this.
			e.ControlPlaneStopTimeout = 5 * time.Second
		}),
		// The serving CA must survive an API server restart, or no client could reconnect.
		testenv.WithAPIServerCertDir(certDir),
		testenv.WithAPIServerFlag("audit-policy-file", policy),
		testenv.WithAPIServerFlag("audit-log-path", auditPath),
		testenv.WithAPIServerFlag("audit-log-format", "json"),
		testenv.WithAPIServerFlag("audit-log-mode", "blocking"),
	)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = env.Stop() }()
	if kubeconfig, err = kubeconfigFor("chaos-admin"); err != nil {
		return fail(err)
	}
	if cat, err = catalog.Load(); err != nil {
		return fail(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config/samples/poolsmith_v1alpha1_baseline.yaml"))
	if err != nil {
		return fail(err)
	}
	var b v1alpha1.Baseline
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		return fail(fmt.Errorf("config/samples/poolsmith_v1alpha1_baseline.yaml: %w", err))
	}
	sampleBaseline = b.Spec
	ctrllog.SetLogger(logr.Discard())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-system"}}); err != nil {
		return fail(err)
	}
	standIn, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); karpenterStandIn(standIn) }()
	defer func() { stop(); <-done }()
	return m.Run()
}

// karpenterStandIn does the one thing of Karpenter's a Retire prune waits for: every
// generated NodePool (labelled and controlled) reports one node, and a retired one (limits zero) reports none once
// it is drained, a second later.
func karpenterStandIn(ctx context.Context) {
	retiredAt := map[types.UID]time.Time{}
	for ctx.Err() == nil {
		time.Sleep(300 * time.Millisecond)
		pools := &karpv1.NodePoolList{}
		if err := env.Client.List(ctx, pools, client.HasLabels{v1alpha1.LabelManagedBy}); err != nil {
			continue // the API server may be down on purpose
		}
		for i := range pools.Items {
			np := &pools.Items[i]
			if metav1.GetControllerOf(np) == nil {
				continue // the look-alikes the suite seeds must stay untouched
			}
			nodes := int64(-1)
			switch _, retired := np.Annotations[v1alpha1.AnnotationRetired]; {
			case np.Status.Nodes == nil:
				nodes = 1
			case retired && *np.Status.Nodes != 0:
				if at, ok := retiredAt[np.UID]; !ok {
					retiredAt[np.UID] = time.Now()
				} else if time.Since(at) > time.Second {
					nodes = 0
				}
			}
			if nodes >= 0 {
				patch := fmt.Sprintf(`{"status":{"nodes":%d}}`, nodes)
				_ = env.Client.Status().Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(patch)))
			}
		}
	}
}

var (
	kubeconfigs   = map[string]string{}
	kubeconfigsMu sync.Mutex
)

// kubeconfigFor writes a kubeconfig for a system:masters user of that name: the audit log
// tells users apart.
func kubeconfigFor(user string) (string, error) {
	kubeconfigsMu.Lock()
	defer kubeconfigsMu.Unlock()
	if path, ok := kubeconfigs[user]; ok {
		return path, nil
	}
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(logDir, "kubeconfig-"+user)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	kubeconfigs[user] = path
	return path, nil
}

// clientFor is a direct client as user, at qps.
func clientFor(t *testing.T, user string, qps float32) client.Client {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS, cfg.Burst, cfg.UserAgent = qps, int(2*qps), user
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// manager is one run of bin/poolsmith as an OS process.
type manager struct {
	user    string
	agent   string
	cmd     *exec.Cmd
	started time.Time
	logPath string
	exited  chan struct{}
	// killed is set before the suite signals it to die, so an exit of its own shows.
	killed bool
}

// startManager runs `poolsmith manager` as user, with agent as its user agent (the audit
// log's userAgent), metrics and probes off, and extra flags.
func startManager(t *testing.T, user, agent string, extra ...string) *manager {
	t.Helper()
	kc, err := kubeconfigFor(user)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"manager", "--kubeconfig=" + kc, "--user-agent=" + agent,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, extra...)
	m := &manager{user: user, agent: agent, logPath: filepath.Join(logDir, strings.ReplaceAll(agent, "/", "-")+".log"), exited: make(chan struct{})}
	log, err := os.Create(m.logPath)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.started = time.Now()
	go func() { _ = m.cmd.Wait(); _ = log.Close(); close(m.exited) }()
	t.Cleanup(m.kill)
	return m
}

func (m *manager) pid() int { return m.cmd.Process.Pid }

func (m *manager) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (m *manager) kill() {
	if m.running() {
		m.killed = true
		_ = m.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once continued
		_ = m.cmd.Process.Kill()
	}
	<-m.exited
}

func (m *manager) signal(sig syscall.Signal) {
	if err := m.cmd.Process.Signal(sig); err != nil {
		panic(fmt.Sprintf("signalling %s: %v", m.agent, err))
	}
}

// logContains reports whether the manager's log has a line with text.
func (m *manager) logContains(text string) bool {
	data, _ := os.ReadFile(m.logPath)
	return bytes.Contains(data, []byte(text))
}

func (m *manager) tail(n int) string {
	data, _ := os.ReadFile(m.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// auditEvent is the part of an audit.k8s.io/v1 Event the suite reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	User      struct{ Username string }
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource, Namespace, Name, APIGroup, Subresource string
	} `json:"objectRef"`
	ResponseStatus *struct{ Code int } `json:"responseStatus"`
	Received       metav1.MicroTime    `json:"requestReceivedTimestamp"`
	Completed      metav1.MicroTime    `json:"stageTimestamp"`
}

func (e auditEvent) write() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (e auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

func (e auditEvent) lease() bool { return e.resource() == "leases" }

func (e auditEvent) ok() bool { return e.ResponseStatus != nil && e.ResponseStatus.Code < 300 }

// audit reads the audit log's completed requests that keep returns true for.
func audit(t *testing.T, keep func(auditEvent) bool) []auditEvent {
	t.Helper()
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" {
			continue
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// auditFollower reads the audit log from where it last stopped.
type auditFollower struct{ offset int64 }

// next returns the completed requests logged since the last call that keep accepts.
func (a *auditFollower) next(keep func(auditEvent) bool) []auditEvent {
	f, err := os.Open(auditPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, 0); err != nil {
		return nil
	}
	data, _ := io.ReadAll(f)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	a.offset += int64(end + 1)
	var out []auditEvent
	for _, line := range bytes.Split(data[:end], []byte("\n")) {
		var e auditEvent
		if json.Unmarshal(line, &e) == nil && e.Stage == "ResponseComplete" && keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// byAgent keeps one manager run's requests.
func byAgent(agent string) func(auditEvent) bool {
	return func(e auditEvent) bool { return e.UserAgent == agent }
}

// summarise counts requests by verb and resource: "update nodepools 3, patch workloadclasses/status 2".
func summarise(events []auditEvent) string {
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Verb+" "+e.resource()]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// envInt reads a knob from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 30s", name, v)
	}
	return d
}

// eventually polls cond every 250ms until it returns true or timeout passes, and returns
// how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		last = why
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
	return 0
}

// family is one scenario's classes, all named with its prefix, on its own Baseline, and
// what is expected of them: every present class Synced=True with exactly its rendered
// children, blocked classes OwnershipConflict with none, deleted classes gone with all
// they had, foreign objects untouched.
type family struct {
	prefix   string
	baseline string
	present  map[string]bool
	blocked  map[string]bool
	deleted  map[string]bool
	foreign  []client.Object
	// rv is each foreign object's resourceVersion when seeded, by UID.
	rv map[types.UID]string
}

func newFamily(t *testing.T, prefix string) *family {
	t.Helper()
	f := &family{prefix: prefix, baseline: prefix + "-base", present: map[string]bool{}, blocked: map[string]bool{}, deleted: map[string]bool{}, rv: map[types.UID]string{}}
	if err := env.Client.Create(ctx, &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: f.baseline}, Spec: *sampleBaseline.DeepCopy()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cleanup(t) })
	return f
}

// class is a WorkloadClass of the family.
func (f *family) class(name string, mutate func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: f.baseline}
	wc.Spec.Architectures = []v1alpha1.Architecture{"arm64", "amd64"}
	wc.Spec.CapacityTypes = []v1alpha1.CapacityType{"spot", "on-demand"}
	if mutate != nil {
		mutate(wc)
	}
	return wc
}

func (f *family) create(t *testing.T, c client.Client, wc *v1alpha1.WorkloadClass) {
	t.Helper()
	if err := c.Create(ctx, wc); err != nil {
		t.Fatal(err)
	}
	f.present[wc.Name] = true
}

// rendered is the pure renderer's output for a class over the family's Baseline.
func (f *family) rendered(wc *v1alpha1.WorkloadClass) (*render.Result, error) {
	b := &v1alpha1.Baseline{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.baseline}, b); err != nil {
		return nil, err
	}
	return render.Render(b, wc, render.Options{Region: catalog.DefaultRegion, Catalog: cat})
}

// seedForeign creates obj as someone else's and remembers its resourceVersion.
func (f *family) seedForeign(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("seeding foreign %s: %v", obj.GetName(), err)
	}
	f.foreign = append(f.foreign, obj)
	f.rv[obj.GetUID()] = obj.GetResourceVersion()
}

// foreignCopy turns a rendered child into a look-alike nobody owns, named name, with
// extra labels.
func foreignCopy(obj client.Object, name string, labels map[string]string) client.Object {
	c := obj.DeepCopyObject().(client.Object)
	c.SetName(name)
	c.SetOwnerReferences(nil)
	c.SetLabels(labels)
	c.SetResourceVersion("")
	return c
}

// verdict is what a check found.
type verdict struct {
	problems []string
	// children counts the family's generated children found; missing, orphans (children of
	// no present class, or not rendered), duplicates (two objects for one rung) and unowned
	// (a family object, foreign ones aside, without a controller ownerReference).
	children, missing, orphans, duplicates, unowned, foreignTouched int
}

func (v *verdict) problem(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v verdict) ok() bool { return len(v.problems) == 0 }

func (v verdict) String() string {
	s := fmt.Sprintf("children %d, missing %d, orphans %d, duplicates %d, without controller ownerReference %d, foreign objects changed %d",
		v.children, v.missing, v.orphans, v.duplicates, v.unowned, v.foreignTouched)
	if len(v.problems) > 0 {
		max := min(len(v.problems), 8)
		s += "; problems: " + strings.Join(v.problems[:max], "; ")
		if len(v.problems) > max {
			s += fmt.Sprintf("; and %d more", len(v.problems)-max)
		}
	}
	return s
}

// check compares the cluster with what the family expects.
func (f *family) check() verdict {
	var v verdict
	expected := map[string]types.UID{} // KIND/NAME -> owner class UID
	for name := range f.present {
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
			v.problem("class %s: %v", name, err)
			continue
		}
		synced := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
		if f.blocked[name] {
			if synced == nil || synced.Status != metav1.ConditionFalse || synced.Reason != v1alpha1.ReasonOwnershipConflict {
				v.problem("class %s: want Synced=False OwnershipConflict, have %v", name, synced)
			}
			continue
		}
		if synced == nil || synced.Status != metav1.ConditionTrue || synced.ObservedGeneration != wc.Generation || wc.Status.ObservedGeneration != wc.Generation {
			v.problem("class %s generation %d: not Synced=True for it (%v, status.observedGeneration %d)", name, wc.Generation, synced, wc.Status.ObservedGeneration)
			continue
		}
		res, err := f.rendered(wc)
		if err != nil {
			v.problem("rendering %s: %v", name, err)
			continue
		}
		expected["EC2NodeClass/"+res.NodeClass.Name] = wc.UID
		var rungs []string
		for _, np := range res.NodePools {
			expected["NodePool/"+np.Name] = wc.UID
			rungs = append(rungs, np.Name)
		}
		var reported []string
		for _, r := range wc.Status.NodePools {
			reported = append(reported, r.Name)
		}
		if !slices.Equal(rungs, reported) || int(wc.Status.PoolCount) != len(rungs) || wc.Status.NodeClass != res.NodeClass.Name {
			v.problem("class %s: status reports NodeClass %q, poolCount %d, rungs %v; the render has %s and %v", name, wc.Status.NodeClass, wc.Status.PoolCount, reported, res.NodeClass.Name, rungs)
		}
	}
	for name := range f.deleted {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.WorkloadClass{}); !apierrors.IsNotFound(err) {
			v.problem("deleted class %s is still there (%v)", name, err)
		}
	}
	foreign := map[types.UID]bool{}
	for _, obj := range f.foreign {
		foreign[obj.GetUID()] = true
		live := obj.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil || live.GetUID() != obj.GetUID() || live.GetResourceVersion() != f.rv[obj.GetUID()] {
			v.foreignTouched++
			v.problem("foreign %s was changed or removed (%v)", obj.GetName(), err)
		}
	}
	var objs []client.Object
	pools := &karpv1.NodePoolList{}
	classes := &awsv1.EC2NodeClassList{}
	if err := env.Client.List(ctx, pools); err != nil {
		v.problem("listing NodePools: %v", err)
	}
	if err := env.Client.List(ctx, classes); err != nil {
		v.problem("listing EC2NodeClasses: %v", err)
	}
	for i := range pools.Items {
		objs = append(objs, &pools.Items[i])
	}
	for i := range classes.Items {
		objs = append(objs, &classes.Items[i])
	}
	seen := map[string]int{}
	for _, obj := range objs {
		if !strings.HasPrefix(obj.GetName(), f.prefix+"-") || foreign[obj.GetUID()] {
			continue
		}
		kind := "NodePool"
		if _, ok := obj.(*awsv1.EC2NodeClass); ok {
			kind = "EC2NodeClass"
		}
		ref := kind + "/" + obj.GetName()
		v.children++
		seen[kind+"|"+obj.GetLabels()[v1alpha1.LabelClass]+"|"+obj.GetLabels()[v1alpha1.LabelRung]+"|"+obj.GetName()]++
		owner := metav1.GetControllerOf(obj)
		if owner == nil {
			v.unowned++
			v.problem("%s has no controller ownerReference", ref)
		}
		uid, want := expected[ref]
		switch {
		case !want:
			v.orphans++
			v.problem("%s is not rendered by any present class (labels %v)", ref, obj.GetLabels())
		case owner != nil && owner.UID != uid:
			v.problem("%s is controlled by %s/%s, not its class", ref, owner.Name, owner.UID)
		}
		delete(expected, ref)
	}
	for k, n := range seen {
		if n > 1 {
			v.duplicates += n - 1
			v.problem("%d objects for %s", n, k)
		}
	}
	for ref := range expected {
		v.missing++
		v.problem("%s is missing", ref)
	}
	return v
}

// converge waits until check passes and `poolsmith diff` finds nothing to write (the
// children's contents are the render's, which check does not compare), and returns how
// long that took.
func (f *family) converge(t *testing.T, timeout time.Duration) (time.Duration, verdict) {
	t.Helper()
	start := time.Now()
	var v verdict
	for {
		v = f.check()
		if v.ok() && len(f.present) > len(f.blocked) {
			if out, clean := f.diff(t); !clean {
				v.problem("poolsmith diff would still write: %s", firstLines(out, 6))
			}
		}
		if v.ok() || time.Since(start) > timeout {
			return time.Since(start), v
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func firstLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !strings.Contains(l, ": unchanged") && !strings.HasPrefix(l, "signals:") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep[:min(n, len(keep))], " | ")
}

// diff runs `poolsmith diff` over the family's Baseline and present classes as the
// cluster holds them: clean (exit 0) means the live children are exactly what the next
// reconcile would write.
func (f *family) diff(t *testing.T) (string, bool) {
	t.Helper()
	var docs []string
	b := &v1alpha1.Baseline{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.baseline}, b); err != nil {
		return err.Error(), false
	}
	add := func(kind, name string, spec any) {
		data, err := yaml.Marshal(map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	add("Baseline", b.Name, b.Spec)
	for _, name := range slices.Sorted(maps.Keys(f.present)) {
		if f.blocked[name] {
			continue
		}
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
			return err.Error(), false
		}
		add("WorkloadClass", name, wc.Spec)
	}
	path := filepath.Join(t.TempDir(), "family.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "diff", "-f", path, "--kubeconfig", kubeconfig).CombinedOutput()
	return string(out), err == nil
}

// cleanup deletes the family's classes (their finalizers stripped if no manager is left to
// remove them), its Baseline and foreign objects, so scenarios do not see each other.
func (f *family) cleanup(t *testing.T) {
	list := &v1alpha1.WorkloadClassList{}
	_ = env.Client.List(ctx, list)
	for i := range list.Items {
		wc := &list.Items[i]
		if !strings.HasPrefix(wc.Name, f.prefix+"-") {
			continue
		}
		if len(wc.Finalizers) > 0 {
			_ = env.Client.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
		_ = env.Client.Delete(ctx, wc)
	}
	for _, obj := range f.foreign {
		_ = env.Client.Delete(ctx, obj)
	}
	pools := &karpv1.NodePoolList{}
	_ = env.Client.List(ctx, pools)
	for i := range pools.Items {
		if strings.HasPrefix(pools.Items[i].Name, f.prefix+"-") {
			_ = env.Client.Delete(ctx, &pools.Items[i])
		}
	}
	ncs := &awsv1.EC2NodeClassList{}
	_ = env.Client.List(ctx, ncs)
	for i := range ncs.Items {
		if strings.HasPrefix(ncs.Items[i].Name, f.prefix+"-") {
			_ = env.Client.Delete(ctx, &ncs.Items[i])
		}
	}
	_ = env.Client.Delete(ctx, &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: f.baseline}})
}

// patchBaseline changes the family's Baseline: every class's children follow.
func (f *family) patchBaseline(t *testing.T, c client.Client, patch string) {
	t.Helper()
	b := &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: f.baseline}}
	if err := c.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func patchClass(t *testing.T, c client.Client, name, patch string) {
	t.Helper()
	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching class %s: %v", name, err)
	}
}
