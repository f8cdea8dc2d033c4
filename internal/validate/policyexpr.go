package validate

import (
	celgo "github.com/google/cel-go/cel"

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

var (
	_ plugincel.ExpressionAccessor      = (*validationCondition)(nil)
	_ plugincel.ExpressionAccessor      = (*messageExpressionCondition)(nil)
	_ plugincel.NamedExpressionAccessor = (*variable)(nil)
)
