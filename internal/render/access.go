package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// AdmissionAPIVersion is the API version of the access and default admission policies.
const AdmissionAPIVersion = "admissionregistration.k8s.io/v1"

// Kinds of the admission policies and bindings (built into the API server).
const (
	KindValidatingPolicy        = "ValidatingAdmissionPolicy"
	KindValidatingPolicyBinding = "ValidatingAdmissionPolicyBinding"
	KindMutatingPolicy          = "MutatingAdmissionPolicy"
	KindMutatingPolicyBinding   = "MutatingAdmissionPolicyBinding"
	// KindAccessRule is the parameter both policies read, one per class.
	KindAccessRule = "AccessRule"
)

// ExemptNamespace is never judged nor defaulted: its DaemonSets (aws-node, kube-proxy)
// tolerate every taint, and the cluster must keep running whatever a class says.
const ExemptNamespace = "kube-system"

// Names of the policies the chart (and config/policies) installs once, each with a
// binding of the same name. The manager writes none of them: it writes one AccessRule per
// class, the parameter both read.
const (
	AccessPolicyName   = "poolsmith-access"
	DefaultsPolicyName = "poolsmith-default"
)

// Label keys a pod selects a node, and so a class, with.
const labelNodePool = karpv1.NodePoolLabelKey

// exemptNamespaces matches every namespace but kube-system and also.
func exemptNamespaces(also []string, more ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: append([]metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: append([]string{ExemptNamespace}, also...)},
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

// restricted reports whether the class's access rule is enforced: spec.access is set and
// the AccessRule is rendered.
func (r *renderer) restricted() bool {
	return accessEnforced(r.class, r.opts)
}

// accessTaint is the NoExecute taint every rung of a restricted class carries. A pod that
// names a node (spec.nodeName) skips the scheduler and every admission rule about nodes;
// the kubelet still refuses it unless it tolerates the node's NoExecute taints, and the
// access policy refuses that toleration outside the class's namespaces.
func accessTaint(class string) corev1.Taint {
	return corev1.Taint{Key: v1alpha1.TaintAccess, Value: class, Effect: corev1.TaintEffectNoExecute}
}

// checkReservedTaints refuses the access taint's key in a Baseline's or a class's taints:
// only the renderer sets it, from spec.access, so a toleration of it means one class.
func (r *renderer) checkReservedTaints() {
	msg := v1alpha1.TaintAccess + " is reserved: Poolsmith sets it, with the class's name, on every rung of a class with spec.access"
	bnp, spec := r.baseline.Spec.NodePool, r.class.Spec
	for _, l := range []struct {
		field  string
		taints v1alpha1.Taints
	}{
		{"baseline.spec.nodePool.taints", bnp.Taints},
		{"baseline.spec.nodePool.startupTaints", bnp.StartupTaints},
		{"spec.taints", spec.Taints},
		{"spec.startupTaints", spec.StartupTaints},
	} {
		for i, t := range l.taints {
			if t.Key == v1alpha1.TaintAccess {
				r.invalid(fmt.Sprintf("%s[%d].key", l.field, i), msg)
			}
		}
	}
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
		// The API server refuses an empty selector since it was written; a class stored
		// before keeps it (ratcheting). Written to the AccessRule it would vanish (CleanJSON
		// drops empty objects), and the rule would enforce namespaces alone where Admits,
		// and the Access condition, admit every namespace.
		if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
			r.invalid("spec.access.namespaceSelector", "an empty namespaceSelector would admit every namespace: give it labels or expressions, or omit spec.access to let every namespace use the class")
		}
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

// podSpec picks the pod spec out of a Pod, a PodTemplate or a workload's pod template.
func podSpec(root string) string {
	return fmt.Sprintf(`%[1]s.kind == "Pod" ? %[1]s.spec : (%[1]s.kind == "PodTemplate" ? %[1]s.template.spec : (%[1]s.kind == "CronJob" ? %[1]s.spec.jobTemplate.spec.template.spec : %[1]s.spec.template.spec))`, root)
}

// The identities kube-controller-manager's controllers write as when it runs with
// --use-service-account-credentials (as EKS and kubeadm run it). Who creates an object is
// evidence; an ownerReference, which anyone who may create a pod can write, is not.
const (
	DaemonSetController  = "system:serviceaccount:kube-system:daemon-set-controller"
	DeploymentController = "system:serviceaccount:kube-system:deployment-controller"
	ReplicaSetController = "system:serviceaccount:kube-system:replicaset-controller"
)

// HeadroomWriters is where the manager writes its headroom placeholders and who it is
// there: the access and defaults policies skip, in that namespace only, the manager's
// Deployments and PodTemplates and the ReplicaSets and Pods the Deployment and ReplicaSet
// controllers make of the Deployments. Anyone else writing there is judged as anywhere else. CEL cannot read the
// manager's flags, so both are written into the policies: the chart from its values
// (headroom.namespace, its service account), config/policies from DefaultHeadroomWriters.
type HeadroomWriters struct {
	// Namespace is the headroom namespace (--headroom-namespace).
	Namespace string
	// Manager is the manager's username, system:serviceaccount:<namespace>:<name>.
	Manager string
}

// DefaultHeadroomWriters is config/default's: the default headroom namespace and the
// service account poolsmith-controller-manager in poolsmith-system.
var DefaultHeadroomWriters = HeadroomWriters{
	Namespace: v1alpha1.DefaultHeadroomNamespace,
	Manager:   "system:serviceaccount:poolsmith-system:poolsmith-controller-manager",
}

// exemptWriter is one identity whose writes of kind the policies skip, in namespace (in
// every namespace when empty).
type exemptWriter struct{ user, kind, namespace string }

// exemptWriters are the writes no policy judges: the DaemonSet controller's pods anywhere
// (they run on every node by design, and their DaemonSet's template was judged when it was
// written), and in the headroom namespace the chain that makes placeholders: the manager's
// Deployments, the Deployment controller's ReplicaSets of them, the ReplicaSet
// controller's pods, and the manager's PodTemplates (the CapacityBuffer's unit, of which
// only Karpenter's virtual pods are made, in memory). A controller copies only a template written before it, and in the
// headroom namespace only the manager's go unjudged.
func exemptWriters(h HeadroomWriters) []exemptWriter {
	return []exemptWriter{
		{DaemonSetController, "Pod", ""},
		{h.Manager, "Deployment", h.Namespace},
		{h.Manager, "PodTemplate", h.Namespace},
		{DeploymentController, "ReplicaSet", h.Namespace},
		{ReplicaSetController, "Pod", h.Namespace},
	}
}

// notExemptWriter is the match condition both policies skip exemptWriters with.
func notExemptWriter(h HeadroomWriters) admissionv1.MatchCondition {
	var writes []string
	for _, w := range exemptWriters(h) {
		c := fmt.Sprintf(`(object.kind == %s && request.userInfo.username == %s`, quote(w.kind), quote(w.user))
		if w.namespace != "" {
			c += ` && request.namespace == ` + quote(w.namespace)
		}
		writes = append(writes, c+")")
	}
	return admissionv1.MatchCondition{Name: "not-an-exempt-writer", Expression: "!(" + strings.Join(writes, " || ") + ")"}
}

// tolerationsCEL are the tolerations that count towards landing on a class: a DaemonSet's
// blanket toleration (operator Exists, no key) is a node agent's, which runs on every node
// and is admitted; a DaemonSet that tolerates a class's taints by key, or selects the class,
// is judged like any other template.
const tolerationsCEL = `has(variables.spec.tolerations) ? (object.kind == "DaemonSet" ? variables.spec.tolerations.filter(t, has(t.key) && t.key != "") : variables.spec.tolerations) : []`

// allowedCEL is the CEL test of the parameter's access entries on namespaceObject: every
// entry must admit the namespace, by name or by a label selector (Access.Admits in Go; a
// test proves the two agree over generated rules, namespaces and pods). No entry admits
// every namespace, and so would an entry with neither field, which the AccessRule's schema
// refuses (an empty namespaceSelector, which would become one when written, is refused
// when the class is rendered).
const allowedCEL = `!has(params.spec.access) || params.spec.access.all(a, (!has(a.namespaces) && !has(a.namespaceSelector)) || (has(a.namespaces) && namespaceObject.metadata.name in a.namespaces) || (has(a.namespaceSelector) && (!has(a.namespaceSelector.matchLabels) || a.namespaceSelector.matchLabels.all(k, k in variables.labels && variables.labels[k] == a.namespaceSelector.matchLabels[k])) && (!has(a.namespaceSelector.matchExpressions) || a.namespaceSelector.matchExpressions.all(e, e.operator == "In" ? (e.key in variables.labels && has(e.values) && variables.labels[e.key] in e.values) : (e.operator == "NotIn" ? !(e.key in variables.labels && has(e.values) && variables.labels[e.key] in e.values) : (e.operator == "Exists" ? e.key in variables.labels : !(e.key in variables.labels)))))))`

// namespaceLabelsCEL are namespaceObject's labels, empty when it has none.
const namespaceLabelsCEL = `has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}`

// AdmissionPolicies are the policies and bindings the chart and config/policies install
// once (hack/chartgen writes them from here): the access policy, whose parameters are the
// restricted classes' AccessRules, the namespace-default policy, whose parameters are
// every class's, the guardrail policy, whose parameters are the Baselines, the ownership
// policy, which has none (these two read o), and the commitments policy, which refuses a
// Baseline created with an expired commitment; the first two read h (the headroom
// namespace's writers they skip). The manager writes only AccessRules, so it needs no
// write access to any admission policy.
func AdmissionPolicies(o Ownership, h HeadroomWriters) []client.Object {
	vap, vapb := accessPolicy(h)
	mp, mpb := defaultsPolicy(h)
	gp, gpb := guardrailsPolicy(o)
	op, opb := ownershipPolicy(o)
	cp, cpb := commitmentsPolicy()
	return []client.Object{vap, vapb, mp, mpb, gp, gpb, op, opb, cp, cpb}
}

// paramKind is the AccessRule, the parameter of both policies.
func paramKind() *admissionv1.ParamKind {
	return &admissionv1.ParamKind{APIVersion: v1alpha1.GroupVersion.String(), Kind: KindAccessRule}
}

// accessPolicy refuses, outside a restricted class's allowed namespaces, a pod (or a
// workload's pod template) that could land on the class: it selects the class or one of
// its rungs, or it tolerates every scheduling taint of the class and does not select
// elsewhere. A pod that names a node (spec.nodeName) is judged the same way: a policy
// cannot read the Node, but every restricted class's nodes carry its NoExecute access
// taint, which the kubelet refuses a pod for not tolerating, and tolerating it is what
// this policy judges. The binding selects every restricted class's AccessRule: the API server
// evaluates the policy once per parameter and refuses if any refuses, so a pod is refused
// when any restricted class it could land on forbids its namespace.
//
// Not judged (exemptWriters): the DaemonSet controller's pods, and in h's namespace only,
// the manager's placeholder Deployments and the ReplicaSets and pods the controllers make
// of them; anyone else's write there is judged as anywhere.
//
// failurePolicy Fail: a rule the API server cannot evaluate (an evaluation error, the
// AccessRule CRD missing, its informer not yet synced) refuses rather than lets a pod
// through. parameterNotFoundAction Allow: no restricted class, nothing to enforce.
func accessPolicy(h HeadroomWriters) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	classKey, rungKey, poolKey := quote(v1alpha1.LabelClass), quote(v1alpha1.LabelRung), quote(labelNodePool)
	pinnedTo := func(key, values string) string {
		return fmt.Sprintf(`(%[1]s in variables.nodeSelector && variables.nodeSelector[%[1]s] %[2]s)`, key, values)
	}
	selects := strings.Join([]string{
		pinnedTo(classKey, "== params.spec.class"),
		pinnedTo(rungKey, "in variables.rungs"),
		pinnedTo(poolKey, "in variables.rungs"),
		fmt.Sprintf(`variables.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.operator == "In" && has(e.values) && ((e.key == %s && params.spec.class in e.values) || ((e.key == %s || e.key == %s) && e.values.exists(v, v in variables.rungs)))))`,
			classKey, rungKey, poolKey),
	}, " || ")
	away := strings.Join([]string{
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && variables.nodeSelector[%[1]s] != params.spec.class)`, classKey),
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && !(variables.nodeSelector[%[1]s] in variables.rungs))`, rungKey),
		fmt.Sprintf(`(%[1]s in variables.nodeSelector && !(variables.nodeSelector[%[1]s] in variables.rungs))`, poolKey),
		fmt.Sprintf(`(variables.terms.size() > 0 && variables.terms.all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, (e.key == %[1]s && ((e.operator == "In" && has(e.values) && !(params.spec.class in e.values)) || (e.operator == "NotIn" && has(e.values) && params.spec.class in e.values) || e.operator == "DoesNotExist")) || ((e.key == %[2]s || e.key == %[3]s) && ((e.operator == "In" && has(e.values) && !e.values.exists(v, v in variables.rungs)) || e.operator == "DoesNotExist")))))`,
			classKey, rungKey, poolKey),
	}, " || ")
	// The pod tolerates the class's access taint (enough to run on its nodes when placed by
	// name), or every other scheduling taint of the class (enough to be scheduled on a node
	// launched before the access taint existed, until drift replaces it). A class with an
	// access rule has a taint of its own (the renderer refuses it otherwise); a rule with
	// none tolerates nothing.
	tolerated := `variables.tolerations.exists(t, (!has(t.effect) || t.effect == "" || t.effect == x.effect) && ((!has(t.key) || t.key == "") ? (has(t.operator) && t.operator == "Exists") : (t.key == x.key && ((has(t.operator) && t.operator == "Exists") || (has(t.value) ? t.value : "") == (has(x.value) ? x.value : "")))))`
	accessKey := quote(v1alpha1.TaintAccess)
	tolerates := fmt.Sprintf(`variables.taints.exists(x, x.key == %[1]s && %[2]s) || (variables.taints.exists(x, x.key != %[1]s) && variables.taints.all(x, x.key == %[1]s || %[2]s))`, accessKey, tolerated)
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: AccessPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:     paramKind(),
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: exemptNamespaces(nil),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					rule("", "pods", "podtemplates", "replicationcontrollers"),
					rule("apps", "daemonsets", "deployments", "replicasets", "statefulsets"),
					rule("batch", "cronjobs", "jobs"),
				},
			},
			// Match conditions cannot see namespaceObject or params (the API server binds
			// them only for validations), so the namespace test is a variable.
			MatchConditions: []admissionv1.MatchCondition{
				notExemptWriter(h),
			},
			Variables: []admissionv1.Variable{
				{Name: "spec", Expression: podSpec("object")},
				{Name: "nodeSelector", Expression: `has(variables.spec.nodeSelector) ? variables.spec.nodeSelector : {}`},
				{Name: "terms", Expression: `has(variables.spec.affinity) && has(variables.spec.affinity.nodeAffinity) && has(variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : []`},
				{Name: "tolerations", Expression: tolerationsCEL},
				// An update that leaves the pod spec alone (a label, a finalizer, a scale) is
				// not judged: a pod admitted before the rule changed can still be deleted.
				{Name: "unchanged", Expression: `request.operation == "UPDATE" && oldObject != null && (` + podSpec("oldObject") + `) == variables.spec`},
				{Name: "labels", Expression: namespaceLabelsCEL},
				{Name: "allowed", Expression: allowedCEL},
				{Name: "rungs", Expression: `has(params.spec.rungs) ? params.spec.rungs : []`},
				{Name: "taints", Expression: `has(params.spec.taints) ? params.spec.taints : []`},
				{Name: "selects", Expression: selects},
				{Name: "away", Expression: away},
				{Name: "tolerates", Expression: tolerates},
			},
			Validations: []admissionv1.Validation{{
				Expression:        `variables.allowed || variables.unchanged || !(variables.selects || (variables.tolerates && !variables.away))`,
				Message:           "the pod could run on a WorkloadClass its namespace may not use",
				MessageExpression: `object.kind + " " + (has(object.metadata.name) ? object.metadata.name : "") + " in namespace " + namespaceObject.metadata.name + " could run on WorkloadClass " + params.spec.class + " (it selects the class or tolerates its taints), which may only be used from " + (has(params.spec.allowed) ? params.spec.allowed : "the namespaces its access rule names")`,
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	return vap, denyBinding(AccessPolicyName, &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelRestricted: "true"}})
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

// defaultsPolicy gives a pod created in a namespace labelled poolsmith.dev/default-class=<class>
// that selects no class the class's nodeSelector and a toleration for each of its
// scheduling taints (a restricted class's NoExecute access taint among them), keeping its
// own entries. A pod that names a node gets the tolerations only: a nodeSelector the node
// may not match would make the kubelet refuse it wherever it named. Its parameters are every class's AccessRule;
// only the one of the namespace's class patches, and not where the class's access rule
// excludes the namespace. It never matches h's namespace (nor kube-system), nor
// exemptWriters' pods. nodeSelector and tolerations are atomic, which an
// ApplyConfiguration mutation may not change, so it is a JSONPatch. failurePolicy Ignore:
// a default that cannot be applied never blocks a pod.
func defaultsPolicy(h HeadroomWriters) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	keys := quoteList([]string{v1alpha1.LabelClass, v1alpha1.LabelRung, labelNodePool})
	conditions := []admissionv1.MatchCondition{
		notExemptWriter(h),
		{Name: "selects-no-class", Expression: `!(has(object.spec.nodeSelector) && object.spec.nodeSelector.exists(k, k in ` + keys + `)) && !(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in ` + keys + `)))`},
	}
	classKey, defaultKey := quote(v1alpha1.LabelClass), quote(v1alpha1.LabelDefaultClass)
	toleration := `Object.spec.tolerations{key: x.key, operator: "Equal", value: has(x.value) ? x.value : "", effect: x.effect}`
	patch := fmt.Sprintf(`!(%[2]s in variables.labels && variables.labels[%[2]s] == params.spec.class && variables.allowed) ? [] : `+
		`((has(object.spec.nodeName) && object.spec.nodeName != "") ? [] : (has(object.spec.nodeSelector) ? [JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(%[1]s), value: params.spec.class}] : [JSONPatch{op: "add", path: "/spec/nodeSelector", value: {%[1]s: params.spec.class}}])) + `+
		`(!has(params.spec.taints) || params.spec.taints.size() == 0 ? [] : (has(object.spec.tolerations) ? params.spec.taints.map(x, JSONPatch{op: "add", path: "/spec/tolerations/-", value: %[3]s}) : [JSONPatch{op: "add", path: "/spec/tolerations", value: params.spec.taints.map(x, %[3]s)}]))`,
		classKey, defaultKey, toleration)
	mp := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindMutatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultsPolicyName},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			ParamKind:     paramKind(),
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: exemptNamespaces([]string{h.Namespace}, metav1.LabelSelectorRequirement{Key: v1alpha1.LabelDefaultClass, Operator: metav1.LabelSelectorOpExists}),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionv1.NamespacedScope)},
				}}},
			},
			MatchConditions: conditions,
			Variables: []admissionv1.Variable{
				{Name: "labels", Expression: namespaceLabelsCEL},
				{Name: "allowed", Expression: allowedCEL},
			},
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1.JSONPatch{Expression: patch},
			}},
		},
	}
	binding := &admissionv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindMutatingPolicyBinding},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultsPolicyName},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: DefaultsPolicyName,
			ParamRef: &admissionv1.ParamRef{
				Selector:                &metav1.LabelSelector{},
				ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
			},
		},
	}
	return mp, binding
}

// accessRule is the class's AccessRule as rendered: its resolved scheduling taints, its
// access rule and the rungs it renders. The controller adds the rungs that still exist
// without being rendered (retiring, orphaned) and, while the family cannot be written,
// narrows it to what was enforced before (see AccessRuleFor).
func (r *renderer) accessRule(t *template, rungs []Rung) *v1alpha1.AccessRule {
	rule := &v1alpha1.AccessRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: KindAccessRule},
		ObjectMeta: metav1.ObjectMeta{Name: r.class.Name, Labels: r.ownerLabels()},
		Spec:       v1alpha1.AccessRuleSpec{Class: r.class.Name, Taints: schedulingTaints(t.taints)},
	}
	for _, rung := range rungs {
		rule.Spec.Rungs = append(rule.Spec.Rungs, rung.Name)
	}
	slices.Sort(rule.Spec.Rungs)
	// Always set, "false" on an open class: a label the render drops would be kept on the
	// live object as another writer's.
	rule.Labels[v1alpha1.LabelRestricted] = "false"
	if a := r.class.Spec.Access; a != nil {
		rule.Spec.Access = []v1alpha1.Access{*a.DeepCopy()}
		rule.Spec.Allowed = describeAccess(a)
		rule.Labels[v1alpha1.LabelRestricted] = "true"
	}
	return rule
}

// NarrowedAccessRule is the AccessRule to enforce while the class's NodePool family cannot
// be written. rendered is the rule the class renders now (nil when it does not render),
// live the rule enforced now (nil when there is none). Access is the intersection of what
// live enforced (its first entry, the rule of the last family written) and spec.access:
// a narrowing takes effect at once, a widening waits for the family. Taints stay live's,
// those of the nodes that exist; rungs are both rules'. Nil when there is nothing to
// enforce from.
func NarrowedAccessRule(wc *v1alpha1.WorkloadClass, rendered, live *v1alpha1.AccessRule) *v1alpha1.AccessRule {
	var want *v1alpha1.AccessRule
	switch {
	case rendered != nil:
		want = rendered.DeepCopy()
	case live != nil:
		want = &v1alpha1.AccessRule{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: KindAccessRule},
			ObjectMeta: metav1.ObjectMeta{Name: wc.Name, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: wc.Name}},
			Spec:       *live.Spec.DeepCopy(),
		}
	default:
		return nil
	}
	var access []v1alpha1.Access
	if live != nil {
		if len(live.Spec.Access) > 0 {
			access = append(access, *live.Spec.Access[0].DeepCopy())
		}
		want.Spec.Taints = slices.Clone(live.Spec.Taints)
		rungs := append(slices.Clone(want.Spec.Rungs), live.Spec.Rungs...)
		slices.Sort(rungs)
		want.Spec.Rungs = slices.Compact(rungs)
	}
	if a := wc.Spec.Access; a != nil && (len(access) == 0 || !equality.Semantic.DeepEqual(access[0], *a)) {
		access = append(access, *a.DeepCopy())
	}
	want.Spec.Access = access
	var who []string
	for i := range access {
		who = append(who, describeAccess(&access[i]))
	}
	want.Spec.Allowed = strings.Join(who, ", and only those also allowed by the class's new spec.access: ")
	want.Labels[v1alpha1.LabelRestricted] = "false"
	if len(access) > 0 {
		want.Labels[v1alpha1.LabelRestricted] = "true"
	}
	return want
}
