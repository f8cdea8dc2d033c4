package validate

import (
	celgo "github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"

	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

// The expression kinds of a ValidatingAdmissionPolicy, as the API server's compiler sees
// them: each is its namesake in k8s.io/apiserver/pkg/admission/plugin/policy/validating,
// whose package also links the admission webhook client, the egress selector (gRPC,
// konnectivity) and the OpenTelemetry exporter, none of which compiling or evaluating an
// expression runs. TestPolicyExpressionsMatchTheServers proves the twins agree.

// validationCondition is validating.ValidationCondition: a validation's expression.
type validationCondition struct{ expression string }

func (v *validationCondition) GetExpression() string      { return v.expression }
func (v *validationCondition) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.BoolType} }

// messageExpressionCondition is validating.MessageExpressionCondition.
type messageExpressionCondition struct{ messageExpression string }

func (m *messageExpressionCondition) GetExpression() string { return m.messageExpression }
func (m *messageExpressionCondition) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.StringType}
}

// variable is validating.Variable: a named expression later ones read as variables.<name>.
type variable struct{ name, expression string }

func (v *variable) GetExpression() string { return v.expression }
func (v *variable) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.AnyType, celgo.DynType}
}
func (v *variable) GetName() string { return v.name }

// The expression kinds a MutatingAdmissionPolicy and a match condition add, for the same
// reason: their namesakes' packages link what compiling an expression does not run. The
// mutation's (policy/mutating/patch) brings the OpenAPI client and the structured-merge
// type converter, the match condition's (webhook/matchconditions) the admission metrics
// it registers at start; together 81 KB of the binary (issue #23).

// jsonPatchCondition is patch.JSONPatchCondition: a JSONPatch mutation's expression.
type jsonPatchCondition struct{ expression string }

func (v *jsonPatchCondition) GetExpression() string { return v.expression }
func (v *jsonPatchCondition) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.ListType(jsonPatchType)}
}

var jsonPatchType = celtypes.NewObjectType("JSONPatch")

// applyConfigurationCondition is patch.ApplyConfigurationCondition: an
// ApplyConfiguration mutation's expression.
type applyConfigurationCondition struct{ expression string }

func (v *applyConfigurationCondition) GetExpression() string { return v.expression }
func (v *applyConfigurationCondition) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{applyConfigurationType}
}

var applyConfigurationType = celtypes.NewObjectType("Object")

// matchCondition is matchconditions.MatchCondition: a policy's match condition.
type matchCondition admissionv1.MatchCondition

func (v *matchCondition) GetExpression() string      { return v.Expression }
func (v *matchCondition) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.BoolType} }

var (
	_ plugincel.ExpressionAccessor      = (*validationCondition)(nil)
	_ plugincel.ExpressionAccessor      = (*messageExpressionCondition)(nil)
	_ plugincel.NamedExpressionAccessor = (*variable)(nil)
	_ plugincel.ExpressionAccessor      = (*jsonPatchCondition)(nil)
	_ plugincel.ExpressionAccessor      = (*applyConfigurationCondition)(nil)
	_ plugincel.ExpressionAccessor      = (*matchCondition)(nil)
)
