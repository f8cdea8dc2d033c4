package render

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// AdmissionAPIVersion is the API version of the rendered admission policies and bindings.
const AdmissionAPIVersion = "admissionregistration.k8s.io/v1"

// Kinds of the rendered admission policies and bindings (built into the API server).
const (
	KindValidatingPolicy        = "ValidatingAdmissionPolicy"
	KindValidatingPolicyBinding = "ValidatingAdmissionPolicyBinding"
	KindMutatingPolicy          = "MutatingAdmissionPolicy"
	KindMutatingPolicyBinding   = "MutatingAdmissionPolicyBinding"
)

// ExemptNamespace is never judged nor defaulted: its DaemonSets (aws-node, kube-proxy)
// tolerate every taint, and the cluster must keep running whatever a class says.
const ExemptNamespace = "kube-system"

// Policy names: one access policy and one defaults policy per class, each with a binding of
// the same name. One per class keeps each evaluation's CEL cost to that class's rule
// (every policy has its own runtime budget) and makes the class their owner.
func AccessPolicyName(class string) string   { return "poolsmith-access-" + class }
func DefaultsPolicyName(class string) string { return "poolsmith-default-" + class }

// Label keys a pod selects a node, and so a class, with.
const labelNodePool = karpv1.NodePoolLabelKey

// podSpec picks the pod spec out of a Pod, a PodTemplate or a workload's pod template.
func podSpec(root string) string {
	return fmt.Sprintf(`%[1]s.kind == "Pod" ? %[1]s.spec : (%[1]s.kind == "PodTemplate" ? %[1]s.template.spec : (%[1]s.kind == "CronJob" ? %[1]s.spec.jobTemplate.spec.template.spec : %[1]s.spec.template.spec))`, root)
}

// DaemonSetController is the identity kube-controller-manager's DaemonSet controller
// creates pods as when it runs with --use-service-account-credentials (as EKS and kubeadm
// run it). Who creates a pod is evidence; an ownerReference, which anyone who may create a
// pod can write, is not.
const DaemonSetController = "system:serviceaccount:kube-system:daemon-set-controller"

// notDaemonSetPod lets the DaemonSet controller's pods through: they run on every node by
// design, and their DaemonSet's template was judged when it was written.
var notDaemonSetPod = `object.kind != "Pod" || request.userInfo.username != ` + quote(DaemonSetController)

// tolerationsCEL are the tolerations that count towards landing on a class: a DaemonSet's
// blanket toleration (operator Exists, no key) is a node agent's, which runs on every node
// and is admitted; a DaemonSet that tolerates a class's taints by key, or selects the class,
// is judged like any other template.
const tolerationsCEL = `has(variables.spec.tolerations) ? (object.kind == "DaemonSet" ? variables.spec.tolerations.filter(t, has(t.key) && t.key != "") : variables.spec.tolerations) : []`

// exemptNamespaces matches every namespace but kube-system.
func exemptNamespaces(more ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: append([]metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{ExemptNamespace}},
	}, more...)}
}

// quote is a CEL string literal (CEL accepts Go's escapes).
func quote(s string) string { return strconv.Quote(s) }

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// allowedNamespace is the CEL test of spec.access on namespaceObject.
func allowedNamespace(a *v1alpha1.Access) string {
	var any []string
	if len(a.Namespaces) > 0 {
		any = append(any, "namespaceObject.metadata.name in "+quoteList(a.Namespaces))
	}
	if a.NamespaceSelector != nil {
		any = append(any, "("+selectorCEL(a.NamespaceSelector)+")")
	}
	return strings.Join(any, " || ")
}

// selectorCEL is a label selector as CEL over the namespace's labels.
func selectorCEL(s *v1alpha1.NamespaceSelector) string {
	const labels = "namespaceObject.metadata.labels"
	present := func(k string) string { return fmt.Sprintf("has(%s) && %s in %s", labels, quote(k), labels) }
	var all []string
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		all = append(all, fmt.Sprintf("(%s && %s[%s] == %s)", present(k), labels, quote(k), quote(s.MatchLabels[k])))
	}
	for _, e := range s.MatchExpressions {
		in := fmt.Sprintf("(%s && %s[%s] in %s)", present(e.Key), labels, quote(e.Key), quoteList(e.Values))
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			all = append(all, in)
		case metav1.LabelSelectorOpNotIn:
			all = append(all, "!"+in)
		case metav1.LabelSelectorOpExists:
			all = append(all, "("+present(e.Key)+")")
		case metav1.LabelSelectorOpDoesNotExist:
			all = append(all, "!("+present(e.Key)+")")
		}
	}
	if len(all) == 0 {
		return "true"
	}
	return strings.Join(all, " && ")
}

// describeAccess says who may use the class, for the refusal message.
func describeAccess(a *v1alpha1.Access) string {
	var parts []string
	if len(a.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(a.Namespaces, ", "))
	}
	if s := a.NamespaceSelector; s != nil {
		sel, _ := metav1.LabelSelectorAsSelector(s.LabelSelector())
		if sel != nil && !sel.Empty() {
			parts = append(parts, "namespaces labelled "+sel.String())
		} else {
			parts = append(parts, "every namespace")
		}
	}
	return strings.Join(parts, " and ")
}

// schedulingTaints are the class's taints that keep pods off its nodes.
func schedulingTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// checkAccess refuses an access rule the policy could not enforce: one with no taint of
// the class's own (without one, any pod may land on its nodes), or a selector that is not
// a valid label selector.
func (r *renderer) checkAccess(t *template) {
	a := r.class.Spec.Access
	if a == nil {
		return
	}
	if s := a.NamespaceSelector; s != nil {
		for _, e := range metav1validation.ValidateLabelSelector(s.LabelSelector(), metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "access", "namespaceSelector")) {
			r.invalid(e.Field, e.ErrorBody())
		}
	}
	if len(ownTaints(r.class, t.taints)) == 0 {
		r.invalid("spec.access", "a class with an access rule needs a NoSchedule or NoExecute taint of its own in spec.taints (e.g. example.com/dedicated="+r.class.Name+":NoSchedule): without one any pod may land on its nodes, and a shared taint such as nvidia.com/gpu cannot tell classes apart")
	}
}

// ownTaints are the scheduling taints that are the class's own: set in spec.taints, or the
// poolsmith.dev/class=<name> taint a profile adds.
func ownTaints(wc *v1alpha1.WorkloadClass, merged []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range schedulingTaints(merged) {
		own := t.Key == v1alpha1.LabelClass && t.Value == wc.Name
		for _, ct := range wc.Spec.Taints {
			if ct.Key == t.Key && ct.Effect == t.Effect {
				own = true
			}
		}
		if own {
			out = append(out, t)
		}
	}
	return out
}

// accessPolicies renders the class's ValidatingAdmissionPolicy and binding (when it has an
// access rule) and its MutatingAdmissionPolicy and binding (the namespace default).
func (r *renderer) accessPolicies(t *template, rungs []Rung) []client.Object {
	if r.opts.NoAccessPolicies {
		return nil
	}
	var rungNames []string
	for _, rung := range rungs {
		rungNames = append(rungNames, rung.Name)
	}
	var out []client.Object
	if r.class.Spec.Access != nil {
		vap, binding := r.validatingPolicy(t, rungNames)
		out = append(out, vap, binding)
	}
	if !r.opts.NoDefaultPolicies {
		mp, binding := r.mutatingPolicy(t)
		out = append(out, mp, binding)
	}
	return out
}

// validatingPolicy refuses, outside the allowed namespaces, a pod (or a workload's pod
// template) that could land on the class: it selects the class, or it tolerates every
// scheduling taint of the class and does not select elsewhere.
func (r *renderer) validatingPolicy(t *template, rungs []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	name, class := AccessPolicyName(r.class.Name), quote(r.class.Name)
	a := r.class.Spec.Access
	rungList := quoteList(rungs)
	classKey, rungKey, poolKey := quote(v1alpha1.LabelClass), quote(v1alpha1.LabelRung), quote(labelNodePool)
	pinnedTo := func(key, values string) string {
		return fmt.Sprintf(`(%[1]s in variables.nodeSelector && variables.nodeSelector[%[1]s] %[2]s)`, key, values)
	}
	selects := strings.Join([]string{
		pinnedTo(classKey, "== "+class),
		pinnedTo(rungKey, "in "+rungList),
		pinnedTo(poolKey, "in "+rungList),
		fmt.Sprintf(`variables.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.operator == "In" && has(e.values) && ((e.key == %s && %s in e.values) || ((e.key == %s || e.key == %s) && e.values.exists(v, v in %s)))))`,
			classKey, class, rungKey, poolKey, rungList),
	}, " || ")
	away := strings.Join([]string{
		`(has(variables.spec.nodeName) && variables.spec.nodeName != "")`,
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && variables.nodeSelector[%[1]s] != %[2]s)`, classKey, class),
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && !(variables.nodeSelector[%[1]s] in %[2]s))`, rungKey, rungList),
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && !(variables.nodeSelector[%[1]s] in %[2]s))`, poolKey, rungList),
		fmt.Sprintf(`(variables.terms.size() > 0 && variables.terms.all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, (e.key == %[1]s && ((e.operator == "In" && has(e.values) && !(%[2]s in e.values)) || (e.operator == "NotIn" && has(e.values) && %[2]s in e.values) || e.operator == "DoesNotExist")) || ((e.key == %[3]s || e.key == %[4]s) && ((e.operator == "In" && has(e.values) && !e.values.exists(v, v in %[5]s)) || e.operator == "DoesNotExist")))))`,
			classKey, class, rungKey, poolKey, rungList),
	}, " || ")
	var tolerates []string
	for _, taint := range schedulingTaints(t.taints) {
		tolerates = append(tolerates, fmt.Sprintf(`variables.tolerations.exists(t, (!has(t.effect) || t.effect == "" || t.effect == %[3]s) && ((!has(t.key) || t.key == "") ? (has(t.operator) && t.operator == "Exists") : (t.key == %[1]s && ((has(t.operator) && t.operator == "Exists") || (has(t.value) ? t.value : "") == %[2]s))))`,
			quote(taint.Key), quote(taint.Value), quote(string(taint.Effect))))
	}
	who := describeAccess(a)
	msg := fmt.Sprintf("WorkloadClass %s may only be used from %s", r.class.Name, who)
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: r.ownerLabels()},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: exemptNamespaces(),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					rule("", "pods", "podtemplates", "replicationcontrollers"),
					rule("apps", "daemonsets", "deployments", "replicasets", "statefulsets"),
					rule("batch", "cronjobs", "jobs"),
				},
			},
			// Match conditions cannot see namespaceObject (the API server binds it only for
			// validations), so the namespace test is a variable.
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "not-a-daemonset-pod", Expression: notDaemonSetPod},
			},
			Variables: []admissionv1.Variable{
				{Name: "allowed", Expression: allowedNamespace(a)},
				{Name: "spec", Expression: podSpec("object")},
				{Name: "nodeSelector", Expression: `has(variables.spec.nodeSelector) ? variables.spec.nodeSelector : {}`},
				{Name: "terms", Expression: `has(variables.spec.affinity) && has(variables.spec.affinity.nodeAffinity) && has(variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : []`},
				{Name: "tolerations", Expression: tolerationsCEL},
				// An update that leaves the pod spec alone (a label, a finalizer, a scale) is
				// not judged: a pod admitted before the rule changed can still be deleted.
				{Name: "unchanged", Expression: `request.operation == "UPDATE" && oldObject != null && (` + podSpec("oldObject") + `) == variables.spec`},
				{Name: "selects", Expression: selects},
				{Name: "away", Expression: away},
				{Name: "tolerates", Expression: strings.Join(tolerates, " && ")},
			},
			Validations: []admissionv1.Validation{{
				Expression: `variables.allowed || variables.unchanged || !(variables.selects || (variables.tolerates && !variables.away))`,
				Message:    msg,
				MessageExpression: fmt.Sprintf(`object.kind + " " + (has(object.metadata.name) ? object.metadata.name : "") + " in namespace " + namespaceObject.metadata.name + " could run on WorkloadClass %s (it selects the class or tolerates its taints), which may only be used from %s"`,
					strings.ReplaceAll(r.class.Name, `"`, ``), strings.ReplaceAll(who, `"`, `\"`)),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicyBinding},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: r.ownerLabels()},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return vap, binding
}

func rule(group string, resources ...string) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule: admissionv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources,
			Scope: ptr.To(admissionv1.NamespacedScope),
		},
	}}
}

// mutatingPolicy gives a pod created in a namespace labelled poolsmith.dev/default-class=<class>
// that selects no class the class's nodeSelector and tolerations, keeping its own entries.
// nodeSelector and tolerations are atomic, which an ApplyConfiguration mutation may not
// change, so it is a JSONPatch.
func (r *renderer) mutatingPolicy(t *template) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	name := DefaultsPolicyName(r.class.Name)
	keys := quoteList([]string{v1alpha1.LabelClass, v1alpha1.LabelRung, labelNodePool})
	conditions := []admissionv1.MatchCondition{
		{Name: "not-a-daemonset-pod", Expression: notDaemonSetPod},
		{Name: "selects-no-class", Expression: `!(has(object.spec.nodeName) && object.spec.nodeName != "") && !(has(object.spec.nodeSelector) && object.spec.nodeSelector.exists(k, k in ` + keys + `)) && !(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in ` + keys + `)))`},
	}

	var tolerations []string
	for _, taint := range schedulingTaints(t.taints) {
		tolerations = append(tolerations, fmt.Sprintf(`Object.spec.tolerations{key: %s, operator: "Equal", value: %s, effect: %s}`, quote(taint.Key), quote(taint.Value), quote(string(taint.Effect))))
	}
	class := quote(r.class.Name)
	patch := fmt.Sprintf(`(has(object.spec.nodeSelector) ? [JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(%[1]s), value: %[2]s}] : [JSONPatch{op: "add", path: "/spec/nodeSelector", value: {%[1]s: %[2]s}}])`, quote(v1alpha1.LabelClass), class)
	if len(tolerations) > 0 {
		var each []string
		for _, tol := range tolerations {
			each = append(each, `JSONPatch{op: "add", path: "/spec/tolerations/-", value: `+tol+`}`)
		}
		patch += fmt.Sprintf(` + (has(object.spec.tolerations) ? [%s] : [JSONPatch{op: "add", path: "/spec/tolerations", value: [%s]}])`, strings.Join(each, ", "), strings.Join(tolerations, ", "))
	}
	if a := r.class.Spec.Access; a != nil {
		// A namespace the class does not admit gets no default (the class reports it). Match
		// conditions cannot see namespaceObject, so the patch is empty there.
		patch = "(" + allowedNamespace(a) + ") ? " + patch + " : []"
	}
	mp := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindMutatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: r.ownerLabels()},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			// A default that cannot be applied never blocks a pod: it is created as written.
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: exemptNamespaces(metav1.LabelSelectorRequirement{Key: v1alpha1.LabelDefaultClass, Operator: metav1.LabelSelectorOpIn, Values: []string{r.class.Name}}),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionv1.NamespacedScope)},
				}}},
			},
			MatchConditions:    conditions,
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1.JSONPatch{Expression: patch},
			}},
		},
	}
	binding := &admissionv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindMutatingPolicyBinding},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: r.ownerLabels()},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return mp, binding
}
