package render_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

func settingOrigin(s render.Settings, path string) (string, render.Origin) {
	for _, f := range s.Fields {
		if f.Path == path {
			return f.Value, f.Origin
		}
	}
	return "", ""
}

func TestResolveRebalanceLayersClassOverBaselineOverDefaults(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.Rebalance = &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred, After: &metav1.Duration{Duration: time.Hour}, MaxInterruption: "<5%"}
	})
	wc := class("web", "", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Rebalance = &v1alpha1.Rebalance{After: &metav1.Duration{Duration: time.Minute}}
	})
	s := render.Resolve(render.Inputs{Class: wc, Baseline: b})
	if s.RebalanceErr != nil {
		t.Fatal(s.RebalanceErr)
	}
	r := s.Rebalance
	if r.Policy != v1alpha1.RebalancePreferred || r.After != time.Minute || r.MaxInterruption != catalog.BucketUnder5 || r.QuietPeriod != time.Hour || r.MaxConcurrent.IntValue() != 1 {
		t.Errorf("got %+v", r)
	}
	for path, want := range map[string][2]string{
		"spec.rebalance.policy":          {"Preferred", "baseline"},
		"spec.rebalance.after":           {"1m0s", "class"},
		"spec.rebalance.maxInterruption": {"<5%", "baseline"},
		"spec.rebalance.maxConcurrent":   {"1", "poolsmith-default"},
		"spec.rebalance.quietPeriod":     {"1h0m0s", "poolsmith-default"},
	} {
		if v, o := settingOrigin(s, path); v != want[0] || string(o) != want[1] {
			t.Errorf("%s: got %s from %s, want %s from %s", path, v, o, want[0], want[1])
		}
	}

	off := render.Resolve(render.Inputs{Class: class("web", "")})
	if r := off.Rebalance; r.Policy != v1alpha1.RebalanceOff || r.After != 30*time.Minute || r.MaxInterruption != catalog.Bucket10To15 || off.RebalanceErr != nil {
		t.Errorf("defaults: %+v, %v", r, off.RebalanceErr)
	}
}

// A field set to its zero value is set: after: 0s on the class wins over the Baseline's.
func TestResolveRebalanceZeroValuesAreSet(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.Rebalance = &v1alpha1.Rebalance{After: &metav1.Duration{Duration: time.Hour}, MaxConcurrent: ptr.To(intstr.FromString("50%"))}
	})
	wc := class("web", "", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Rebalance = &v1alpha1.Rebalance{After: &metav1.Duration{}}
	})
	s := render.Resolve(render.Inputs{Class: wc, Baseline: b})
	if s.Rebalance.After != 0 || s.Rebalance.MaxConcurrent.String() != "50%" {
		t.Errorf("got %+v", s.Rebalance)
	}
	if _, o := settingOrigin(s, "spec.rebalance.after"); o != render.OriginClass {
		t.Errorf("after: origin %s", o)
	}
}

func TestResolveRebalanceErrorsDoNotStopTheRender(t *testing.T) {
	wc := class("web", "", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Rebalance = &v1alpha1.Rebalance{MaxInterruption: "12%", QuietPeriod: &metav1.Duration{}}
	})
	res := mustRender(t, baseline(), wc)
	if res.Settings.RebalanceErr == nil || res.Settings.RebalanceErr.Error() != `spec.rebalance.maxInterruption: unknown bucket "12%"` {
		t.Errorf("got %v", res.Settings.RebalanceErr)
	}
	wc.Spec.Rebalance.MaxInterruption = ""
	if s := render.Resolve(render.Inputs{Class: wc}); s.RebalanceErr == nil || s.RebalanceErr.Error() != "spec.rebalance.quietPeriod: must be positive" {
		t.Errorf("got %v", s.RebalanceErr)
	}
}

// The render's result carries the same settings Resolve gives, access included.
func TestRenderResultCarriesTheResolvedSettings(t *testing.T) {
	wc := class("web", "", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Taints = []v1alpha1.Taint{taint("example.com/team", "web", "NoSchedule")}
		wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"web"}}
		wc.Spec.Rebalance = &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred}
	})
	res := mustRender(t, baseline(), wc)
	if res.Settings.Rebalance.Policy != v1alpha1.RebalancePreferred || !res.Settings.Access.Enforced || res.Settings.Access.Allowed != "namespaces web" {
		t.Errorf("got %+v", res.Settings)
	}
	if v, o := settingOrigin(res.Settings, "access.enforced"); v != "true" || o != render.OriginClass {
		t.Errorf("access.enforced: %s from %s", v, o)
	}
	off := render.Resolve(render.Inputs{Class: wc, Options: render.Options{Capabilities: capabilities.Capabilities{NoAccessPolicies: true}}})
	if v, o := settingOrigin(off, "access.enforced"); off.Access.Enforced || v != "false" || o != render.OriginComputed("access policies off") {
		t.Errorf("access policies off: %s from %s", v, o)
	}
}
