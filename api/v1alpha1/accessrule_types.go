package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelRestricted is "true" on the AccessRule of a class with spec.access, "false" on an
// open class's: the chart's access policy binding selects only the restricted, so an open
// class costs a pod's admission nothing.
const LabelRestricted = "poolsmith.dev/restricted"

// TaintAccess is the key of the NoExecute taint every rung of a restricted class carries,
// with the class's name as its value (poolsmith.dev/access=<class>:NoExecute). The kubelet
// refuses a pod that does not tolerate it, so a pod placed on a node by spec.nodeName,
// which no admission policy can judge by the node, runs there only if it tolerates the
// taint, and the access policy refuses such a toleration outside the class's namespaces.
// The key is reserved: a Baseline or class that sets it is refused.
const TaintAccess = "poolsmith.dev/access"

// AccessRuleSpec is what the API server needs to judge a pod against one WorkloadClass:
// who may use the class and how a pod could land on it, resolved by the renderer (profile
// taints, hashed rung names and rungs no longer rendered are not in the class's spec).
type AccessRuleSpec struct {
	// class is the WorkloadClass the rule is for; pods select it with the node label
	// poolsmith.dev/class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Class string `json:"class"`

	// access is the class's spec.access as it is enforced: a namespace may use the class
	// when every entry admits it; absent, every namespace may (the rule then only serves
	// namespace defaults). It is the class's spec.access, one entry; while the class's
	// NodePool family cannot be written (OwnershipConflict, InvalidSpec), the rule enforced
	// before and the spec, two entries, so that an edit that narrows access takes effect
	// at once and one that widens it waits for the family.
	// +kubebuilder:validation:MaxItems=2
	// +listType=atomic
	// +optional
	Access []Access `json:"access,omitempty"`

	// allowed says who may use the class, for the refusal message.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Allowed string `json:"allowed,omitempty"`

	// taints are the class's NoSchedule and NoExecute taints, resolved, with the access
	// taint poolsmith.dev/access=<class>:NoExecute on a restricted class: a pod that
	// tolerates the access taint, or every other one, could land on its nodes; a pod given
	// the class by its namespace's default gets a toleration for each.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// rungs are the names of every NodePool of the class that exists: rendered, retiring,
	// and orphaned until the NodePool is gone. A pod that selects one by
	// poolsmith.dev/rung or karpenter.sh/nodepool selects the class.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Rungs []string `json:"rungs,omitempty"`
}

// AccessRule is the parameter of the access and namespace-default admission policies the
// chart installs (ValidatingAdmissionPolicy poolsmith-access and MutatingAdmissionPolicy
// poolsmith-default): one per WorkloadClass, named after it, written and owned by the
// class. The manager writes no admission policy; it writes these.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=acr
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.class`
// +kubebuilder:printcolumn:name="Allowed",type=string,JSONPath=`.spec.allowed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AccessRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AccessRuleSpec `json:"spec"`
}

// AccessRuleList is a list of AccessRules.
// +kubebuilder:object:root=true
type AccessRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AccessRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AccessRule{}, &AccessRuleList{})
}
