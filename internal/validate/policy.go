package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The admission policies Poolsmith renders are built into the API server, not CRDs: their
// full validation lives in k8s.io/kubernetes, which Poolsmith does not import. In-process
// they are decoded strictly (unknown fields refused), their required fields and names
// checked, and every CEL expression compiled by the API server's own compiler
// (k8s.io/apiserver) in the environment stored policies are compiled in. What this does not
// catch (the rest of k8s.io/kubernetes' ValidatingAdmissionPolicy rules) the API server
// refuses at write time, and the tests dry-run every rendered policy against it.

var policyKinds = map[string]func() any{
	"ValidatingAdmissionPolicy":        func() any { return &admissionv1.ValidatingAdmissionPolicy{} },
	"ValidatingAdmissionPolicyBinding": func() any { return &admissionv1.ValidatingAdmissionPolicyBinding{} },
	"MutatingAdmissionPolicy":          func() any { return &admissionv1.MutatingAdmissionPolicy{} },
	"MutatingAdmissionPolicyBinding":   func() any { return &admissionv1.MutatingAdmissionPolicyBinding{} },
}

// IsPolicy reports whether gvk is one of the admissionregistration.k8s.io/v1 policy kinds.
func IsPolicy(gvk schema.GroupVersionKind) bool {
	_, ok := policyKinds[gvk.Kind]
	return ok && gvk.GroupVersion() == admissionv1.SchemeGroupVersion
}

// checkPolicy is Create and Update for the policy kinds (no transition rules apply).
func checkPolicy(doc map[string]any) error {
	u := &unstructured.Unstructured{Object: doc}
	gvk := u.GroupVersionKind()
	obj := policyKinds[gvk.Kind]()
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return apierrors.NewInvalid(gvk.GroupKind(), u.GetName(), field.ErrorList{field.Invalid(field.NewPath(""), field.OmitValueType{}, err.Error())})
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(u.GetName()) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), u.GetName(), msg))
	}
	spec := field.NewPath("spec")
	switch o := obj.(type) {
	case *admissionv1.ValidatingAdmissionPolicy:
		errs = append(errs, checkValidating(o, spec)...)
	case *admissionv1.MutatingAdmissionPolicy:
		errs = append(errs, checkMutating(o, spec)...)
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		if o.Spec.PolicyName == "" {
			errs = append(errs, field.Required(spec.Child("policyName"), ""))
		}
		if len(o.Spec.ValidationActions) == 0 {
			errs = append(errs, field.Required(spec.Child("validationActions"), "at least one of Deny, Warn, Audit"))
		}
	case *admissionv1.MutatingAdmissionPolicyBinding:
		if o.Spec.PolicyName == "" {
			errs = append(errs, field.Required(spec.Child("policyName"), ""))
		}
	}
	return invalid(u, errs)
}

func checkMatch(m *admissionv1.MatchResources, conds []admissionv1.MatchCondition, path *field.Path, c *plugincel.CompositedCompiler, opts plugincel.OptionalVariableDeclarations) field.ErrorList {
	var errs field.ErrorList
	if m == nil || len(m.ResourceRules) == 0 {
		errs = append(errs, field.Required(path.Child("matchConstraints", "resourceRules"), ""))
	}
	for i, mc := range conds {
		p := path.Child("matchConditions").Index(i)
		for _, msg := range validation.IsQualifiedName(mc.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), mc.Name, msg))
		}
		errs = append(errs, compiled(c, (*matchCondition)(&mc), opts, p.Child("expression"))...)
	}
	return errs
}

func checkVariables(vars []admissionv1.Variable, path *field.Path, c *plugincel.CompositedCompiler, opts plugincel.OptionalVariableDeclarations) field.ErrorList {
	var errs field.ErrorList
	for i, v := range vars {
		res := c.CompileAndStoreVariable(&variable{name: v.Name, expression: v.Expression}, opts, environment.StoredExpressions)
		if res.Error != nil {
			errs = append(errs, field.Invalid(path.Child("variables").Index(i).Child("expression"), v.Expression, res.Error.Detail))
		}
	}
	return errs
}

// compileCommon compiles what both policy kinds share: variables, match constraints and
// conditions. It returns the compiler the policy's own expressions compile with.
func compileCommon(hasParams bool, vars []admissionv1.Variable, match *admissionv1.MatchResources, conds []admissionv1.MatchCondition, path *field.Path) (*plugincel.CompositedCompiler, plugincel.OptionalVariableDeclarations, field.ErrorList) {
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, opts, field.ErrorList{field.InternalError(path, err)}
	}
	errs := checkVariables(vars, path, c, opts)
	return c, opts, append(errs, checkMatch(match, conds, path, c, opts)...)
}

func checkValidating(p *admissionv1.ValidatingAdmissionPolicy, path *field.Path) field.ErrorList {
	c, opts, errs := compileCommon(p.Spec.ParamKind != nil, p.Spec.Variables, p.Spec.MatchConstraints, p.Spec.MatchConditions, path)
	if c == nil {
		return errs
	}
	if p.Spec.FailurePolicy == nil {
		errs = append(errs, field.Required(path.Child("failurePolicy"), "Poolsmith states it"))
	}
	if len(p.Spec.Validations) == 0 {
		errs = append(errs, field.Required(path.Child("validations"), ""))
	}
	for i, v := range p.Spec.Validations {
		vp := path.Child("validations").Index(i)
		errs = append(errs, compiled(c, &validationCondition{expression: v.Expression}, opts, vp.Child("expression"))...)
		if v.MessageExpression != "" {
			mopts := opts
			mopts.HasAuthorizer = false
			errs = append(errs, compiled(c, &messageExpressionCondition{messageExpression: v.MessageExpression}, mopts, vp.Child("messageExpression"))...)
		}
	}
	return errs
}

func checkMutating(p *admissionv1.MutatingAdmissionPolicy, path *field.Path) field.ErrorList {
	c, opts, errs := compileCommon(p.Spec.ParamKind != nil, p.Spec.Variables, p.Spec.MatchConstraints, p.Spec.MatchConditions, path)
	if c == nil {
		return errs
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, field.Required(path.Child("mutations"), ""))
	}
	popts := opts
	popts.HasPatchTypes = true
	for i, m := range p.Spec.Mutations {
		mp := path.Child("mutations").Index(i)
		switch {
		case m.PatchType == admissionv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			errs = append(errs, compiled(c, &jsonPatchCondition{expression: m.JSONPatch.Expression}, popts, mp.Child("jsonPatch", "expression"))...)
		case m.PatchType == admissionv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			errs = append(errs, compiled(c, &applyConfigurationCondition{expression: m.ApplyConfiguration.Expression}, popts, mp.Child("applyConfiguration", "expression"))...)
		default:
			errs = append(errs, field.Invalid(mp.Child("patchType"), m.PatchType, "JSONPatch with jsonPatch, or ApplyConfiguration with applyConfiguration"))
		}
	}
	return errs
}

// compiled reports a compile error the way the API server refuses the policy for it.
func compiled(c *plugincel.CompositedCompiler, expr plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, path *field.Path) field.ErrorList {
	if res := c.CompileCELExpression(expr, opts, environment.StoredExpressions); res.Error != nil {
		return field.ErrorList{field.Invalid(path, expr.GetExpression(), res.Error.Detail)}
	}
	return nil
}

// Judgement is what a ValidatingAdmissionPolicy decides about one object, and what the
// deciding cost in CEL's units.
type Judgement struct {
	// Matched is false when a match condition let the object through unjudged.
	Matched bool
	// Allowed is true when every validation holds.
	Allowed bool
	// Refusals are the messages of the validations that do not hold, in the policy's
	// order, each as the API server words it (messageExpression, else message); the API
	// server's refusal carries the first.
	Refusals []string
	// Cost is the CEL cost of the match conditions (which have a budget of their own),
	// the variables and the validations; Budget is the API server's per-evaluation budget
	// of the validations.
	Cost   int64
	Budget int64
}

// Request is one admission request as a ValidatingAdmissionPolicy sees it.
type Request struct {
	// Operation is CREATE (the default), UPDATE or DELETE.
	Operation admission.Operation
	// Object is the object written (nil on DELETE); OldObject the object before (UPDATE,
	// DELETE).
	Object, OldObject *unstructured.Unstructured
	// Resource is the plural resource name, e.g. workloadclasses ("pods" when empty).
	Resource string
	// Params is the parameter (nil for a policy without paramKind); Namespace the object's
	// namespace (nil for a cluster-scoped object).
	Params    *unstructured.Unstructured
	Namespace *corev1.Namespace
	// User is who writes: request.userInfo.
	User user.Info
}

// Judge evaluates a ValidatingAdmissionPolicy's match conditions and validations on a
// create of obj in namespace ns with one parameter (nil for a policy without paramKind),
// with the API server's compiler, cost model and budget, as the API server does once per
// parameter its binding selects. An evaluation error (running out of budget included) is
// returned. CompilePolicy compiles once for many judgements.
func Judge(p *admissionv1.ValidatingAdmissionPolicy, params *unstructured.Unstructured, obj *unstructured.Unstructured, ns *corev1.Namespace) (Judgement, error) {
	c, err := CompilePolicy(p)
	if err != nil {
		return Judgement{Budget: celconfig.RuntimeCELCostBudget}, err
	}
	return c.Judge(params, obj, ns)
}

// CompiledPolicy is a ValidatingAdmissionPolicy compiled as the API server compiles it,
// once, to judge many objects.
type CompiledPolicy struct {
	conds, vals, msgs plugincel.ConditionEvaluator
	validations       []admissionv1.Validation
}

// CompilePolicy compiles p's variables, match conditions, validations and their messages.
func CompilePolicy(p *admissionv1.ValidatingAdmissionPolicy) (*CompiledPolicy, error) {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasParams: p.Spec.ParamKind != nil}
	c.CompileAndStoreVariables(convertVariables(p.Spec.Variables), opts, environment.StoredExpressions)
	var conds []plugincel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		conds = append(conds, (*matchCondition)(&p.Spec.MatchConditions[i]))
	}
	var vals, msgs []plugincel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		vals = append(vals, &validationCondition{expression: v.Expression})
		// As the API server: a validation without a messageExpression has an empty one.
		msgs = append(msgs, &messageExpressionCondition{messageExpression: v.MessageExpression})
	}
	out := &CompiledPolicy{validations: p.Spec.Validations}
	if len(conds) > 0 {
		out.conds = c.CompileCondition(conds, opts, environment.StoredExpressions)
	}
	if len(vals) > 0 {
		out.vals = c.CompileCondition(vals, opts, environment.StoredExpressions)
		mopts := opts
		mopts.HasAuthorizer = false
		out.msgs = c.CompileCondition(msgs, mopts, environment.StoredExpressions)
	}
	return out, nil
}

// Judge is the package-level Judge with the policy compiled.
func (c *CompiledPolicy) Judge(params *unstructured.Unstructured, obj *unstructured.Unstructured, ns *corev1.Namespace) (Judgement, error) {
	return c.JudgeRequest(Request{Object: obj, Params: params, Namespace: ns})
}

// JudgeRequest judges one admission request as the API server does.
func (c *CompiledPolicy) JudgeRequest(r Request) (Judgement, error) {
	j := Judgement{Budget: celconfig.RuntimeCELCostBudget}
	bindings := plugincel.OptionalVariableBindings{}
	if r.Params != nil {
		bindings.VersionedParams = r.Params
	}
	op, resource, who := r.Operation, r.Resource, r.User
	if op == "" {
		op = admission.Create
	}
	if resource == "" {
		resource = "pods"
	}
	if who == nil {
		who = &user.DefaultInfo{Name: "judge"}
	}
	// The API server gives CEL a nil object on DELETE and a nil oldObject on CREATE, as
	// typed nils the conversion reads as null.
	described := r.Object
	if described == nil {
		described = r.OldObject
	}
	var obj, old runtime.Object
	if r.Object != nil {
		obj = r.Object
	}
	if r.OldObject != nil {
		old = r.OldObject
	}
	gvk := described.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
	var options runtime.Object = &metav1.CreateOptions{}
	switch op {
	case admission.Update:
		options = &metav1.UpdateOptions{}
	case admission.Delete:
		options = &metav1.DeleteOptions{}
	}
	attr := admission.NewAttributesRecord(obj, old, gvk, described.GetNamespace(), described.GetName(), gvr, "", op, options, false, who)
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}
	req := plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	remaining := j.Budget
	for _, group := range []struct {
		eval  plugincel.ConditionEvaluator
		match bool
	}{{c.conds, true}, {c.vals, false}} {
		if group.eval == nil {
			continue
		}
		// As the API server: match conditions see no namespaceObject and have a budget of
		// their own.
		namespace, budget := r.Namespace, remaining
		if group.match {
			namespace, budget = nil, celconfig.RuntimeCELCostBudgetMatchConditions
		}
		results, left, err := group.eval.ForInput(context.Background(), va, req, bindings, namespace, budget)
		j.Cost += budget - left
		if group.match {
			left = remaining
		}
		remaining = left
		if err != nil {
			return j, err
		}
		ok := true
		var failed []int
		for i, res := range results {
			if res.Error != nil {
				return j, res.Error
			}
			if b, isBool := res.EvalResult.Value().(bool); !isBool || !b {
				ok = false
				failed = append(failed, i)
			}
		}
		if group.match {
			j.Matched = ok
			if !ok {
				return j, nil
			}
			continue
		}
		j.Allowed = ok
		if len(failed) > 0 {
			msgs, left, err := c.msgs.ForInput(context.Background(), va, req, bindings, r.Namespace, remaining)
			j.Cost += remaining - left
			if err != nil {
				return j, err
			}
			for _, i := range failed {
				j.Refusals = append(j.Refusals, c.message(i, msgs))
			}
		}
	}
	return j, nil
}

// message is validation i's refusal as the API server words it: its messageExpression's
// value, else its message, else the expression.
func (c *CompiledPolicy) message(i int, msgs []plugincel.EvaluationResult) string {
	v := c.validations[i]
	if i < len(msgs) && msgs[i].Error == nil && msgs[i].EvalResult != nil {
		if s, ok := msgs[i].EvalResult.Value().(string); ok {
			if s = strings.TrimSpace(s); s != "" && len(s) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(s, "\n") {
				return s
			}
		}
	}
	if m := strings.TrimSpace(v.Message); m != "" {
		return m
	}
	return "failed expression: " + strings.TrimSpace(v.Expression)
}

func convertVariables(vars []admissionv1.Variable) []plugincel.NamedExpressionAccessor {
	out := make([]plugincel.NamedExpressionAccessor, len(vars))
	for i, v := range vars {
		out[i] = &variable{name: v.Name, expression: v.Expression}
	}
	return out
}
