package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// OriginGuardrail is the origin of a class's limit taken from its Baseline's
// guardrails.ceilings because the class sets none.
const OriginGuardrail Origin = "baseline:guardrail"

// Names of the guardrail and ownership policies (each with a binding of the same name).
const (
	GuardrailsPolicyName = "poolsmith-guardrails"
	OwnershipPolicyName  = "poolsmith-ownership"
)

// Ownership is who may change which WorkloadClasses: members of PlatformGroups may change
// every class (and set the labels guardrails.capacityTypeGrants name); a member of a group
// that TeamsByGroup maps to a team may create, change and delete the classes labelled
// poolsmith.dev/team=<that team>. CEL cannot read the manager's flags, so the mapping is
// written into the policies: the chart from its values (ownership.platformGroups,
// ownership.teamsByGroup), config/policies from DefaultOwnership.
type Ownership struct {
	PlatformGroups []string            `json:"platformGroups"`
	TeamsByGroup   map[string][]string `json:"teamsByGroup"`
}

// DefaultOwnership is the chart's default and config/policies': cluster administrators
// and the group poolsmith:platform are the platform group; no group owns a team until
// the mapping says so.
var DefaultOwnership = Ownership{PlatformGroups: []string{"system:masters", "poolsmith:platform"}, TeamsByGroup: map[string][]string{}}

// celLiteral is v as a CEL literal: JSON lists, maps and strings are CEL's.
func celLiteral(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // lists and maps of strings always marshal
	}
	return string(b)
}

// ceiling is one guardrails.ceilings field and the limits it caps.
type ceiling struct {
	field  string
	limits []corev1.ResourceName
	get    func(*v1alpha1.Ceilings) *resource.Quantity
}

var ceilings = []ceiling{
	{"cpu", []corev1.ResourceName{corev1.ResourceCPU}, func(c *v1alpha1.Ceilings) *resource.Quantity { return c.CPU }},
	{"memory", []corev1.ResourceName{corev1.ResourceMemory}, func(c *v1alpha1.Ceilings) *resource.Quantity { return c.Memory }},
	{"gpu", []corev1.ResourceName{v1alpha1.LimitNvidiaGPU, v1alpha1.LimitAMDGPU}, func(c *v1alpha1.Ceilings) *resource.Quantity { return c.GPU }},
	{"nodes", []corev1.ResourceName{v1alpha1.LimitNodes}, func(c *v1alpha1.Ceilings) *resource.Quantity { return c.Nodes }},
}

// ClassLimits are the class-wide limits the class is rendered with: spec.limits, and for
// each resource a Baseline ceiling caps that the class does not limit, the ceiling
// (origin baseline:guardrail). A limit above its ceiling is left as it is: the guardrail
// policy refuses it, and the controller reports it before rendering.
func ClassLimits(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass) (corev1.ResourceList, map[corev1.ResourceName]Origin) {
	limits, origin := corev1.ResourceList{}, map[corev1.ResourceName]Origin{}
	for name, q := range class.Spec.Limits {
		limits[name], origin[name] = q.DeepCopy(), OriginClass
	}
	if baseline == nil || baseline.Spec.Guardrails == nil || baseline.Spec.Guardrails.Ceilings == nil {
		return limits, origin
	}
	for _, c := range ceilings {
		q := c.get(baseline.Spec.Guardrails.Ceilings)
		if q == nil {
			continue
		}
		for _, name := range c.limits {
			if _, set := limits[name]; !set {
				limits[name], origin[name] = q.DeepCopy(), OriginGuardrail
			}
		}
	}
	return limits, origin
}

// ClassBudget is the budget the class is judged against: its spec.budget, else its
// Baseline's guardrails.ceilings.budgetPerHour, enforced (origin baseline:guardrail); nil
// when neither is set. A class budget above the ceiling, or in mode Warn under one, is
// left as it is: the guardrail policy refuses it and the controller reports it first.
func ClassBudget(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass) (*v1alpha1.Budget, Origin) {
	if class.Spec.Budget != nil {
		return class.Spec.Budget, OriginClass
	}
	if baseline != nil && baseline.Spec.Guardrails != nil && baseline.Spec.Guardrails.Ceilings != nil && baseline.Spec.Guardrails.Ceilings.BudgetPerHour != "" {
		return &v1alpha1.Budget{PerHour: baseline.Spec.Guardrails.Ceilings.BudgetPerHour, Mode: v1alpha1.BudgetEnforce}, OriginGuardrail
	}
	return nil, ""
}

// resolveBudget adds the class's budget and its origin to the settings.
func resolveBudget(in Inputs, add func(path, value string, origin Origin)) *v1alpha1.Budget {
	b, origin := ClassBudget(in.Baseline, in.Class)
	if b != nil {
		add("spec.budget.perHour", b.PerHour, origin)
	}
	return b
}

// resolveLimits adds each class-wide limit and its origin to the settings.
func resolveLimits(in Inputs, add func(path, value string, origin Origin)) corev1.ResourceList {
	limits, origin := ClassLimits(in.Baseline, in.Class)
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		q := limits[name]
		add("spec.limits["+string(name)+"]", q.String(), origin[name])
	}
	return limits
}

// guardrailsPolicy judges a WorkloadClass against the guardrails of the Baseline it names,
// and against that Baseline's mandatory tags, labels and annotations. Its parameter is
// the Baseline: a binding cannot pick its parameter from the object written, so the
// binding selects every Baseline and each evaluation judges only when the parameter is the
// class's own Baseline. It judges CREATE and the UPDATEs that change spec or labels of a
// class not being deleted, so a Baseline tightened later never blocks the manager's own
// writes (the finalizer, status) nor a deletion. A class naming a Baseline that does not
// exist meets no parameter and is admitted; the controller reports it (BaselineNotFound).
// failurePolicy Fail: a class the API server cannot judge is refused.
func guardrailsPolicy(o Ownership) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	const g = "params.spec.guardrails"
	profileLists := func(get func(ProfileDefaults) []string) string {
		m := map[string][]string{}
		for name, p := range Profiles {
			m[string(name)] = append([]string{}, get(p)...)
		}
		return celLiteral(m)
	}
	minGens := map[string]int32{}
	for name, p := range Profiles {
		minGens[string(name)] = ptr.Deref(p.MinGeneration, 0)
	}
	generation := func(f string) string {
		return fmt.Sprintf(`(%[1]s.find('[0-9]+') != "" ? int(%[1]s.find('[0-9]+')) : 0)`, f)
	}
	// A family's category is its leading letters (m7g: m, u-6tb1: u), as on the Baseline.
	inCategory := func(f, cats string) string {
		return fmt.Sprintf(`(%[1]s.find('^[a-z]+') in %[2]s)`, f, cats)
	}
	var over []string
	for _, c := range ceilings {
		for _, name := range c.limits {
			over = append(over, fmt.Sprintf(`(has(%[1]s.ceilings) && has(%[1]s.ceilings.%[2]s) && %[3]s in variables.limits && quantity(string(variables.limits[%[3]s])).isGreaterThan(quantity(string(%[1]s.ceilings.%[2]s))) ? [%[3]s + " " + string(variables.limits[%[3]s]) + " is above the ceiling " + string(%[1]s.ceilings.%[2]s)] : [])`,
				g, c.field, quote(string(name))))
		}
	}
	grantedBy := func(ct string) string {
		return fmt.Sprintf(`has(%[1]s.capacityTypeGrants) && %[1]s.capacityTypeGrants.exists(x, x.capacityType == %[2]s && x.label in variables.labels && variables.labels[x.label] == "true")`, g, ct)
	}
	baseline := `" (guardrails of Baseline " + params.metadata.name + ")"`
	// Each check becomes a validation that holds unless the class uses this Baseline and
	// the Baseline has guardrails (variables.guarded); its message names the field first.
	type check struct{ name, expr, message string }
	checks := []check{
		{"profile", `!has(` + g + `.profiles) || variables.profile in ` + g + `.profiles`,
			`"spec.profile: " + variables.profile + " is not allowed; guardrails.profiles allows " + ` + g + `.profiles.join(", ") + ` + baseline},
		{"capacityTypes", `variables.deniedCapacityTypes.size() == 0`,
			`"spec.capacityTypes: " + variables.deniedCapacityTypes.join(", ") + (has(object.spec.capacityTypes) ? "" : " (from profile " + variables.profile + ")") + " is not allowed; guardrails.capacityTypes allows " + ` + g + `.capacityTypes.join(", ") + (has(` + g + `.capacityTypeGrants) ? ", and " + ` + g + `.capacityTypeGrants.map(x, x.capacityType + " to classes labelled " + x.label + "=true (set by the platform group)").join(", ") : "") + ` + baseline},
		{"architectures", `!has(` + g + `.architectures) || variables.architectures.all(a, a in ` + g + `.architectures)`,
			`"spec.architectures: " + variables.architectures.filter(a, !(a in ` + g + `.architectures)).join(", ") + (has(object.spec.architectures) ? "" : " (from profile " + variables.profile + ")") + " is not allowed; guardrails.architectures allows " + ` + g + `.architectures.join(", ") + ` + baseline},
		{"categories", `!has(` + g + `.categories) || (variables.categories.size() + variables.families.size() > 0 && variables.categories.all(c, c in ` + g + `.categories) && variables.families.all(f, ` + inCategory("f", g+".categories") + `))`,
			`"spec.instances: " + (variables.categories.size() + variables.families.size() == 0 ? "the class names no categories, families or types" : (variables.categories.filter(c, !(c in ` + g + `.categories)) + variables.families.filter(f, !` + inCategory("f", g+".categories") + `)).join(", ") + (has(variables.instances.categories) || variables.named ? "" : " (from profile " + variables.profile + ")") + " is outside the allowed categories") + "; guardrails.categories allows " + ` + g + `.categories.join(", ") + ` + baseline},
		{"families", `!has(` + g + `.families) || (variables.families.size() > 0 && variables.families.all(f, f in ` + g + `.families))`,
			`"spec.instances: " + (variables.families.size() == 0 ? "the class must name its families or types" : variables.families.filter(f, !(f in ` + g + `.families)).join(", ") + " is not an allowed family") + "; guardrails.families allows " + ` + g + `.families.join(", ") + ` + baseline},
		{"minGeneration", `!has(` + g + `.minGeneration) || variables.minGeneration >= ` + g + `.minGeneration || (variables.families.size() > 0 && variables.families.all(f, ` + generation("f") + ` >= ` + g + `.minGeneration))`,
			`"spec.instances.minGeneration: " + (variables.minGeneration == 0 ? "unset" : string(variables.minGeneration)) + " is older than guardrails.minGeneration " + string(` + g + `.minGeneration) + " (or name only families of that generation or newer)" + ` + baseline},
		{"gpuNames", `!variables.gpu || !has(` + g + `.gpuNames) || (variables.gpuNames.size() > 0 && variables.gpuNames.all(n, n in ` + g + `.gpuNames))`,
			`"spec.instances.gpu.names: " + (variables.gpuNames.size() == 0 ? "a GPU class must name its GPU models" : variables.gpuNames.filter(n, !(n in ` + g + `.gpuNames)).join(", ") + " is not allowed") + "; guardrails.gpuNames allows " + ` + g + `.gpuNames.join(", ") + ` + baseline},
		{"requireGPUTaint", `!variables.gpu || !has(` + g + `.requireGPUTaint) || !` + g + `.requireGPUTaint || variables.ownTaint`,
			`"spec.taints: a GPU class needs a NoSchedule or NoExecute taint of its own (the GPU profile's nvidia.com/gpu taint does not count); guardrails.requireGPUTaint" + ` + baseline},
		{"requireTeam", `!has(` + g + `.requireTeam) || !` + g + `.requireTeam || variables.team != ""`,
			`"metadata.labels[` + v1alpha1.LabelTeam + `]: the class must name its team; guardrails.requireTeam" + ` + baseline},
		{"teams", `!has(` + g + `.teams) || variables.team in ` + g + `.teams`,
			`"metadata.labels[` + v1alpha1.LabelTeam + `]: " + (variables.team == "" ? "no team" : "team " + variables.team) + " may not use this Baseline; guardrails.teams allows " + ` + g + `.teams.join(", ") + ` + baseline},
		{"ceilings", `variables.overCeilings.size() == 0`,
			`"spec.limits: " + variables.overCeilings.join(", ") + "; guardrails.ceilings" + ` + baseline},
		{"budget", `!has(` + g + `.ceilings) || !has(` + g + `.ceilings.budgetPerHour) || !has(object.spec.budget) || (double(object.spec.budget.perHour) <= double(` + g + `.ceilings.budgetPerHour) && (!has(object.spec.budget.mode) || object.spec.budget.mode == "Enforce"))`,
			`"spec.budget: " + (has(object.spec.budget.mode) && object.spec.budget.mode == "Warn" ? "mode Warn is not allowed under a budget ceiling" : "perHour " + object.spec.budget.perHour + " is above the ceiling " + ` + g + `.ceilings.budgetPerHour) + "; guardrails.ceilings.budgetPerHour" + ` + baseline},
		{"grants", `!has(` + g + `.capacityTypeGrants) || variables.platform || ` + g + `.capacityTypeGrants.all(x, (x.label in variables.labels ? variables.labels[x.label] : "") == (x.label in variables.oldLabels ? variables.oldLabels[x.label] : ""))`,
			`"metadata.labels: only the platform group may set, change or remove " + ` + g + `.capacityTypeGrants.map(x, x.label).join(", ") + ", which grant capacity types" + ` + baseline},
	}
	var validations []admissionv1.Validation
	for _, c := range checks {
		validations = append(validations, admissionv1.Validation{
			Expression:        `!variables.guarded || (` + c.expr + `)`,
			Message:           "the WorkloadClass is outside guardrails." + c.name + " of its Baseline",
			MessageExpression: c.message,
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	}
	// The Baseline's mandatory values, which the renderer would refuse as BaselineConflict,
	// in the renderer's words.
	for _, m := range []struct{ field, class, base string }{
		{"spec.nodeClass.tags", "(has(object.spec.nodeClass) && has(object.spec.nodeClass.tags) ? object.spec.nodeClass.tags : {})", "(has(params.spec.nodeClass.tags) ? params.spec.nodeClass.tags : {})"},
		{"spec.labels", "(has(object.spec.labels) ? object.spec.labels : {})", "(has(params.spec.nodePool) && has(params.spec.nodePool.labels) ? params.spec.nodePool.labels : {})"},
		{"spec.annotations", "(has(object.spec.annotations) ? object.spec.annotations : {})", "(has(params.spec.nodePool) && has(params.spec.nodePool.annotations) ? params.spec.nodePool.annotations : {})"},
	} {
		contradicts := fmt.Sprintf(`%s.filter(k, k in %[2]s && %[2]s[k] != %[1]s[k])`, m.class, m.base)
		validations = append(validations, admissionv1.Validation{
			Expression:        `!variables.applies || ` + contradicts + `.size() == 0`,
			Message:           m.field + " contradicts a mandatory value of the class's Baseline",
			MessageExpression: contradicts + `.map(k, "` + m.field + `[" + k + "]: class value \"" + ` + m.class + `[k] + "\" contradicts the Baseline's mandatory value \"" + ` + m.base + `[k] + "\"").join("; ")`,
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	}
	team := quote(v1alpha1.LabelTeam)
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: GuardrailsPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:     &admissionv1.ParamKind{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Baseline"},
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				MatchPolicy: ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					classRule(admissionv1.Create, admissionv1.Update),
				},
			},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "not-being-deleted", Expression: `!has(object.metadata.deletionTimestamp)`},
				{Name: "spec-or-labels-changed", Expression: `request.operation == "CREATE" || object.spec != oldObject.spec || (has(object.metadata.labels) ? object.metadata.labels : {}) != (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})`},
			},
			Variables: []admissionv1.Variable{
				{Name: "applies", Expression: `params.metadata.name == (has(object.spec.baselineRef) ? object.spec.baselineRef.name : ` + quote(v1alpha1.DefaultBaselineName) + `)`},
				{Name: "guarded", Expression: `variables.applies && has(` + g + `)`},
				{Name: "platformGroups", Expression: celLiteral(o.PlatformGroups)},
				{Name: "platform", Expression: `has(request.userInfo.groups) && request.userInfo.groups.exists(x, x in variables.platformGroups)`},
				{Name: "labels", Expression: `has(object.metadata.labels) ? object.metadata.labels : {}`},
				{Name: "oldLabels", Expression: `request.operation == "UPDATE" && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}`},
				{Name: "team", Expression: team + ` in variables.labels ? variables.labels[` + team + `] : ""`},
				{Name: "profile", Expression: `has(object.spec.profile) ? object.spec.profile : ` + quote(string(v1alpha1.ProfileGeneral))},
				{Name: "instances", Expression: `has(object.spec.instances) ? object.spec.instances : {}`},
				{Name: "named", Expression: `has(variables.instances.families) || has(variables.instances.types)`},
				{Name: "capacityTypes", Expression: `has(object.spec.capacityTypes) ? object.spec.capacityTypes : ` + profileLists(func(p ProfileDefaults) []string { return toStrings(p.CapacityTypes) }) + `[variables.profile]`},
				{Name: "architectures", Expression: `has(object.spec.architectures) ? object.spec.architectures : ` + profileLists(func(p ProfileDefaults) []string { return toStrings(p.Architectures) }) + `[variables.profile]`},
				// A profile's categories and minimum generation apply only to a class that
				// names no families or types (see ProfileDefaults).
				{Name: "categories", Expression: `has(variables.instances.categories) ? variables.instances.categories : (variables.named ? [] : ` + profileLists(func(p ProfileDefaults) []string { return p.Categories }) + `[variables.profile])`},
				{Name: "families", Expression: `(has(variables.instances.families) ? variables.instances.families : []) + (has(variables.instances.types) ? variables.instances.types.map(t, t.substring(0, t.indexOf("."))) : [])`},
				{Name: "minGeneration", Expression: `has(variables.instances.minGeneration) ? variables.instances.minGeneration : (variables.named ? 0 : ` + celLiteral(minGens) + `[variables.profile])`},
				{Name: "gpu", Expression: `variables.profile == ` + quote(string(v1alpha1.ProfileGPU)) + ` || has(variables.instances.gpu)`},
				{Name: "gpuNames", Expression: `has(variables.instances.gpu) && has(variables.instances.gpu.names) ? variables.instances.gpu.names : []`},
				{Name: "ownTaint", Expression: `has(object.spec.taints) && object.spec.taints.exists(t, t.effect == "NoSchedule" || t.effect == "NoExecute")`},
				{Name: "limits", Expression: `has(object.spec.limits) ? object.spec.limits : {}`},
				{Name: "deniedCapacityTypes", Expression: `!variables.guarded || !has(` + g + `.capacityTypes) ? [] : variables.capacityTypes.filter(c, !(c in ` + g + `.capacityTypes) && !(` + grantedBy("c") + `))`},
				{Name: "overCeilings", Expression: `!variables.guarded ? [] : ` + strings.Join(over, " + ")},
			},
			Validations: validations,
		},
	}
	return vap, denyBinding(GuardrailsPolicyName, &metav1.LabelSelector{})
}

// ownershipPolicy lets a user change only the WorkloadClasses of its teams: creating one
// needs its poolsmith.dev/team to be a team of the user's groups; changing its spec or
// labels, or deleting it, needs its current team to be one too (and a changed team as
// well); changing spec.baselineRef needs the platform group, so a class cannot escape its
// guardrails by naming a laxer Baseline. The platform group may do all. Updates that
// change neither spec nor labels (the manager's finalizer and status writes) are not
// judged. failurePolicy Fail.
func ownershipPolicy(o Ownership) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	team := quote(v1alpha1.LabelTeam)
	teamOf := func(obj string) string {
		return fmt.Sprintf(`%[1]s != null && has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels ? %[1]s.metadata.labels[%[2]s] : ""`, obj, team)
	}
	owns := func(v string) string {
		return fmt.Sprintf(`%[1]s != "" && variables.groups.exists(g, g in variables.teamsByGroup && %[1]s in variables.teamsByGroup[g])`, v)
	}
	baselineOf := func(obj string) string {
		return fmt.Sprintf(`(has(%[1]s.spec.baselineRef) ? %[1]s.spec.baselineRef.name : %[2]s)`, obj, quote(v1alpha1.DefaultBaselineName))
	}
	who := `request.userInfo.username`
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: OwnershipPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				MatchPolicy: ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					classRule(admissionv1.Create, admissionv1.Update, admissionv1.Delete),
				},
			},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "spec-or-labels-changed", Expression: `request.operation != "UPDATE" || object.spec != oldObject.spec || (has(object.metadata.labels) ? object.metadata.labels : {}) != (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})`},
			},
			Variables: []admissionv1.Variable{
				{Name: "platformGroups", Expression: celLiteral(o.PlatformGroups)},
				{Name: "teamsByGroup", Expression: celLiteral(o.TeamsByGroup)},
				{Name: "groups", Expression: `has(request.userInfo.groups) ? request.userInfo.groups : []`},
				{Name: "platform", Expression: `variables.groups.exists(g, g in variables.platformGroups)`},
				{Name: "team", Expression: teamOf("object")},
				{Name: "oldTeam", Expression: teamOf("oldObject")},
			},
			Validations: []admissionv1.Validation{
				{
					Expression:        `variables.platform || request.operation == "CREATE" || (` + owns("variables.oldTeam") + `)`,
					Message:           "only the class's team and the platform group may change or delete it",
					MessageExpression: `"WorkloadClass " + oldObject.metadata.name + " belongs to " + (variables.oldTeam == "" ? "no team (it has no ` + v1alpha1.LabelTeam + ` label)" : "team " + variables.oldTeam) + ": " + ` + who + ` + " may not change or delete it; only that team's groups and the platform group may"`,
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        `variables.platform || request.operation == "DELETE" || (` + owns("variables.team") + `)`,
					Message:           "metadata.labels[" + v1alpha1.LabelTeam + "] must name a team of the writer's groups",
					MessageExpression: `"metadata.labels[` + v1alpha1.LabelTeam + `]: " + (variables.team == "" ? "the class names no team" : "team " + variables.team + " is not a team of " + ` + who + `) + "; a WorkloadClass must carry the label of a team the writer's groups map to"`,
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        `variables.platform || request.operation != "UPDATE" || ` + baselineOf("object") + ` == ` + baselineOf("oldObject"),
					Message:           "only the platform group may change spec.baselineRef",
					MessageExpression: `"spec.baselineRef: only the platform group may move a class to another Baseline (from " + ` + baselineOf("oldObject") + ` + " to " + ` + baselineOf("object") + ` + ")"`,
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	return vap, denyBinding(OwnershipPolicyName, nil)
}

// denyBinding binds the policy of the same name with action Deny. With params, it
// evaluates the policy once per parameter they select, and a request that meets none is
// allowed (parameterNotFoundAction Allow); without, the policy takes no parameter.
func denyBinding(policy string, params *metav1.LabelSelector) *admissionv1.ValidatingAdmissionPolicyBinding {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicyBinding},
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if params != nil {
		b.Spec.ParamRef = &admissionv1.ParamRef{Selector: params, ParameterNotFoundAction: ptr.To(admissionv1.AllowAction)}
	}
	return b
}

// classRule matches WorkloadClasses (not their status) for the operations.
func classRule(ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return poolsmithRule("workloadclasses", ops...)
}

// poolsmithRule matches one of Poolsmith's cluster-scoped resources (not its status) for
// the operations.
func poolsmithRule(resource string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionv1.Rule{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version},
			Resources: []string{resource}, Scope: ptr.To(admissionv1.ClusterScope),
		},
	}}
}

// GuardrailsPolicy is the guardrail policy as DefaultOwnership installs it, the one the
// controller, lint and render judge classes with in-process (they judge as the platform
// group: who writes is the API server's concern, not the class's).
func GuardrailsPolicy() *admissionv1.ValidatingAdmissionPolicy {
	vap, _ := guardrailsPolicy(DefaultOwnership)
	return vap
}

func toStrings[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}
