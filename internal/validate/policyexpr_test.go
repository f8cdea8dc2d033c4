package validate

import (
	"reflect"
	"testing"

	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
)

// TestPolicyExpressionsMatchTheServers proves the local expression kinds (policyexpr.go)
// are the API server's: the same expression and the same return types the compiler checks.
// The test binary may link the server's package; the manager and the CLI do not.
func TestPolicyExpressionsMatchTheServers(t *testing.T) {
	const expr = "object.spec.x == 1"
	pairs := []struct {
		name         string
		local, their plugincel.ExpressionAccessor
	}{
		{"validation", &validationCondition{expression: expr}, &validating.ValidationCondition{Expression: expr}},
		{"messageExpression", &messageExpressionCondition{messageExpression: expr}, &validating.MessageExpressionCondition{MessageExpression: expr}},
		{"variable", &variable{name: "v", expression: expr}, &validating.Variable{Name: "v", Expression: expr}},
		{"jsonPatch", &jsonPatchCondition{expression: expr}, &patch.JSONPatchCondition{Expression: expr}},
		{"applyConfiguration", &applyConfigurationCondition{expression: expr}, &patch.ApplyConfigurationCondition{Expression: expr}},
		{"matchCondition", &matchCondition{Name: "m", Expression: expr}, &matchconditions.MatchCondition{Name: "m", Expression: expr}},
	}
	for _, p := range pairs {
		if p.local.GetExpression() != p.their.GetExpression() {
			t.Errorf("%s: expression %q, the server's %q", p.name, p.local.GetExpression(), p.their.GetExpression())
		}
		if !reflect.DeepEqual(p.local.ReturnTypes(), p.their.ReturnTypes()) {
			t.Errorf("%s: return types %v, the server's %v", p.name, p.local.ReturnTypes(), p.their.ReturnTypes())
		}
	}
	if got := (&variable{name: "v"}).GetName(); got != (&validating.Variable{Name: "v"}).GetName() {
		t.Errorf("variable name %q", got)
	}
}
