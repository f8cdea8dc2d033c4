package v1alpha1

import (
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// BaselineSpec is what every node rendered from this Baseline must have.
type BaselineSpec struct {
	// nodeClass is a complete karpenter.k8s.aws/v1 EC2NodeClass spec: an existing
	// EC2NodeClass's spec can be pasted here unchanged. Its identity and network fields
	// (role or instanceProfile, subnet, security-group, capacity-reservation and placement
	// selectors, metadataOptions, associatePublicIPAddress) are copied into every derived
	// EC2NodeClass and cannot be changed by a WorkloadClass. Its tags are mandatory: a class
	// may add tags but not change these.
	// +kubebuilder:validation:XValidation:rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",message="nodeClass must set exactly one of role or instanceProfile"
	// +kubebuilder:validation:XValidation:rule="self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)",message="nodeClass.amiFamily is required when no amiSelectorTerm is an alias"
	// +required
	NodeClass awsv1.EC2NodeClassSpec `json:"nodeClass"`

	// nodePool holds defaults for every NodePool derived from this Baseline. A profile or
	// a WorkloadClass may override each field, except that labels and annotations set here
	// are mandatory, like tags.
	// +optional
	NodePool NodePoolDefaults `json:"nodePool,omitempty"`

	// rebalance is the default for every class's spec.rebalance; a class overrides each
	// field separately.
	// +optional
	Rebalance *Rebalance `json:"rebalance,omitempty"`

	// guardrails are the bounds every class that uses this Baseline must satisfy, enforced
	// by the API server; see Guardrails and docs/guardrails.md.
	// +optional
	Guardrails *Guardrails `json:"guardrails,omitempty"`
	// headroom is the default for every class's spec.headroom; see docs/headroom.md for
	// which fields a class overrides as a group.
	// +optional
	Headroom *Headroom `json:"headroom,omitempty"`
	// commitments are the Savings Plans and Reserved Instances this cluster may count on;
	// see Commitments and docs/commitments.md.
	// +optional
	Commitments *Commitments `json:"commitments,omitempty"`
}

// NodePoolDefaults are the NodePool fields a Baseline sets for every derived NodePool.
type NodePoolDefaults struct {
	// labels are added to every node. They are mandatory: a class may add labels but not
	// give one of these keys another value.
	// +optional
	Labels NodeLabels `json:"labels,omitempty"`

	// annotations are added to every node. They are mandatory, like labels.
	// +optional
	Annotations NodeAnnotations `json:"annotations,omitempty"`

	// taints are applied to every node. Taints are unioned across layers by (key, effect).
	// +optional
	Taints Taints `json:"taints,omitempty"`

	// startupTaints are applied to every node at startup and expected to be removed by a
	// DaemonSet once the node is ready; pods need not tolerate them. Merged like taints.
	// +optional
	StartupTaints Taints `json:"startupTaints,omitempty"`

	// expireAfter is how long a node lives before Karpenter replaces it, e.g. 720h, or
	// Never. Karpenter's default is 720h.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'Never' || duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold), or Never"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter *karpv1.NillableDuration `json:"expireAfter,omitempty"`

	// terminationGracePeriod is how long Karpenter waits for a node to drain before it
	// terminates the node regardless, e.g. 24h. Unset means wait indefinitely.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold)"
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`

	// disruption sets how Karpenter consolidates nodes. A profile or a class overrides
	// each of its fields separately.
	// +optional
	Disruption *Disruption `json:"disruption,omitempty"`
}

// BaselineStatus is the observed state of a Baseline.
type BaselineStatus struct {
	// observedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// classes is how many WorkloadClasses reference this Baseline.
	// +optional
	Classes int32 `json:"classes,omitempty"`

	// conditions are the latest observations of the Baseline's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// commitments report each of spec.commitments for the whole Baseline: this cluster's
	// share and what its classes' nodes use of it (docs/commitments.md). Written at most
	// once a minute, when a rounded figure changed.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=70
	// +optional
	Commitments []BaselineCommitmentStatus `json:"commitments,omitempty"`
}

// Baseline holds what every node must have: the IAM role or instance profile, subnet and
// security-group selectors, AMI selection, mandatory tags and labels, metadata options,
// block devices, and NodePool-wide defaults. WorkloadClasses reference a Baseline by name
// ("default" when they name none).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bl,categories=poolsmith
// +kubebuilder:printcolumn:name="Classes",type=integer,JSONPath=`.status.classes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Baseline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what every node rendered from this Baseline must have.
	// +required
	Spec BaselineSpec `json:"spec"`

	// status is the observed state of the Baseline.
	// +optional
	Status BaselineStatus `json:"status,omitempty"`
}

// BaselineList is a list of Baselines.
// +kubebuilder:object:root=true
type BaselineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Baseline `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Baseline{}, &BaselineList{})
}
