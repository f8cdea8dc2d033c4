package lockdown

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/poolsmith/poolsmith/internal/manifest"
)

// Check returns one line per violation in objs; none means the install is locked down.
func Check(objs []manifest.Object) []string {
	var bad []string
	add := func(o manifest.Object, format string, args ...any) {
		bad = append(bad, o.Where()+": "+fmt.Sprintf(format, args...))
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := o.Into(d); err != nil {
				add(o, "%v", err)
				continue
			}
			for _, msg := range pod(d.Spec.Template.Spec, true) {
				add(o, "%s", msg)
			}
		case "CronJob":
			cj := &batchv1.CronJob{}
			if err := o.Into(cj); err != nil {
				add(o, "%v", err)
				continue
			}
			for _, msg := range pod(cj.Spec.JobTemplate.Spec.Template.Spec, false) {
				add(o, "%s", msg)
			}
		case "ClusterRole", "Role":
			r := &rbacv1.ClusterRole{}
			if err := o.Into(r); err != nil {
				add(o, "%v", err)
				continue
			}
			for _, rule := range r.Rules {
				for _, res := range rule.Resources {
					if res == "secrets" || res == "*" {
						add(o, "grants %s", res)
					}
				}
				for _, v := range rule.Verbs {
					if v == "*" {
						add(o, "grants every verb")
					}
				}
				for _, g := range rule.APIGroups {
					if g == "*" {
						add(o, "grants every API group")
					}
				}
			}
		}
	}
	return bad
}

// pod checks a pod spec; requests says whether cpu and memory requests are required.
func pod(spec corev1.PodSpec, requests bool) []string {
	var bad []string
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		bad = append(bad, "the pod must run as non-root")
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad = append(bad, "container "+c.Name+": the root filesystem must be read-only")
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad = append(bad, "container "+c.Name+": privilege escalation must be off")
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			bad = append(bad, "container "+c.Name+": must drop ALL capabilities")
		}
		if requests && (c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero()) {
			bad = append(bad, "container "+c.Name+": must request cpu and memory")
		}
		if strings.HasSuffix(c.Image, ":latest") || !strings.ContainsAny(c.Image, ":@") {
			bad = append(bad, "container "+c.Name+": image "+c.Image+" is not pinned (latest or no tag)")
		}
	}
	return bad
}
