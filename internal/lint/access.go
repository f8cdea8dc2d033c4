package lint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Checks of access rules and namespace defaults.
const (
	CheckTaintWithoutAccess = "taint-without-access"
	CheckSharedAccessTaint  = "access-taint-shared"
	CheckOverlappingDefault = "overlapping-default"
	CheckDefaultExcluded    = "default-excluded"
	CheckDefaultElsewhere   = "access-namespace-defaults-elsewhere"
	CheckUnknownDefault     = "unknown-default-class"
)

// Access checks the classes' access rules and taints against each other and against the
// namespaces in the input that name a default class (poolsmith.dev/default-class).
// Namespaces are given as in the input: the same name twice with two defaults overlaps.
func Access(classes []Class, namespaces []*corev1.Namespace) []Finding {
	var findings []Finding
	add := func(sev Severity, object, check, format string, args ...any) {
		findings = append(findings, Finding{Severity: sev, Object: object, Check: check, Message: fmt.Sprintf(format, args...)})
	}
	byName := map[string]Class{}
	// Who carries each scheduling taint, by key=value:effect.
	carriers := map[string][]string{}
	for _, c := range classes {
		byName[c.Class.Name] = c
		if c.Result == nil || len(c.Result.NodePools) == 0 {
			continue
		}
		for _, t := range classTaints(c.Result.NodePools[0]) {
			carriers[taintString(t)] = append(carriers[taintString(t)], c.Class.Name)
		}
	}
	for _, c := range classes {
		if c.Result == nil || len(c.Result.NodePools) == 0 {
			continue
		}
		obj := "WorkloadClass/" + c.Class.Name
		taints := classTaints(c.Result.NodePools[0])
		if c.Class.Spec.Access == nil {
			if len(c.Class.Spec.Taints) > 0 {
				add(Warning, obj, CheckTaintWithoutAccess, "the class has taints but no spec.access: any namespace may add a toleration and land on its nodes; set spec.access to say who may")
			}
			continue
		}
		// A rule is enforced by the class's own taints: if every one is also another class's,
		// a pod tolerating the other class lands here and the policy cannot tell them apart.
		own := 0
		for _, k := range slices.Sorted(maps.Keys(taints)) {
			if len(carriers[taintString(taints[k])]) == 1 {
				own++
			}
		}
		if own == 0 {
			add(Error, obj, CheckSharedAccessTaint, "spec.access needs a NoSchedule or NoExecute taint no other class carries; every taint of this class is also another's (%s)", strings.Join(sharedWith(c.Class.Name, taints, carriers), "; "))
		}
	}
	defaults := map[string]string{}
	for _, ns := range namespaces {
		class, ok := ns.Labels[v1alpha1.LabelDefaultClass]
		if !ok {
			continue
		}
		obj := "Namespace/" + ns.Name
		if prev, seen := defaults[ns.Name]; seen && prev != class {
			add(Error, obj, CheckOverlappingDefault, "named default class %s and %s: a namespace has one default (%s)", prev, class, v1alpha1.LabelDefaultClass)
			continue
		}
		defaults[ns.Name] = class
		c, ok := byName[class]
		if !ok {
			add(Warning, obj, CheckUnknownDefault, "default class %s is not in the input", class)
			continue
		}
		if !c.Class.Spec.Access.Admits(ns.Name, ns.Labels) {
			add(Error, obj, CheckDefaultExcluded, "default class %s excludes this namespace in its spec.access: its pods get no default (the class reports it in its Access condition)", class)
		}
	}
	// A class that names a namespace whose default is another class: pods there that choose
	// nothing go to the other class, not this one.
	for _, c := range classes {
		if c.Class.Spec.Access == nil {
			continue
		}
		for _, n := range c.Class.Spec.Access.Namespaces {
			if d, ok := defaults[n]; ok && d != c.Class.Name {
				add(Warning, "WorkloadClass/"+c.Class.Name, CheckDefaultElsewhere, "spec.access names namespace %s, whose default class is %s: its pods that select no class go to %s", n, d, d)
			}
		}
	}
	return findings
}

func taintString(t corev1.Taint) string {
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

func sharedWith(class string, taints map[string]corev1.Taint, carriers map[string][]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(taints)) {
		s := taintString(taints[k])
		var others []string
		for _, o := range carriers[s] {
			if o != class {
				others = append(others, o)
			}
		}
		out = append(out, s+" with "+strings.Join(others, ", "))
	}
	return out
}

// classTaints are a rung's NoSchedule and NoExecute taints but the access taint: that one
// is unique to the class by construction, while the access policy also refuses a pod that
// tolerates every other taint of the class (all that nodes launched before the access
// taint carry), so those must tell the class apart on their own.
func classTaints(np *karpv1.NodePool) map[string]corev1.Taint {
	out := hardTaints(np)
	delete(out, v1alpha1.TaintAccess+":"+string(corev1.TaintEffectNoExecute))
	return out
}
