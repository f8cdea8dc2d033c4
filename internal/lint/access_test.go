package lint_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/lint"
)

func restricted(name string, taint v1alpha1.Taint, namespaces ...string) v1alpha1.WorkloadClassSpec {
	return v1alpha1.WorkloadClassSpec{Taints: v1alpha1.Taints{taint}, Access: &v1alpha1.Access{Namespaces: namespaces}}
}

func ns(name, defaultClass string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if defaultClass != "" {
		n.Labels = map[string]string{v1alpha1.LabelDefaultClass: defaultClass}
	}
	return n
}

func TestATaintWithoutAnAccessRuleRestrictsNothing(t *testing.T) {
	open := rendered(t, class("batch", v1alpha1.WorkloadClassSpec{Taints: v1alpha1.Taints{{Key: "example.com/batch", Effect: corev1.TaintEffectNoSchedule}}}))
	plain := rendered(t, class("web", v1alpha1.WorkloadClassSpec{}))
	findings := lint.Access([]lint.Class{open, plain}, nil)
	if !has(findings, lint.Warning, "WorkloadClass/batch", lint.CheckTaintWithoutAccess) || len(findings) != 1 {
		t.Fatalf("findings = %v", findings)
	}
}

func TestAnAccessRuleNeedsATaintNoOtherClassCarries(t *testing.T) {
	shared := v1alpha1.Taint{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	a := rendered(t, class("train", restricted("train", shared, "ml")))
	b := rendered(t, class("serve", restricted("serve", shared, "ml")))
	findings := lint.Access([]lint.Class{a, b}, nil)
	for _, c := range []string{"WorkloadClass/train", "WorkloadClass/serve"} {
		if !has(findings, lint.Error, c, lint.CheckSharedAccessTaint) {
			t.Errorf("%s: no %s in %v", c, lint.CheckSharedAccessTaint, findings)
		}
	}
	b = rendered(t, class("serve", restricted("serve", v1alpha1.Taint{Key: "example.com/dedicated", Value: "serve", Effect: corev1.TaintEffectNoSchedule}, "ml")))
	if findings := lint.Access([]lint.Class{a, b}, nil); len(findings) != 0 {
		t.Errorf("distinct taints: %v", findings)
	}
}

func TestNamespaceDefaults(t *testing.T) {
	gpu := rendered(t, class("gpu", restricted("gpu", v1alpha1.Taint{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, "ml", "research")))
	web := rendered(t, class("web", v1alpha1.WorkloadClassSpec{}))
	findings := lint.Access([]lint.Class{gpu, web}, []*corev1.Namespace{
		ns("ml", "gpu"), ns("ml", "web"), // the same namespace, two defaults
		ns("sandbox", "gpu"),  // excluded by gpu's rule
		ns("research", "web"), // gpu names it, but its default is web
		ns("ops", "nope"),     // no such class
		ns("plain", ""),
	})
	for _, want := range []struct {
		sev           lint.Severity
		object, check string
	}{
		{lint.Error, "Namespace/ml", lint.CheckOverlappingDefault},
		{lint.Error, "Namespace/sandbox", lint.CheckDefaultExcluded},
		{lint.Warning, "WorkloadClass/gpu", lint.CheckDefaultElsewhere},
		{lint.Warning, "Namespace/ops", lint.CheckUnknownDefault},
	} {
		if !has(findings, want.sev, want.object, want.check) {
			t.Errorf("no %s %s %s in %v", want.sev, want.object, want.check, findings)
		}
	}
	if len(findings) != 4 {
		t.Errorf("want exactly 4 findings, got %v", findings)
	}
}
