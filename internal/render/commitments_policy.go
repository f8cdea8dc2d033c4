package render

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CommitmentsPolicyName names the policy that refuses an expired commitment on a new
// Baseline (and its binding).
const CommitmentsPolicyName = "poolsmith-commitments"

// commitmentsPolicy refuses a Baseline created with a Savings Plan or Reserved Instance
// whose end is not after the Baseline's creationTimestamp. CEL has no clock: the API
// server sets creationTimestamp before it runs validating admission on create, so on
// create it is "now". On update there is no such time, so an update that adds an expired
// commitment is admitted; the renderer leaves the entry out and the CLI refuses it.
// failurePolicy Fail: a Baseline the API server cannot judge is refused.
func commitmentsPolicy() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	expired := func(list string) string {
		return `(has(object.spec.commitments) && has(object.spec.commitments.` + list + `) ? object.spec.commitments.` + list +
			`.filter(c, has(c.end) && timestamp(c.end) <= variables.now).map(c, "spec.commitments.` + list + `[" + c.id + "].end: " + string(c.end) + " is past") : [])`
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: AdmissionAPIVersion, Kind: KindValidatingPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: CommitmentsPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				MatchPolicy:   ptr.To(admissionv1.Equivalent),
				ResourceRules: []admissionv1.NamedRuleWithOperations{poolsmithRule("baselines", admissionv1.Create)},
			},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "has-commitments", Expression: `has(object.spec.commitments)`},
			},
			Variables: []admissionv1.Variable{
				{Name: "now", Expression: `timestamp(object.metadata.creationTimestamp)`},
				{Name: "expired", Expression: expired("savingsPlans") + ` + ` + expired("reservedInstances")},
			},
			Validations: []admissionv1.Validation{{
				Expression:        `variables.expired.size() == 0`,
				Message:           "a commitment's end is past",
				MessageExpression: `variables.expired.join("; ") + " (a Baseline may not be created with an expired commitment)"`,
				Reason:            ptr.To(metav1.StatusReasonInvalid),
			}},
		},
	}
	return vap, denyBinding(CommitmentsPolicyName, nil)
}
