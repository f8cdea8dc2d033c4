package lint_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/render"
)

func TestHeadroomWarnings(t *testing.T) {
	opts := render.Options{Headroom: render.HeadroomOptions{Now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}}
	unit := &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("2"))}
	for _, tc := range []struct {
		name    string
		profile v1alpha1.Profile
		spec    v1alpha1.Headroom
		limits  corev1.ResourceList
		check   string
		want    bool
	}{
		{"more units than the class's limits", v1alpha1.ProfileGeneral, v1alpha1.Headroom{Replicas: ptr.To[int32](10), PodShape: unit},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}, lint.CheckHeadroomOverLimits, true},
		{"within the class's limits", v1alpha1.ProfileGeneral, v1alpha1.Headroom{Replicas: ptr.To[int32](4), PodShape: unit},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}, lint.CheckHeadroomOverLimits, false},
		{"a leap-day window", v1alpha1.ProfileGeneral, v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: unit,
			Schedule: []v1alpha1.HeadroomWindow{{Start: "0 0 29 2 *", Duration: metav1.Duration{Duration: time.Hour}}}}, nil, lint.CheckHeadroomScheduleClosed, true},
		{"a daily window", v1alpha1.ProfileGeneral, v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: unit,
			Schedule: []v1alpha1.HeadroomWindow{{Start: "0 8 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}, nil, lint.CheckHeadroomScheduleClosed, false},
		{"a GPU kept warm by default", v1alpha1.ProfileGPU, v1alpha1.Headroom{Replicas: ptr.To[int32](1)}, nil, lint.CheckHeadroomPodsCost, true},
		{"a GPU class with its own unit", v1alpha1.ProfileGPU, v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: &v1alpha1.HeadroomPodShape{GPU: ptr.To[int32](1)}}, nil, lint.CheckHeadroomPodsCost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := v1alpha1.WorkloadClassSpec{Profile: tc.profile, Headroom: &tc.spec, Limits: tc.limits}
			wc := class("hr", spec)
			res, err := render.Render(baseline(), wc, opts)
			if err != nil {
				t.Fatal(err)
			}
			findings := lint.Lint([]lint.Class{{Class: wc, Baseline: baseline(), Result: res}}, opts)
			if got := has(findings, lint.Warning, "WorkloadClass/hr", tc.check); got != tc.want {
				t.Errorf("%s: %v, want %v; findings %v", tc.check, got, tc.want, findings)
			}
		})
	}
}
