package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// NodeLabels are labels added to every node of a NodePool. Keys are qualified names;
// the domains Karpenter restricts, Poolsmith's own poolsmith.dev domain and the
// well-known scheduling labels (which each rung sets through its requirements) are not
// allowed. Values are checked for length here and for their characters when rendered (a
// per-character check of every value exceeds the API server's CEL cost budget).
// +kubebuilder:validation:MaxProperties=100
// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric"
// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="label values must be at most 63 characters"
// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.contains('/') && k.find('^[^/]+').endsWith('poolsmith.dev')))",message="the poolsmith.dev label domain is reserved for the labels Poolsmith sets (poolsmith.dev/class, poolsmith.dev/rung)"
// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.contains('/') && k.find('^[^/]+').endsWith('karpenter.sh')))",message="the karpenter.sh label domain is restricted by Karpenter; capacity types are chosen with spec.capacityTypes"
// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.contains('/') && k.find('^[^/]+').endsWith('karpenter.k8s.aws')))",message="the karpenter.k8s.aws label domain is restricted by Karpenter; constrain instances with spec.instances"
// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['kubernetes.io/hostname', 'kubernetes.io/arch', 'kubernetes.io/os', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'node.kubernetes.io/instance-type']))",message="well-known scheduling labels are set by each rung's requirements; use spec.architectures, spec.zones or spec.instances"
type NodeLabels map[string]string

// NodeAnnotations are annotations added to every node of a NodePool.
// +kubebuilder:validation:MaxProperties=100
// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="annotation keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.'"
type NodeAnnotations map[string]string

// Taints are node taints, unique by key and effect. Layers are unioned by (key, effect);
// for the same (key, effect) the later layer's value wins (Baseline < profile < class).
// +kubebuilder:validation:MaxItems=50
// +listType=map
// +listMapKey=key
// +listMapKey=effect
type Taints []Taint

// Taint is a node taint: pods that do not tolerate it are kept off the node.
type Taint struct {
	// key is the taint key, a qualified name such as example.com/dedicated.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="taint keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric"
	// +required
	Key string `json:"key"`
	// value is the taint value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.labelValue().validate(self).hasValue()",message="taint values must be at most 63 characters of alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric"
	// +optional
	Value string `json:"value,omitempty"`
	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	// +required
	Effect corev1.TaintEffect `json:"effect"`
}

// Tags are EC2 tags. Keys Karpenter reserves for itself are not allowed.
// +kubebuilder:validation:MaxProperties=50
// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() > 0)",message="tag keys must not be empty"
// +kubebuilder:validation:XValidation:rule="self.all(k, k != 'eks:eks-cluster-name' && !k.startsWith('kubernetes.io/cluster') && !(k in ['karpenter.sh/nodepool', 'karpenter.sh/nodeclaim', 'karpenter.k8s.aws/ec2nodeclass']))",message="tag keys eks:eks-cluster-name, kubernetes.io/cluster/*, karpenter.sh/nodepool, karpenter.sh/nodeclaim and karpenter.k8s.aws/ec2nodeclass are reserved by Karpenter"
type Tags map[string]string

// Disruption sets how Karpenter consolidates the nodes of a NodePool. Each field is
// resolved separately: Karpenter's default < Baseline < profile < class.
type Disruption struct {
	// consolidationPolicy says which nodes Karpenter may consolidate: WhenEmpty,
	// WhenEmptyOrUnderutilized or Balanced. Karpenter's default is WhenEmptyOrUnderutilized.
	// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized;Balanced
	// +optional
	ConsolidationPolicy karpv1.ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// consolidateAfter is how long a node must be consolidatable before Karpenter acts,
	// e.g. 30s, 10m, or Never. Karpenter's default is 0s.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'Never' || duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold), or Never"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ConsolidateAfter *karpv1.NillableDuration `json:"consolidateAfter,omitempty"`

	// budgets limit how many nodes may be disrupted at once, as in a Karpenter NodePool.
	// When set, they replace the lower layer's budgets as a whole. Karpenter's default is
	// one budget of 10% of nodes.
	// +kubebuilder:validation:XValidation:rule="self.all(x, has(x.schedule) == has(x.duration))",message="each budget must set schedule and duration together, or neither"
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []karpv1.Budget `json:"budgets,omitempty"`
}
