package validate_test

import (
	"strings"
	"testing"

	"github.com/poolsmith/poolsmith/internal/validate"
)

func policyDoc(kind string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
		"metadata": map[string]any{"name": "poolsmith-access-gpu"},
		"spec":     spec,
	}
}

func TestPoliciesAreCheckedInProcess(t *testing.T) {
	v, err := validate.Default()
	if err != nil {
		t.Fatal(err)
	}
	rules := []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"}}}
	for _, tc := range []struct {
		name string
		doc  map[string]any
		want string
	}{
		{"valid policy", policyDoc("ValidatingAdmissionPolicy", map[string]any{"failurePolicy": "Fail", "matchConstraints": map[string]any{"resourceRules": rules},
			"validations": []any{map[string]any{"expression": "object.kind == 'Pod'"}}}), ""},
		{"expression that does not compile", policyDoc("ValidatingAdmissionPolicy", map[string]any{"failurePolicy": "Fail", "matchConstraints": map[string]any{"resourceRules": rules},
			"validations": []any{map[string]any{"expression": "object.kind =="}}}), "spec.validations[0].expression"},
		{"undeclared variable", policyDoc("ValidatingAdmissionPolicy", map[string]any{"failurePolicy": "Fail", "matchConstraints": map[string]any{"resourceRules": rules},
			"validations": []any{map[string]any{"expression": "nope.kind == 'Pod'"}}}), "undeclared reference to 'nope'"},
		{"unknown field", policyDoc("ValidatingAdmissionPolicyBinding", map[string]any{"policyName": "p", "validationActions": []any{"Deny"}, "extra": true}), `unknown field "extra"`},
		{"binding without policy", policyDoc("ValidatingAdmissionPolicyBinding", map[string]any{"validationActions": []any{"Deny"}}), "spec.policyName: Required value"},
		{"mutation that is not a JSONPatch list", policyDoc("MutatingAdmissionPolicy", map[string]any{"matchConstraints": map[string]any{"resourceRules": rules},
			"mutations": []any{map[string]any{"patchType": "JSONPatch", "jsonPatch": map[string]any{"expression": "'add'"}}}}), "spec.mutations[0].jsonPatch.expression"},
	} {
		err := v.Create(tc.doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
