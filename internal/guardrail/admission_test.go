package guardrail_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cli"
	"github.com/poolsmith/poolsmith/internal/guardrail"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// owners is the ownership the test installs, as the chart would from its values.
var owners = render.Ownership{
	PlatformGroups: []string{"poolsmith:platform"},
	TeamsByGroup:   map[string][]string{"team-a-devs": {"a"}, "team-b-devs": {"b"}},
}

// TestTheAPIServerEnforcesGuardrailsAndOwnership runs every row of issue 29's "Done when"
// on the real API server, each write as an impersonated user bound to the chart's
// poolsmith-workloadclass-editor ClusterRole, and holds every guardrail refusal to the
// in-process verdict lint and the controller reach (guardrail.Judge), row by row.
func TestTheAPIServerEnforcesGuardrailsAndOwnership(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs the test control plane (KUBEBUILDER_ASSETS)")
	}
	ctx := context.Background()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	admin := env.Client

	for _, obj := range render.AdmissionPolicies(owners, render.DefaultHeadroomWriters)[4:] {
		if err := admin.Patch(ctx, obj, client.Apply, client.FieldOwner("guardrail-test"), client.ForceOwnership); err != nil {
			t.Fatalf("installing %s: %v", obj.GetName(), err)
		}
	}
	installEditorRole(t, ctx, admin)
	as := func(name string, groups ...string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: append(groups, "system:authenticated")}
		c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob, pat := as("alice", "team-a-devs"), as("bob", "team-b-devs"), as("pat", "poolsmith:platform")

	bounded := Bounded()
	lax := Bounded()
	lax.Name, lax.Spec.Guardrails = "lax", nil
	for _, b := range []*v1alpha1.Baseline{bounded, lax} {
		if err := admin.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// The API server picks up new policies and parameters asynchronously: wait until the
	// ownership mapping and the Baseline are both in force.
	deadline := time.Now().Add(time.Minute)
	for {
		over := named(Within(), "probe")
		over.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("1000")
		err := alice.Create(ctx, named(Within(), "probe"), client.DryRunAll)
		if err == nil {
			err = alice.Create(ctx, over, client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), render.GuardrailsPolicyName) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policies were not in force after a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	gpu := func(wc *v1alpha1.WorkloadClass) *v1alpha1.WorkloadClass {
		wc.Spec.Profile = v1alpha1.ProfileGPU
		wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"g"}, MinGeneration: ptr.To[int32](5), GPU: &v1alpha1.GPUShape{Names: []string{"t4"}}}
		return wc
	}
	// Creates: the server's verdict and lint's, row by row.
	for _, row := range []struct {
		name    string
		who     client.Client
		class   *v1alpha1.WorkloadClass
		policy  string // the refusing policy, "" when admitted
		offline bool   // a bound of the class (lint judges it), not who writes it
	}{
		{"team A creates a class within bounds", alice, named(Within(), "a-web"), "", true},
		{"limits above the ceiling", alice, edit(named(Within(), "a-big"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("1000") }), render.GuardrailsPolicyName, true},
		{"a budget above the ceiling", alice, edit(named(Within(), "a-spendy"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget = &v1alpha1.Budget{PerHour: "75"} }), render.GuardrailsPolicyName, true},
		{"a budget that only warns", alice, edit(named(Within(), "a-warn"), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Budget = &v1alpha1.Budget{PerHour: "5", Mode: v1alpha1.BudgetWarn}
		}), render.GuardrailsPolicyName, true},
		{"a budget within the ceiling", alice, edit(named(Within(), "a-thrifty"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget = &v1alpha1.Budget{PerHour: "49.5"} }), "", true},
		{"a forbidden capacity type", alice, edit(named(Within(), "a-od"), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
		}), render.GuardrailsPolicyName, true},
		{"the profile's capacity types", alice, edit(named(Within(), "a-profile"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.CapacityTypes = nil }), render.GuardrailsPolicyName, true},
		{"a GPU without a taint", alice, gpu(named(Within(), "a-gpu")), render.GuardrailsPolicyName, true},
		{"a GPU with its own taint", alice, edit(gpu(named(Within(), "a-gpu-tainted")), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/team-a-gpu", Effect: corev1.TaintEffectNoSchedule}}
		}), "", true},
		{"a label contradicting the Baseline's", alice, edit(named(Within(), "a-env"), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/env": "dev"}
		}), render.GuardrailsPolicyName, true},
		{"a profile the Baseline does not allow", alice, edit(named(Within(), "a-mem"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.Profile = v1alpha1.ProfileMemoryOptimized }), render.GuardrailsPolicyName, true},
		{"team A names team B", alice, edit(named(Within(), "a-as-b"), func(wc *v1alpha1.WorkloadClass) { wc.Labels[v1alpha1.LabelTeam] = "b" }), render.OwnershipPolicyName, false},
		{"team A grants itself on-demand", alice, edit(named(Within(), "a-grant"), func(wc *v1alpha1.WorkloadClass) {
			wc.Labels["example.com/on-demand"] = "true"
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
		}), render.GuardrailsPolicyName, false},
		{"the platform grants on-demand", pat, edit(named(Within(), "a-granted"), func(wc *v1alpha1.WorkloadClass) {
			wc.Labels["example.com/on-demand"] = "true"
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
		}), "", true},
		{"a missing Baseline is admitted (the controller reports BaselineNotFound)", alice, edit(named(Within(), "a-nobase"), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: "missing"}
			wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("1000")
		}), "", false},
		{"team B creates its class", bob, edit(named(Within(), "b-web"), func(wc *v1alpha1.WorkloadClass) { wc.Labels[v1alpha1.LabelTeam] = "b" }), "", true},
	} {
		t.Run(row.name, func(t *testing.T) {
			err := row.who.Create(ctx, row.class.DeepCopy())
			refused(t, err, row.policy)
			if !row.offline {
				return
			}
			offline := guardrail.Judge(bounded, row.class)
			lint := lintOffline(t, bounded, row.class)
			switch {
			case row.policy == "" && strings.Contains(lint, " guardrail "):
				t.Errorf("the API server admits it; poolsmith lint refuses it:\n%s", lint)
			case row.policy != "" && !strings.Contains(lint, firstRefusal(offline)):
				t.Errorf("poolsmith lint does not report the refusal %q:\n%s", firstRefusal(offline), lint)
			}
			switch {
			case row.policy == "" && offline != nil:
				t.Errorf("the API server admits it; lint refuses it: %v", offline)
			case row.policy != "" && offline == nil:
				t.Errorf("the API server refuses it; lint admits it")
			case row.policy != "" && !strings.Contains(err.Error(), firstRefusal(offline)):
				t.Errorf("the API server's refusal %q does not carry lint's first %q", err, firstRefusal(offline))
			}
		})
	}

	update := func(who client.Client, name string, change func(*v1alpha1.WorkloadClass)) error {
		wc := &v1alpha1.WorkloadClass{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
			t.Fatal(err)
		}
		change(wc)
		return who.Update(ctx, wc)
	}
	for _, row := range []struct {
		name   string
		err    func() error
		policy string
	}{
		{"team A cannot edit team B's class", func() error {
			return update(alice, "b-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Zones = []string{"us-east-1a"} })
		}, render.OwnershipPolicyName},
		{"team A cannot delete team B's class", func() error {
			return alice.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "b-web"}})
		}, render.OwnershipPolicyName},
		{"team A cannot hand its class to team B", func() error {
			return update(alice, "a-web", func(wc *v1alpha1.WorkloadClass) { wc.Labels[v1alpha1.LabelTeam] = "b" })
		}, render.OwnershipPolicyName},
		{"team A cannot switch Baseline to escape its bounds", func() error {
			return update(alice, "a-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: "lax"} })
		}, render.OwnershipPolicyName},
		{"team A cannot raise its limit above the ceiling", func() error {
			return update(alice, "a-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("257") })
		}, render.GuardrailsPolicyName},
		{"team A edits its own class", func() error {
			return update(alice, "a-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Zones = []string{"us-east-1a"} })
		}, ""},
		{"the platform group edits team B's class", func() error {
			return update(pat, "b-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Zones = []string{"us-east-1b"} })
		}, ""},
		{"the platform group moves a class to another Baseline", func() error {
			return update(pat, "a-web", func(wc *v1alpha1.WorkloadClass) { wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: "lax"} })
		}, ""},
		{"a metadata-only update of another team's class is not judged", func() error {
			return update(alice, "b-web", func(wc *v1alpha1.WorkloadClass) { wc.Annotations = map[string]string{"example.com/note": "x"} })
		}, ""},
		{"contradictory guardrails are refused on the Baseline", func() error {
			b := Bounded()
			b.Name = "contradictory"
			b.Spec.Guardrails.Families = []string{"t3"}
			return admin.Create(ctx, b) // RBAC gives Baselines to cluster administrators, not the editor role
		}, "guardrails.families: every family must belong to one of guardrails.categories"},
		{"a budget ceiling of 0 is refused on the Baseline", func() error {
			b := Bounded()
			b.Name = "zero-budget"
			b.Spec.Guardrails.Ceilings.BudgetPerHour = "0.00"
			return admin.Create(ctx, b)
		}, "budgetPerHour: Invalid value"},
	} {
		t.Run(row.name, func(t *testing.T) { refused(t, row.err(), row.policy) })
	}
}

// lintOffline runs poolsmith lint on the Baseline and the class, as a team's CI would.
func lintOffline(t *testing.T, baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass) string {
	t.Helper()
	var docs []string
	for _, obj := range []client.Object{baseline.DeepCopy(), class.DeepCopy()} {
		kind := "Baseline"
		if _, ok := obj.(*v1alpha1.WorkloadClass); ok {
			kind = "WorkloadClass"
		}
		obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
		obj.SetResourceVersion("")
		obj.SetUID("")
		obj.SetCreationTimestamp(metav1.Time{})
		obj.SetManagedFields(nil)
		y, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(y))
	}
	var out, errOut bytes.Buffer
	cli.Execute([]string{"lint", "-f", "-"}, strings.NewReader(strings.Join(docs, "---\n")), &out, &errOut)
	return out.String() + errOut.String()
}

// refused fails unless err is a refusal naming policy (nil when policy is empty).
func refused(t *testing.T, err error, policy string) {
	t.Helper()
	switch {
	case policy == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case policy != "" && err == nil:
		t.Fatalf("admitted; want a refusal by %s", policy)
	case policy != "" && !strings.Contains(err.Error(), policy):
		t.Fatalf("refused with %v; want %s", err, policy)
	}
	if err != nil {
		t.Logf("refused: %v", err)
	}
}

func firstRefusal(err error) string {
	return strings.SplitN(err.Error(), "; ", 2)[0]
}

func named(wc *v1alpha1.WorkloadClass, name string) *v1alpha1.WorkloadClass {
	wc.Name = name
	return wc
}

func edit(wc *v1alpha1.WorkloadClass, f func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	f(wc)
	return wc
}

// installEditorRole creates the chart's poolsmith-workloadclass-editor ClusterRole (its
// template without the release labels) and binds it to the test's groups, cluster-wide.
func installEditorRole(t *testing.T, ctx context.Context, c client.Client) {
	data, err := os.ReadFile("../../charts/poolsmith/templates/workloadclass-roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "{{") && strings.TrimSpace(line) != "labels:" {
			kept = append(kept, line)
		}
	}
	for _, doc := range strings.Split(strings.Join(kept, "\n"), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil || role.Name == "" {
			continue
		}
		if err := c.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "workloadclass-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "poolsmith-workloadclass-editor"},
	}
	for _, g := range []string{"team-a-devs", "team-b-devs", "poolsmith:platform"} {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}
