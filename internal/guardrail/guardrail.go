// Package guardrail judges a WorkloadClass against its Baseline's guardrails (and the
// Baseline's mandatory tags, labels and annotations) in-process, with the very policy the
// chart installs (render.GuardrailsPolicy) compiled and evaluated by the API server's own
// CEL (internal/validate), so the controller, lint and render refuse what the API server
// refuses, in its words. It judges as a create by the platform group: who writes (team
// ownership, guarded labels) is the API server's concern, not the class's.
package guardrail

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

var compiled = sync.OnceValues(func() (*validate.CompiledPolicy, error) {
	return validate.CompilePolicy(render.GuardrailsPolicy())
})

// Judge returns the guardrails the class is outside of, one render.Error each (reason
// GuardrailViolation, or BaselineConflict for a contradicted mandatory tag, label or
// annotation), in the policy's order; the API server's refusal names the first.
// A nil Baseline bounds nothing.
func Judge(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass) error {
	if baseline == nil {
		return nil
	}
	policy, err := compiled()
	if err != nil {
		return fmt.Errorf("compiling the guardrail policy: %w", err)
	}
	params, err := toUnstructured(baseline, "Baseline")
	if err != nil {
		return err
	}
	obj, err := toUnstructured(class, "WorkloadClass")
	if err != nil {
		return err
	}
	j, err := policy.JudgeRequest(validate.Request{
		Operation: admission.Create, Object: obj, Resource: "workloadclasses", Params: params,
		User: &user.DefaultInfo{Name: "poolsmith", Groups: render.DefaultOwnership.PlatformGroups},
	})
	if err != nil {
		return fmt.Errorf("judging WorkloadClass %s against the guardrails of Baseline %s: %w", class.Name, baseline.Name, err)
	}
	var errs render.Errors
	for _, msg := range j.Refusals {
		field, message, ok := strings.Cut(msg, ": ")
		if !ok {
			field, message = "spec", msg
		}
		reason := v1alpha1.ReasonGuardrailViolation
		if base, _, _ := strings.Cut(field, "["); mandatory[base] {
			reason = v1alpha1.ReasonBaselineConflict
		}
		errs = append(errs, &render.Error{Reason: reason, Field: field, Message: message})
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// mandatory are the fields whose refusal is a contradiction of the Baseline's mandatory
// values (the renderer's BaselineConflict), not a guardrail.
var mandatory = map[string]bool{"spec.nodeClass.tags": true, "spec.labels": true, "spec.annotations": true}

func toUnstructured(obj runtime.Object, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting the %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind(kind)
	delete(u.Object, "status")
	return u, nil
}
