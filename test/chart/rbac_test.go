package chart_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/awslabs/operatorpkg/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// rbacInstall is the RBAC one install method ships: the ServiceAccount, its roles and
// bindings, and where the manager it runs looks for signals.
type rbacInstall struct {
	name    string
	objs    []manifest.Object
	sa      types.NamespacedName
	signals types.NamespacedName
	// headroom is the headroom namespace the install's Role is in, when it installs one
	// (chartHeadroomRBAC); the manager then runs with --headroom=capacitybuffer there.
	headroom string
}

// chartRBAC is what charts/poolsmith renders for release rbac in namespace poolsmith-chart.
func chartRBAC(t *testing.T) rbacInstall {
	out, err := helm(t, "template", "rbac", "charts/poolsmith", "--namespace", "poolsmith-chart")
	if err != nil {
		t.Fatal(err)
	}
	return rbacInstall{
		name:    "charts/poolsmith",
		objs:    rbacObjects(decode(t, "charts/poolsmith", out)),
		sa:      types.NamespacedName{Namespace: "poolsmith-chart", Name: "rbac-poolsmith"},
		signals: types.NamespacedName{Namespace: "poolsmith-chart", Name: "poolsmith-signals"},
	}
}

// kustomizeRBAC is what config/default builds.
func kustomizeRBAC(t *testing.T) rbacInstall {
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "kustomize", filepath.Join(root, "config/default"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v: %s", err, stderr.String())
	}
	return rbacInstall{
		name:    "config/default",
		objs:    rbacObjects(decode(t, "config/default", string(out))),
		sa:      types.NamespacedName{Namespace: "poolsmith-system", Name: "poolsmith-controller-manager"},
		signals: operator.DefaultSignalsConfigMap,
	}
}

// rbacObjects keeps an install's ServiceAccounts, bindings and the roles those bindings
// grant. A role no binding of the install names (the chart's workloadclass-editor and
// -viewer, which platform teams bind to people) grants the manager nothing, so the sweep
// has no scenario that could show it needed.
func rbacObjects(objs []manifest.Object) []manifest.Object {
	bound := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" {
			kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			bound[kind+"/"+name] = true
		}
	}
	var keep []manifest.Object
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRoleBinding", "RoleBinding":
			keep = append(keep, o)
		case "ClusterRole", "Role":
			if bound[o.GetKind()+"/"+o.GetName()] {
				keep = append(keep, o)
			}
		}
	}
	return keep
}

// grant is one (API group, resource, verb) a Role or ClusterRole allows.
type grant struct {
	Kind, Role, Namespace string
	Group, Resource, Verb string
	ResourceNames         string
}

func (g grant) String() string {
	where := g.Kind + " " + g.Role
	if g.Namespace != "" {
		where = g.Kind + " " + g.Namespace + "/" + g.Role
	}
	group := g.Group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s.%s in %s", g.Verb, g.Resource, group, where)
}

// forbidden is how the API server words a refusal of exactly this grant.
func (g grant) forbidden() string {
	return fmt.Sprintf("cannot %s resource %q in API group %q", g.Verb, g.Resource, g.Group)
}

// refusals match the texts that report the refusal: forbidden(), or the wording of the
// OwnerReferencesPermissionEnforcement admission plugin, which names the object written
// but not the verb it lacks: delete (to change an object's owner references) and update
// on the owner's finalizers (to set blockOwnerDeletion). Quotes may come JSON-escaped.
func (g grant) refusals() []*regexp.Regexp {
	quote := func(s string) string { return strings.ReplaceAll(regexp.QuoteMeta(s), `"`, `\\?"`) }
	res := []*regexp.Regexp{regexp.MustCompile(quote(g.forbidden()))}
	if g.Verb == "delete" && g.Group != "" {
		res = append(res, regexp.MustCompile(quote(g.Resource+"."+g.Group)+` \\?"[^"\\]*\\?" is forbidden: `+quote("cannot set an ownerRef on a resource you can't delete")))
	}
	if g.Verb == "update" && strings.HasSuffix(g.Resource, "/finalizers") {
		res = append(res, regexp.MustCompile(quote("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on")))
	}
	return res
}

// scope is the grant without the names of its role, to compare install methods.
func (g grant) scope() string {
	return fmt.Sprintf("%s %s/%s %s namespaced=%t", g.Verb, g.Group, g.Resource, g.ResourceNames, g.Namespace != "")
}

func rulesOf(o manifest.Object) []rbacv1.PolicyRule {
	r := &rbacv1.ClusterRole{}
	if err := o.Into(r); err != nil {
		panic(err)
	}
	return r.Rules
}

func grants(objs []manifest.Object) []grant {
	var gs []grant
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		for _, rule := range rulesOf(o) {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						gs = append(gs, grant{Kind: o.GetKind(), Role: o.GetName(), Namespace: o.GetNamespace(),
							Group: group, Resource: res, Verb: verb, ResourceNames: strings.Join(rule.ResourceNames, ",")})
					}
				}
			}
		}
	}
	return gs
}

// apply installs the RBAC for one scenario, less one grant when without is set, and
// returns it as installed: its namespaced objects (ServiceAccount, Roles, RoleBindings)
// moved to the scenario's namespace ns, and its cluster-scoped ones (ClusterRoles,
// ClusterRoleBindings) named prefix-<name>, so scenarios install side by side on one API
// server without sharing a grant. The rules themselves are the install's, less without.
func (in rbacInstall) apply(t *testing.T, without *grant, ns, prefix string) rbacInstall {
	t.Helper()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{scenarioLabel: prefix}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out := rbacInstall{name: in.name, sa: types.NamespacedName{Namespace: ns, Name: in.sa.Name}, signals: types.NamespacedName{Namespace: ns, Name: in.signals.Name}}
	if in.headroom != "" {
		out.headroom = ns + "-hr"
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: out.headroom, Labels: map[string]string{scenarioLabel: prefix}}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, o := range in.objs {
		u := o.Unstructured.DeepCopy()
		if without != nil && u.GetKind() == without.Kind && u.GetName() == without.Role && u.GetNamespace() == without.Namespace {
			var rules []any
			for _, g := range grants([]manifest.Object{o}) {
				if g == *without {
					continue
				}
				rule := map[string]any{"apiGroups": []any{g.Group}, "resources": []any{g.Resource}, "verbs": []any{g.Verb}}
				if g.ResourceNames != "" {
					var names []any
					for _, n := range strings.Split(g.ResourceNames, ",") {
						names = append(names, n)
					}
					rule["resourceNames"] = names
				}
				rules = append(rules, rule)
			}
			u.Object["rules"] = rules
		}
		switch u.GetNamespace() {
		case "":
			u.SetName(prefix + "-" + u.GetName())
		case in.sa.Namespace:
			u.SetNamespace(ns)
		case in.headroom:
			u.SetNamespace(out.headroom)
		default:
			t.Fatalf("%s: the sweep moves namespaced RBAC to the scenario's namespace and expects it all in %s, with the ServiceAccount", o.Where(), in.sa.Namespace)
		}
		if in.signals.Namespace != in.sa.Namespace {
			t.Fatalf("%s: the signals ConfigMap (%s) is expected in the ServiceAccount's namespace", in.name, in.signals)
		}
		if kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind"); kind == "ClusterRole" {
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			if err := unstructured.SetNestedField(u.Object, prefix+"-"+name, "roleRef", "name"); err != nil {
				t.Fatal(err)
			}
		}
		if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
			for _, sub := range subjects {
				if m, ok := sub.(map[string]any); ok && m["namespace"] == in.sa.Namespace {
					m["namespace"] = ns
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[scenarioLabel] = prefix
		u.SetLabels(labels)
		if err := env.Client.Patch(ctx, u, client.Apply, client.FieldOwner("rbac-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s: %v", o.Where(), err)
		}
	}
	return out
}

// errManagerDidNotStop is a manager still running 30 s after its context was cancelled.
var errManagerDidNotStop = errors.New("the manager did not stop within 30s")

// errDetected ends a scenario early: the manager named the forbidden grant.
type errDetected struct{ where string }

func (e errDetected) Error() string { return "the manager reported it in " + e.where }

// scenarioLabel marks what a scenario creates, with its prefix: the manager it runs lists
// and watches only those (isolate), and its cleanup deletes them.
const scenarioLabel = "test.poolsmith.dev/rbac-scenario"

// extraClasses are the classes run makes beside the samples.
var extraClasses = []string{"collide", "collide-ov", "rebalance", "restricted", "blocked", "orphaning", "headroom", "headroom-collide", "headroom-buffer", "headroom-collide-pt", "headroom-collide-cb"}

// scenario drives the manager through everything its RBAC exists for. Scenarios run side
// by side on one API server: each has its own namespace (ServiceAccount, Roles, Lease,
// signals ConfigMap), its own ClusterRoles, and names every cluster-scoped object it makes
// (classes, Baseline, children, Node, NodeClaim) prefix-<name>.
type scenario struct {
	t       *testing.T
	in      rbacInstall // as installed for this scenario
	without *grant
	timeout time.Duration
	prefix  string
	// user is the ServiceAccount's user name, which the API server names in each refusal.
	user string
	// objs are the samples (the Baseline and classes) and classes the ones that must sync,
	// named for this scenario; all every class the scenario makes.
	objs         []*unstructured.Unstructured
	classes, all []string
	// scanned is how far the log has been searched for this scenario's refusals.
	scanned int
}

// newScenario installs in (less without) for a scenario named prefix and deletes what the
// scenario made when the test ends.
func newScenario(t *testing.T, in rbacInstall, without *grant, prefix string, timeout time.Duration) *scenario {
	s := &scenario{t: t, without: without, timeout: timeout, prefix: prefix, scanned: logs.Len()}
	s.in = in.apply(t, without, "rbac-"+prefix, prefix)
	s.user = fmt.Sprintf("system:serviceaccount:%s:%s", s.in.sa.Namespace, s.in.sa.Name)
	s.objs, s.classes = samples(t, s.name)
	for _, o := range s.objs {
		if o.GetKind() == "WorkloadClass" {
			s.all = append(s.all, o.GetName())
		}
	}
	for _, c := range extraClasses {
		s.all = append(s.all, s.name(c))
	}
	t.Cleanup(s.cleanup)
	return s
}

// name is what the scenario calls base: prefix-base.
func (s *scenario) name(base string) string { return s.prefix + "-" + base }

// mine is the label selector of what the scenario creates.
func (s *scenario) mine() client.MatchingLabels {
	return client.MatchingLabels{scenarioLabel: s.prefix}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isolate narrows the manager's lists and watches of cluster-scoped kinds to this
// scenario's objects, with a label selector added to the request, as if the scenario had
// the API server to itself: the classes, Baselines and namespaces it labelled, and the
// children of its classes. RBAC authorizes a list or watch regardless of its selectors,
// so each grant is exercised as on a cluster of its own; gets and writes are untouched.
func (s *scenario) isolate(rt http.RoundTripper) http.RoundTripper {
	mine := scenarioLabel + "=" + s.prefix
	children := fmt.Sprintf("%s in (%s)", v1alpha1.LabelClass, strings.Join(s.all, ","))
	selectors := map[string]string{
		"/apis/poolsmith.dev/v1alpha1/workloadclasses": mine,
		"/apis/poolsmith.dev/v1alpha1/baselines":       mine,
		"/api/v1/namespaces":                           mine,
		"/apis/poolsmith.dev/v1alpha1/accessrules":     children,
		"/apis/karpenter.sh/v1/nodepools":              children,
		"/apis/karpenter.sh/v1/nodeclaims":             children,
		"/apis/karpenter.sh/v1alpha1/nodeoverlays":     children,
		"/apis/karpenter.k8s.aws/v1/ec2nodeclasses":    children,
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sel, ok := selectors[req.URL.Path]
		if !ok || req.Method != http.MethodGet {
			return rt.RoundTrip(req)
		}
		req = req.Clone(req.Context())
		q := req.URL.Query()
		if have := q.Get("labelSelector"); have != "" {
			sel = have + "," + sel
		}
		q.Set("labelSelector", sel)
		req.URL.RawQuery = q.Encode()
		return rt.RoundTrip(req)
	})
}

// ofMine says whether a log line is about this scenario: a refusal names the user, and an
// admission plugin's refusal names the object (and its owner), all prefixed.
func (s *scenario) ofMine(line string) bool {
	return strings.Contains(line, s.user) || strings.Contains(line, `"`+s.prefix+"-")
}

// log is what the manager logged about this scenario since it began, for failure messages.
func (s *scenario) log(n int) string {
	var mine []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if s.ofMine(l) || strings.Contains(l, "rbac-"+s.prefix) {
			mine = append(mine, l)
		}
	}
	if len(mine) > n {
		mine = mine[len(mine)-n:]
	}
	return strings.Join(mine, "\n")
}

// visible says where the manager reported the refusal of s.without, if it has: a line of
// its log about this scenario, or a condition of one of its classes.
func (s *scenario) visible() string {
	if s.without == nil {
		return ""
	}
	text, end := logs.lines(s.scanned)
	s.scanned = end
	refusals := s.without.refusals()
	for _, l := range strings.Split(text, "\n") {
		if !s.ofMine(l) {
			continue
		}
		for _, re := range refusals {
			if re.MatchString(l) {
				return "its log"
			}
		}
	}
	classes := &v1alpha1.WorkloadClassList{}
	if err := env.Client.List(ctx, classes, s.mine()); err != nil {
		classes.Items = nil
	}
	for _, re := range refusals {
		for _, wc := range classes.Items {
			for _, c := range wc.Status.Conditions {
				if re.MatchString(c.Message) {
					return fmt.Sprintf("WorkloadClass %s condition %s", wc.Name, c.Type)
				}
			}
		}
	}
	return ""
}

func (s *scenario) wait(what string, cond func() (bool, error)) error {
	start := time.Now()
	var last error
	for {
		if where := s.visible(); where != "" {
			return errDetected{where}
		}
		ok, err := cond()
		if err == nil && ok {
			if s.without == nil {
				s.t.Logf("%s after %s", what, time.Since(start).Round(10*time.Millisecond))
			}
			return nil
		}
		last = err
		if time.Since(start) > s.timeout {
			return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", s.timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// samples are config/samples' Baseline and classes, plus a class that renders NodeOverlays
// and one whose Baseline does not exist, each named name(<its name>) and its classes
// referring to the Baseline by that name.
func samples(t *testing.T, name func(string) string) (objs []*unstructured.Unstructured, classes []string) {
	files, err := filepath.Glob(filepath.Join(root, "config/samples/poolsmith_v1alpha1_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := manifest.Load(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range loaded {
		u := o.Unstructured.DeepCopy()
		base := u.GetName()
		u.SetName(name(base))
		objs = append(objs, u)
		if u.GetKind() == "WorkloadClass" {
			ref, _, _ := unstructured.NestedString(u.Object, "spec", "baselineRef", "name")
			if ref == "" {
				ref = "default"
			}
			if err := unstructured.SetNestedField(u.Object, name(ref), "spec", "baselineRef", "name"); err != nil {
				t.Fatal(err)
			}
			classes = append(classes, u.GetName())
			if base == "general" {
				overlays := u.DeepCopy()
				overlays.SetName(name("overlays"))
				if err := unstructured.SetNestedField(overlays.Object, true, "spec", "weighting", "nodeOverlays"); err != nil {
					t.Fatal(err)
				}
				orphan := u.DeepCopy()
				orphan.SetName(name("no-baseline"))
				if err := unstructured.SetNestedField(orphan.Object, name("missing"), "spec", "baselineRef", "name"); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, overlays, orphan)
				classes = append(classes, overlays.GetName())
			}
		}
	}
	return objs, classes
}

func signalsConfigMap(key types.NamespacedName) *corev1.ConfigMap {
	feed := `{"ranges":[{"index":0,"label":"<5%","max":5},{"index":1,"label":"5-10%","max":11},{"index":2,"label":"10-15%","max":16},{"index":3,"label":"15-20%","max":22},{"index":4,"label":">20%","max":100}],
"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":60,"r":0},"m7i.large":{"s":60,"r":4}}}}}`
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Annotations: map[string]string{
			signals.FetchedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Data: map[string]string{signals.AdvisorKey: feed},
	}
}

func condition(name, typ string) (*metav1.Condition, int64, error) {
	wc := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
		return nil, 0, err
	}
	return meta.FindStatusCondition(wc.Status.Conditions, typ), wc.Generation, nil
}

func countChildren(list client.ObjectList, class string) (int, error) {
	if err := env.Client.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: class}); err != nil {
		return 0, err
	}
	return meta.LenList(list), nil
}

// run starts the manager as the install's ServiceAccount and drives it: leader election,
// every sample Synced, NodeOverlays, signals read, Baseline status, events (one a series),
// a prune, updates of each kind of child, the admission policies (see access), a
// retirement, an orphaning deletion, two deleting deletions, and the Lease released on
// shutdown.
func (s *scenario) run() error {
	in := s.in
	apply := func(o client.Object) error {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[scenarioLabel] = s.prefix
		o.SetLabels(labels)
		return env.Client.Patch(ctx, o, client.Apply, client.FieldOwner("rbac-test"), client.ForceOwnership)
	}
	if err := apply(signalsConfigMap(in.signals)); err != nil {
		return err
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: s.user}
	cfg.Wrap(s.isolate)
	mctx, cancel := context.WithCancel(ctx)
	caps := capabilities.Capabilities{NodeOverlays: true}
	if in.headroom != "" {
		caps.Headroom, caps.HeadroomNamespace = v1alpha1.HeadroomCapacityBuffer, in.headroom
	}
	mgr, err := operator.New(mctx, cfg, operator.Options{
		MetricsAddr: "0", ProbeAddr: "0", SkipNameValidation: true,
		LeaderElection: true, LeaderElectionNamespace: in.sa.Namespace,
		SignalsConfigMap: in.signals, Capabilities: caps, MaxConcurrentReconciles: 4,
	})
	if err != nil {
		cancel()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errManagerDidNotStop
		}
	}
	// A scenario that ends early stops a manager that may never have synced its cache
	// (the grant removed refuses a list): it too must stop when asked.
	defer func() {
		if err := stop(); errors.Is(err, errManagerDidNotStop) {
			s.t.Error(err)
		}
	}()

	lease := &coordinationv1.Lease{}
	leaseKey := client.ObjectKey{Namespace: in.sa.Namespace, Name: operator.LeaderElectionID}
	if err := s.wait("the manager to take the Lease "+leaseKey.String(), func() (bool, error) {
		if err := env.Client.Get(ctx, leaseKey, lease); err != nil {
			return false, err
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	}); err != nil {
		return err
	}

	objs, classes := s.objs, s.classes
	for _, o := range objs {
		if err := apply(o); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	for _, name := range classes {
		if err := s.wait("WorkloadClass "+name+" Synced=True", func() (bool, error) {
			c, gen, err := condition(name, v1alpha1.ConditionSynced)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen, err
		}); err != nil {
			return err
		}
	}
	if in.headroom != "" {
		if err := s.headroom(apply); err != nil {
			return err
		}
	}
	if err := s.wait("WorkloadClass no-baseline Synced=False (BaselineNotFound)", func() (bool, error) {
		c, _, err := condition(s.name("no-baseline"), v1alpha1.ConditionSynced)
		return c != nil && c.Reason == v1alpha1.ReasonBaselineNotFound, err
	}); err != nil {
		return err
	}
	if err := s.wait("NodeOverlays for class overlays", func() (bool, error) {
		n, err := countChildren(&karpv1alpha1.NodeOverlayList{}, s.name("overlays"))
		return n > 0, err
	}); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass general SignalsCurrent=True (the signals ConfigMap read)", func() (bool, error) {
		c, _, err := condition(s.name("general"), v1alpha1.ConditionSignalsCurrent)
		return c != nil && c.Status == metav1.ConditionTrue, err
	}); err != nil {
		return err
	}
	if err := s.wait("Baseline default's status to count its classes", func() (bool, error) {
		b := &v1alpha1.Baseline{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("default")}, b); err != nil {
			return false, err
		}
		return b.Status.ObservedGeneration == b.Generation && b.Status.Classes > 0, nil
	}); err != nil {
		return err
	}
	general := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("general")}, general); err != nil {
		return err
	}
	if err := s.wait("the leader-election event (core/v1) on the Lease", func() (bool, error) {
		evs := &corev1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(in.sa.Namespace)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Lease" && e.Reason == "LeaderElection" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	// An event repeated for an unchanged object becomes a series, which the recorder
	// patches. The controller repeats one only when a pass reads a stale cache, so the
	// repeat is made deterministic here: the same warning twice through the manager's own
	// recorder, as its ServiceAccount. The second waits for the first to be created: a
	// series patch that meets no event yet is retried only after 10 seconds.
	orphan := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("no-baseline")}, orphan); err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("poolsmith")
	recorder.Eventf(orphan, nil, corev1.EventTypeWarning, "RBACTestRepeat", "Reconcile", "the same warning, twice")
	if err := s.wait("an event on WorkloadClass no-baseline", func() (bool, error) {
		return hasEvent(orphan.UID, "RBACTestRepeat")
	}); err != nil {
		return err
	}
	recorder.Eventf(orphan, nil, corev1.EventTypeWarning, "RBACTestRepeat", "Reconcile", "the same warning, twice")
	if err := s.wait("a repeated event on WorkloadClass no-baseline to become a series", func() (bool, error) {
		return hasSeries(orphan.UID, "RBACTestRepeat")
	}); err != nil {
		return err
	}

	// Prune: general drops its spot rungs.
	before, err := countChildren(&karpv1.NodePoolList{}, s.name("general"))
	if err != nil {
		return err
	}
	if err := env.Client.Patch(ctx, general, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"capacityTypes":["on-demand"]}}`))); err != nil {
		return err
	}
	if err := s.wait(fmt.Sprintf("general's spot NodePools pruned (it had %d)", before), func() (bool, error) {
		n, err := countChildren(&karpv1.NodePoolList{}, s.name("general"))
		c, gen, cerr := condition(s.name("general"), v1alpha1.ConditionSynced)
		return err == nil && cerr == nil && n > 0 && n < before && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen, errors.Join(err, cerr)
	}); err != nil {
		return err
	}
	if err := s.wait("a Pruned event (events.k8s.io) on WorkloadClass general", func() (bool, error) {
		return hasEvent(general.UID, "Pruned")
	}); err != nil {
		return err
	}

	// Names taken by objects Poolsmith does not own, a NodePool and a NodeOverlay: a
	// class's first pass creates without asking, meets AlreadyExists, reads the object once
	// (get) and deletes what it created (delete), then reports the conflict.
	ov := &karpv1alpha1.NodeOverlayList{}
	if err := env.Client.List(ctx, ov, client.MatchingLabels{v1alpha1.LabelClass: s.name("overlays")}); err != nil || len(ov.Items) == 0 {
		return fmt.Errorf("listing the overlays of class overlays: %v (%d)", err, len(ov.Items))
	}
	takenOverlay := &karpv1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: strings.Replace(ov.Items[0].Name, s.name("overlays-"), s.name("collide-ov-"), 1)}, Spec: ov.Items[0].Spec}
	takenPool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": s.name("collide-on-demand-amd64")},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": s.name("default")},
			"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}},
		}}},
	}}
	if err := env.Client.Create(ctx, takenOverlay); err != nil {
		return err
	}
	if err := apply(takenPool); err != nil {
		return err
	}
	for _, c := range []struct {
		name     string
		overlays bool
	}{{s.name("collide"), false}, {s.name("collide-ov"), true}} {
		colliding := &unstructured.Unstructured{}
		for _, o := range objs {
			if o.GetName() == s.name("general") {
				colliding.Object = map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
					"metadata": map[string]any{"name": c.name}, "spec": runtime.DeepCopyJSONValue(o.Object["spec"])}
			}
		}
		if err := unstructured.SetNestedField(colliding.Object, c.overlays, "spec", "weighting", "nodeOverlays"); err != nil {
			return err
		}
		if err := apply(colliding); err != nil {
			return err
		}
		if err := s.wait("WorkloadClass "+c.name+" Synced=False (OwnershipConflict), nothing of it left", func() (bool, error) {
			cond, _, err := condition(c.name, v1alpha1.ConditionSynced)
			if err != nil || cond == nil || cond.Reason != v1alpha1.ReasonOwnershipConflict {
				return false, err
			}
			n, err := countChildren(&karpv1.NodePoolList{}, c.name)
			return n == 0, err
		}); err != nil {
			return err
		}
		if err := env.Client.Delete(ctx, colliding); err != nil {
			return err
		}
	}
	if err := errors.Join(env.Client.Delete(ctx, takenPool), env.Client.Delete(ctx, takenOverlay)); err != nil {
		return err
	}

	// Updates of each kind of child: a NodePool (ci's limits), the NodeOverlays (fewer
	// types for overlays), every EC2NodeClass (a Baseline tag).
	for _, u := range []struct{ class, patch string }{
		{s.name("ci"), `{"spec":{"limits":{"cpu":"123"}}}`},
		{s.name("overlays"), `{"spec":{"instances":{"cpu":{"max":8}}}}`},
	} {
		if err := s.patchAndSync(u.class, u.patch); err != nil {
			return err
		}
	}
	if err := env.Client.Patch(ctx, &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: s.name("default")}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeClass":{"tags":{"rbac-test":"updated"}}}}`))); err != nil {
		return err
	}
	if err := s.wait("EC2NodeClass ci to carry the Baseline's new tag", func() (bool, error) {
		nc := &awsv1.EC2NodeClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("ci")}, nc); err != nil {
			return false, err
		}
		return nc.Spec.Tags["rbac-test"] == "updated", nil
	}); err != nil {
		return err
	}

	if err := s.access(apply); err != nil {
		return err
	}
	if err := s.rebalance(apply); err != nil {
		return err
	}

	// Retire: gpu (prunePolicy Retire) drops its spot rungs; they are retired, not deleted.
	gpu := &v1alpha1.WorkloadClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("gpu")}, gpu); err != nil {
		return err
	}
	if err := s.patchAndSync(s.name("gpu"), `{"spec":{"capacityTypes":["on-demand"]}}`); err != nil {
		return err
	}
	if err := s.wait("a Retiring event on WorkloadClass gpu", func() (bool, error) {
		return hasEvent(gpu.UID, "Retiring")
	}); err != nil {
		return err
	}

	// Orphan: a class with prunePolicy Orphan and NodeOverlays is deleted; its children
	// stay, released.
	orphaning := &unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetName() == s.name("overlays") { // as applied: only its spec is wanted
			orphaning.Object = map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
				"metadata": map[string]any{"name": s.name("orphaning")}, "spec": o.Object["spec"]}
		}
	}
	if err := unstructured.SetNestedField(orphaning.Object, "Orphan", "spec", "prunePolicy"); err != nil {
		return err
	}
	if err := apply(orphaning); err != nil {
		return err
	}
	var released []string
	if err := s.wait("WorkloadClass orphaning Synced=True", func() (bool, error) {
		c, gen, err := condition(s.name("orphaning"), v1alpha1.ConditionSynced)
		if err != nil || c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gen {
			return false, err
		}
		pools := &karpv1.NodePoolList{}
		if err := env.Client.List(ctx, pools, client.MatchingLabels{v1alpha1.LabelClass: s.name("orphaning")}); err != nil {
			return false, err
		}
		released = nil
		for _, np := range pools.Items {
			released = append(released, np.Name)
		}
		return len(released) > 0, nil
	}); err != nil {
		return err
	}
	if err := env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: s.name("orphaning")}}); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass orphaning deleted, its NodePools released", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("orphaning")}, &v1alpha1.WorkloadClass{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		for _, name := range released {
			np := &karpv1.NodePool{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
				return false, err
			}
			if _, managed := np.Labels[v1alpha1.LabelManagedBy]; managed || len(np.OwnerReferences) > 0 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}

	// Deletion: the finalizer deletes NodePools and NodeOverlays, then the EC2NodeClass.
	for _, name := range []string{s.name("overlays"), s.name("general")} {
		if err := env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
	}
	for _, name := range []string{s.name("overlays"), s.name("general")} {
		if err := s.wait("WorkloadClass "+name+" and its children deleted", func() (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.WorkloadClass{})
			if !apierrors.IsNotFound(err) {
				return false, err
			}
			pools, err1 := countChildren(&karpv1.NodePoolList{}, name)
			overlays, err2 := countChildren(&karpv1alpha1.NodeOverlayList{}, name)
			classes, err3 := countChildren(&awsv1.EC2NodeClassList{}, name)
			return pools+overlays+classes == 0, errors.Join(err1, err2, err3)
		}); err != nil {
			return err
		}
	}

	if err := stop(); err != nil {
		return fmt.Errorf("stopping the manager: %w", err)
	}
	if err := s.wait("the Lease released on shutdown", func() (bool, error) {
		if err := env.Client.Get(ctx, leaseKey, lease); err != nil {
			return false, err
		}
		return lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", nil
	}); err != nil {
		return err
	}
	if where := s.visible(); where != "" {
		return errDetected{where}
	}
	return nil
}

// rebalance drives spec.rebalance: a class with a NodeClaim on its fallback rung, a node
// and a pod on it, and its top rung Ready (Karpenter's part, played here). The controller
// reads the class past the cache (get), the node (get), the pods on it (list), their
// PodDisruptionBudgets and the capacity events (list), and marks the NodeClaim (patch);
// NodeClaims are cached (list, watch).
func (s *scenario) rebalance(apply func(client.Object) error) error {
	wc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "WorkloadClass",
		"metadata": map[string]any{"name": s.name("rebalance")},
		"spec": map[string]any{
			"baselineRef":   map[string]any{"name": s.name("default")},
			"architectures": []any{"arm64"}, "capacityTypes": []any{"spot", "on-demand"},
			"instances": map[string]any{"families": []any{"m7g"}}, "fallbackExpireAfter": "Never",
			"rebalance": map[string]any{"policy": "Preferred", "after": "0s"},
		},
	}}
	if err := apply(wc); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass rebalance Synced=True", func() (bool, error) {
		c, gen, err := condition(s.name("rebalance"), v1alpha1.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen, err
	}); err != nil {
		return err
	}
	top := &karpv1.NodePool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("rebalance-spot-arm64")}, top); err != nil {
		return err
	}
	top.Status.Conditions = []status.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now(), ObservedGeneration: top.Generation}}
	if err := env.Client.Status().Update(ctx, top); err != nil {
		return err
	}
	nodeName := s.name("rebalance-node")
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: s.name("rebalance-on-demand-arm64-rbac1"),
			Labels:      map[string]string{karpv1.NodePoolLabelKey: s.name("rebalance-on-demand-arm64"), v1alpha1.LabelClass: s.name("rebalance"), v1alpha1.LabelRung: s.name("rebalance-on-demand-arm64")},
			Annotations: map[string]string{karpv1.NodePoolHashAnnotationKey: "1", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: s.name("rebalance")},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
		},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.name("rebalance"), Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	for _, o := range []client.Object{nc, node, pod} {
		if err := env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	defer func() {
		_ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
		_ = env.Client.Delete(ctx, node)
		_ = env.Client.Delete(ctx, nc)
		_ = env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: s.name("rebalance")}})
	}()
	nc.Status.NodeName = nodeName
	if err := env.Client.Status().Update(ctx, nc); err != nil {
		return err
	}
	return s.wait("NodeClaim "+nc.Name+" marked drifted by the rebalance controller", func() (bool, error) {
		got := &karpv1.NodeClaim{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			return false, err
		}
		return got.Annotations[karpv1.NodePoolHashAnnotationKey] == v1alpha1.RebalanceDriftHash, nil
	})
}

// access drives the AccessRules (docs/access.md), the parameters of the
// admission policies the chart installs: a restricted class gets its AccessRule and its
// Access condition from the cached namespaces (create, list, watch); a hand edit to the
// rule is reverted (update); a foreign AccessRule holding another class's name makes the
// controller read every rendered name (get) and delete what it created (delete).
func (s *scenario) access(apply func(client.Object) error) error {
	class := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "WorkloadClass",
			"metadata": map[string]any{"name": s.name(name)},
			"spec": map[string]any{
				"baselineRef":   map[string]any{"name": s.name("default")},
				"architectures": []any{"amd64"}, "capacityTypes": []any{"on-demand"},
				"taints": []any{map[string]any{"key": "example.com/dedicated", "value": name, "effect": "NoSchedule"}},
				"access": map[string]any{"namespaces": []any{"ml"}},
			},
		}}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.name("access"), Labels: map[string]string{v1alpha1.LabelDefaultClass: s.name("restricted")}}}
	if err := apply(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: ns.ObjectMeta}); err != nil {
		return err
	}
	if err := apply(class("restricted")); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass restricted Synced=True and Access=False DefaultExcluded (namespace rbac-access)", func() (bool, error) {
		c, gen, err := condition(s.name("restricted"), v1alpha1.ConditionSynced)
		a, _, aerr := condition(s.name("restricted"), v1alpha1.ConditionAccess)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen && a != nil && a.Reason == v1alpha1.ReasonDefaultExcluded, errors.Join(err, aerr)
	}); err != nil {
		return err
	}
	rule := &v1alpha1.AccessRule{ObjectMeta: metav1.ObjectMeta{Name: s.name("restricted")}}
	if err := env.Client.Patch(ctx, rule, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rungs":null}}`))); err != nil {
		return fmt.Errorf("hand-editing AccessRule restricted: %w", err)
	}
	if err := s.wait("the hand edit of AccessRule restricted reverted", func() (bool, error) {
		got := &v1alpha1.AccessRule{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("restricted")}, got)
		return len(got.Spec.Rungs) > 0, err
	}); err != nil {
		return err
	}
	// An AccessRule of another owner holds the name class blocked renders: its create is
	// refused, the controller reads that name, rolls back what it created, then reads every
	// name.
	foreign := &v1alpha1.AccessRule{ObjectMeta: metav1.ObjectMeta{Name: s.name("blocked")}, Spec: v1alpha1.AccessRuleSpec{Class: "someone-elses"}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		return err
	}
	if err := apply(class("blocked")); err != nil {
		return err
	}
	if err := s.wait("WorkloadClass blocked Synced=False (OwnershipConflict) and nothing of it left", func() (bool, error) {
		c, _, err := condition(s.name("blocked"), v1alpha1.ConditionSynced)
		if err != nil || c == nil || c.Reason != v1alpha1.ReasonOwnershipConflict {
			return false, err
		}
		pools, err := countChildren(&karpv1.NodePoolList{}, s.name("blocked"))
		return pools == 0, err
	}); err != nil {
		return err
	}
	for _, o := range []client.Object{foreign, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: s.name("blocked")}}} {
		if err := env.Client.Delete(ctx, o); err != nil {
			return err
		}
	}
	// Dropping the rule leaves an AccessRule the access policy does not select.
	if err := s.patchAndSync(s.name("restricted"), `{"spec":{"access":null}}`); err != nil {
		return err
	}
	return s.wait("restricted's AccessRule no longer restricted", func() (bool, error) {
		got := &v1alpha1.AccessRule{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: s.name("restricted")}, got)
		return err == nil && got.Labels[v1alpha1.LabelRestricted] == "false" && len(got.Spec.Access) == 0, err
	})
}

// patchAndSync merge-patches a class's spec and waits until the new generation is Synced.
func (s *scenario) patchAndSync(class, patch string) error {
	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: class}}
	if err := env.Client.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patching WorkloadClass %s with %s: %w", class, patch, err)
	}
	return s.wait(fmt.Sprintf("WorkloadClass %s Synced=True after %s", class, patch), func() (bool, error) {
		c, gen, err := condition(class, v1alpha1.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen && gen == wc.Generation, err
	})
}

// hasEvent says whether an events.k8s.io Event with reason regards the object uid.
func hasEvent(uid types.UID, reason string) (bool, error) {
	evs := &eventsv1.EventList{}
	if err := env.Client.List(ctx, evs, client.MatchingFields{"regarding.uid": string(uid)}); err != nil {
		return false, err
	}
	for _, e := range evs.Items {
		if e.Regarding.UID == uid && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// hasSeries says whether an events.k8s.io Event with reason regards uid and has repeated.
func hasSeries(uid types.UID, reason string) (bool, error) {
	evs := &eventsv1.EventList{}
	if err := env.Client.List(ctx, evs, client.MatchingFields{"regarding.uid": string(uid)}); err != nil {
		return false, err
	}
	for _, e := range evs.Items {
		if e.Regarding.UID == uid && e.Reason == reason && e.Series != nil && e.Series.Count >= 2 {
			return true, nil
		}
	}
	return false, nil
}

// cleanup deletes what the scenario made cluster-wide once its manager has stopped: its
// classes (finalizers stripped: a manager without the rights may have left them),
// Baseline, children (released ones too, by name: they lost their labels), NodeClaim,
// Node and ClusterRoles. No garbage collector runs here. Its namespace stays (no
// namespace controller would empty it) with its Roles, Lease and events.
func (s *scenario) cleanup() {
	classes := &v1alpha1.WorkloadClassList{}
	if err := env.Client.List(ctx, classes, s.mine()); err != nil {
		s.t.Errorf("cleaning up: %v", err)
		return
	}
	for i := range classes.Items {
		wc := &classes.Items[i]
		if len(wc.Finalizers) > 0 {
			if err := env.Client.Patch(ctx, wc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !apierrors.IsNotFound(err) {
				s.t.Errorf("cleaning up: %v", err)
			}
		}
	}
	children, err := labels.Parse(fmt.Sprintf("%s in (%s)", v1alpha1.LabelClass, strings.Join(s.all, ",")))
	if err != nil {
		s.t.Fatal(err)
	}
	var errs []error
	for _, o := range []client.Object{&v1alpha1.WorkloadClass{}, &v1alpha1.Baseline{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
		errs = append(errs, env.Client.DeleteAllOf(ctx, o, s.mine()))
	}
	for _, o := range []client.Object{&karpv1.NodePool{}, &karpv1alpha1.NodeOverlay{}, &awsv1.EC2NodeClass{}, &v1alpha1.AccessRule{}, &karpv1.NodeClaim{}} {
		errs = append(errs, env.Client.DeleteAllOf(ctx, o, client.MatchingLabelsSelector{Selector: children}))
	}
	for _, l := range []client.ObjectList{&karpv1.NodePoolList{}, &karpv1alpha1.NodeOverlayList{}, &corev1.NodeList{}} {
		if err := env.Client.List(ctx, l); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			if obj := o.(client.Object); strings.HasPrefix(obj.GetName(), s.prefix+"-") {
				if err := env.Client.Delete(ctx, obj); !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
			return nil
		})
	}
	if err := errors.Join(errs...); err != nil {
		s.t.Errorf("cleaning up: %v", err)
	}
}

// reconcilesUnder runs the whole scenario under an install's full RBAC: nothing may be
// refused. It runs alone (the sweeps are parallel tests, which start after it), so any
// refusal logged meanwhile is its manager's.
func reconcilesUnder(t *testing.T, in rbacInstall, prefix string) {
	s := newScenario(t, in, nil, prefix, 60*time.Second)
	from := logs.Len()
	if err := s.run(); err != nil {
		t.Fatalf("under %s's RBAC: %v\nmanager log (last 40 lines):\n%s", in.name, err, s.log(40))
	}
	if text, _ := logs.lines(from); strings.Contains(text, "is forbidden") {
		t.Errorf("under %s's RBAC the manager was refused something:\n%s", in.name, grepLines(text, "is forbidden"))
	}
}

// sweepWidth is how many one-grant-removed scenarios run at once, the two sweeps
// together. Each mostly waits for its manager, so they share the API server well; more
// than this only queues on the machine's CPUs.
const sweepWidth = 8

var sweepSlots = make(chan struct{}, sweepWidth)

// everyGrantIsNeeded removes each grant in turn and expects the manager to report the
// refusal, naming the verb and resource, in its log or a class's condition. The
// scenarios run side by side, each with its own install (newScenario), named tag<n>.
func everyGrantIsNeeded(t *testing.T, in rbacInstall, tag string) {
	sweep(t, in, tag, grants(in.objs))
}

// sweep is everyGrantIsNeeded for the grants gs of in.
func sweep(t *testing.T, in rbacInstall, tag string, gs []grant) {
	t.Parallel()
	start := time.Now()
	sort.Slice(gs, func(i, j int) bool { return gs[i].String() < gs[j].String() })
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			sweepSlots <- struct{}{}
			defer func() { <-sweepSlots }()
			t.Run(g.String(), func(t *testing.T) {
				// A scenario that passes ends when the refusal shows; only one that fails
				// waits out a timeout, so it is generous for a loaded machine.
				s := newScenario(t, in, &g, fmt.Sprintf("%s%02d", tag, i), 45*time.Second)
				begun := time.Now()
				err := s.run()
				var detected errDetected
				switch {
				case errors.As(err, &detected):
					t.Logf("refused and reported in %s after %s", detected.where, time.Since(begun).Round(10*time.Millisecond))
				case err == nil:
					t.Errorf("without %s every scenario passed and nothing reported %q: no scenario shows the rule is needed", g, g.forbidden())
				default:
					t.Errorf("without %s the scenario failed (%v) but nothing reported %q\nmanager log (last 20 lines):\n%s", g, err, g.forbidden(), s.log(20))
				}
			})
		})
	}
	wg.Wait()
	t.Logf("the sweep of %d grants took %s", len(gs), time.Since(start).Round(time.Second))
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestChartRBACReconcilesTheSamples(t *testing.T) {
	reconcilesUnder(t, chartRBAC(t), "chart")
}

func TestConfigDefaultRBACReconcilesTheSamples(t *testing.T) {
	reconcilesUnder(t, kustomizeRBAC(t), "kustomize")
}

// The chart's RBAC and config/default's come from the same markers: the same grants.
func TestChartAndConfigDefaultGrantTheSame(t *testing.T) {
	scopes := func(in rbacInstall) []string {
		var s []string
		for _, g := range grants(in.objs) {
			s = append(s, g.scope())
		}
		sort.Strings(s)
		return s
	}
	chart, kustomize := scopes(chartRBAC(t)), scopes(kustomizeRBAC(t))
	if strings.Join(chart, "\n") != strings.Join(kustomize, "\n") {
		t.Errorf("charts/poolsmith grants\n%s\nconfig/default grants\n%s", strings.Join(chart, "\n"), strings.Join(kustomize, "\n"))
	}
}

// The sweep runs on the chart's RBAC only: config/default grants the same scopes
// (TestChartAndConfigDefaultGrantTheSame: verb, group, resource, names and namespaced or
// not, which is all a scenario's install keeps of a grant), so its sweep would remove the
// same grants one at a time and judge the same permissions. It was half the package's
// time.
func TestEveryChartRBACRuleIsNeeded(t *testing.T) {
	everyGrantIsNeeded(t, chartRBAC(t), "c")
}

// writes are the verbs that change objects.
var writes = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true, "*": true}

// No install lets the manager write an admission policy or binding: a compromised manager
// must not be able to install one (RBAC cannot restrict create by name, and admission
// policies never judge other admission-policy objects). The chart installs them once.
func TestTheManagerWritesNoAdmissionPolicy(t *testing.T) {
	for _, in := range []rbacInstall{chartRBAC(t), kustomizeRBAC(t)} {
		for _, g := range grants(in.objs) {
			if (g.Group == "admissionregistration.k8s.io" || g.Group == "*") && writes[g.Verb] {
				t.Errorf("%s: %s", in.name, g)
			}
		}
	}
}

// The signals refresh job may write only its pre-created ConfigMap, by name: no create.
func TestTheRefreshJobWritesOnlyItsConfigMap(t *testing.T) {
	out, err := helm(t, "template", "rbac", "charts/poolsmith", "--namespace", "poolsmith-chart", "--set", "signals.refresh.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, "charts/poolsmith", out)
	var job []manifest.Object
	precreated := false
	for _, o := range objs {
		if strings.HasSuffix(o.GetName(), "-signals-refresh") && o.GetKind() == "Role" {
			job = append(job, o)
		}
		if o.GetKind() == "ConfigMap" && o.GetName() == "poolsmith-signals" {
			precreated = true
		}
	}
	if len(job) != 1 {
		t.Fatalf("found %d refresh-job Roles", len(job))
	}
	if !precreated {
		t.Error("the chart does not pre-create the signals ConfigMap the job writes")
	}
	for _, g := range grants(job) {
		if !writes[g.Verb] {
			continue
		}
		if g.Resource != "configmaps" || g.ResourceNames != "poolsmith-signals" || (g.Verb != "update" && g.Verb != "patch") {
			t.Errorf("the refresh job may %s", g)
		}
	}
}
