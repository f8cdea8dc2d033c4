package v1alpha1

import (
	"slices"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Profile names a preset of requirements and NodePool settings for a kind of workload.
// +kubebuilder:validation:Enum=General;BurstableCI;GPU;MemoryOptimized;Custom
type Profile string

const (
	// ProfileGeneral is mixed ARM/x86 general-purpose capacity (c, m and r categories).
	ProfileGeneral Profile = "General"
	// ProfileBurstableCI is short-lived, spot-first capacity for CI runners.
	ProfileBurstableCI Profile = "BurstableCI"
	// ProfileGPU is NVIDIA GPU capacity for ML training and inference.
	ProfileGPU Profile = "GPU"
	// ProfileMemoryOptimized is high memory-per-vCPU capacity for analytics.
	ProfileMemoryOptimized Profile = "MemoryOptimized"
	// ProfileCustom adds no defaults: the class states everything, architectures and
	// capacity types included. Migrated pools that no profile matches use it.
	ProfileCustom Profile = "Custom"
)

// Architecture is a CPU architecture as Karpenter's kubernetes.io/arch label names it.
// +kubebuilder:validation:Enum=arm64;amd64
type Architecture string

const (
	ArchitectureARM64 Architecture = "arm64"
	ArchitectureAMD64 Architecture = "amd64"
)

// CapacityType is an EC2 purchase option as Karpenter's karpenter.sh/capacity-type label
// names it.
// +kubebuilder:validation:Enum=spot;on-demand;reserved
type CapacityType string

const (
	CapacityTypeSpot     CapacityType = "spot"
	CapacityTypeOnDemand CapacityType = "on-demand"
	CapacityTypeReserved CapacityType = "reserved"
)

// Consistency says how finely the ladder splits rungs so that one workload's nodes stay
// alike.
// +kubebuilder:validation:Enum=Diverse;Family;Type
type Consistency string

const (
	// ConsistencyDiverse gives one rung per capacity type and architecture; Karpenter picks
	// freely among every instance type the rung allows.
	ConsistencyDiverse Consistency = "Diverse"
	// ConsistencyFamily adds one rung per instance family, in spec.instances.families order.
	ConsistencyFamily Consistency = "Family"
	// ConsistencyType adds one rung per instance type, in spec.instances.types order.
	ConsistencyType Consistency = "Type"
)

// WeightingStrategy says how rung weights are chosen.
// +kubebuilder:validation:Enum=Static;Cost;RiskAdjustedCost
type WeightingStrategy string

const (
	// WeightingStatic weights rungs by ladder order alone.
	WeightingStatic WeightingStrategy = "Static"
	// WeightingCost orders rungs by the price of the resource the profile buys.
	WeightingCost WeightingStrategy = "Cost"
	// WeightingRiskAdjustedCost is Cost with spot prices penalised by interruption frequency.
	WeightingRiskAdjustedCost WeightingStrategy = "RiskAdjustedCost"
)

// PrunePolicy says what happens to a NodePool that the class no longer renders.
// +kubebuilder:validation:Enum=Delete;Retire;Orphan
type PrunePolicy string

const (
	// PruneDelete deletes the NodePool; Karpenter drains and removes its nodes.
	PruneDelete PrunePolicy = "Delete"
	// PruneRetire sets the NodePool's limits to zero so no node launches, and deletes it
	// once it has no nodes left.
	PruneRetire PrunePolicy = "Retire"
	// PruneOrphan removes Poolsmith's owner reference and labels and leaves the NodePool.
	PruneOrphan PrunePolicy = "Orphan"
)

// WorkloadClassSpec declares what one kind of workload needs from its nodes.
// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile != 'Custom' || (has(self.architectures) && has(self.capacityTypes))",message="profile Custom has no defaults: spec.architectures and spec.capacityTypes are required"
// +kubebuilder:validation:XValidation:rule="!has(self.headroom) || !has(self.headroom.podShape) || !has(self.headroom.podShape.gpu) || !has(self.instances) || !has(self.instances.gpu) || !has(self.instances.gpu.count) || !has(self.instances.gpu.count.max) || self.headroom.podShape.gpu <= self.instances.gpu.count.max",message="headroom.podShape.gpu must be at most instances.gpu.count.max",fieldPath=".headroom.podShape.gpu"
type WorkloadClassSpec struct {
	// baselineRef names the Baseline this class builds on. When omitted, the Baseline
	// named "default" is used.
	// +optional
	BaselineRef *BaselineReference `json:"baselineRef,omitempty"`

	// profile is the preset this class starts from: General (the default; mixed ARM/x86),
	// BurstableCI, GPU, MemoryOptimized, or Custom (no defaults at all). Every field set in
	// this spec overrides the profile's value.
	// +optional
	Profile Profile `json:"profile,omitempty"`

	// architectures lists the CPU architectures nodes may have, most preferred first. Each
	// becomes its own rung. Defaults to the profile's list.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	Architectures []Architecture `json:"architectures,omitempty"`

	// capacityTypes lists the purchase options nodes may use, most preferred first: spot,
	// on-demand, reserved. Each becomes its own rung. Defaults to the profile's list.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	CapacityTypes []CapacityType `json:"capacityTypes,omitempty"`

	// requirements are further Karpenter requirements every rung gets, for what the other
	// fields do not cover (e.g. karpenter.k8s.aws/instance-hypervisor In [nitro]).
	// Capacity types and architectures are the ladder's axes and have their own fields.
	// Karpenter's own NodePool rules apply (see Requirement).
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:XValidation:rule="self.all(r, !(r.key in ['karpenter.sh/capacity-type', 'kubernetes.io/arch']))",message="capacity types and architectures are the ladder's axes: use spec.capacityTypes and spec.architectures"
	// +listType=atomic
	// +optional
	Requirements []Requirement `json:"requirements,omitempty"`

	// zones restricts nodes to these availability zones, e.g. us-east-1a. Unset means
	// every zone the Baseline's subnets reach.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z]{2}(-[a-z0-9]+)+$`
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`

	// instances constrains the instance types nodes may have. Unset fields take the
	// profile's value.
	// +optional
	Instances *InstanceShape `json:"instances,omitempty"`

	// consistency says how finely rungs are split so a workload's nodes stay alike:
	// Diverse (the default), Family (one rung per entry of instances.families) or Type (one
	// rung per entry of instances.types).
	// +optional
	Consistency Consistency `json:"consistency,omitempty"`

	// labels are added to every node of the class, on top of the Baseline's. Poolsmith
	// also sets poolsmith.dev/class and poolsmith.dev/rung.
	// +optional
	Labels NodeLabels `json:"labels,omitempty"`

	// annotations are added to every node of the class, on top of the Baseline's.
	// +optional
	Annotations NodeAnnotations `json:"annotations,omitempty"`

	// taints are applied to every node of the class. They are unioned with the Baseline's
	// and the profile's by (key, effect); for the same (key, effect) this value wins.
	// +optional
	Taints Taints `json:"taints,omitempty"`

	// startupTaints are applied to every node of the class at startup, merged like taints.
	// +optional
	StartupTaints Taints `json:"startupTaints,omitempty"`

	// limits caps the resources of the whole class, across every rung, e.g. cpu: "512".
	// Limits must not be negative.
	// +kubebuilder:validation:MaxProperties=30
	// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="limits must not be negative"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// disruption overrides the Baseline's and the profile's consolidation settings, field by
	// field.
	// +optional
	Disruption *Disruption `json:"disruption,omitempty"`

	// expireAfter is how long a node lives before Karpenter replaces it, e.g. 168h, or
	// Never. Overrides the Baseline and the profile.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'Never' || duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold), or Never"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter *karpv1.NillableDuration `json:"expireAfter,omitempty"`

	// fallbackExpireAfter replaces expireAfter on rungs whose capacity type is not the
	// class's first choice, when it is shorter, so their nodes are recycled and the
	// preferred rung is tried again. Never turns it off. Karpenter's expiry ignores
	// disruption budgets and do-not-disrupt, so pair it with terminationGracePeriod. The
	// General, BurstableCI and MemoryOptimized profiles set it; GPU does not.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'Never' || duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold), or Never"
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	FallbackExpireAfter *karpv1.NillableDuration `json:"fallbackExpireAfter,omitempty"`

	// rebalance moves nodes from fallback rungs back up the ladder when the preferred rung
	// can take them again. Off unless set here or on the Baseline; see docs/rebalance.md.
	// +optional
	Rebalance *Rebalance `json:"rebalance,omitempty"`

	// budget caps what the class may cost per hour (status.cost.perHour): reaching it
	// holds every rung at what it uses; see Budget and docs/cost.md.
	// +optional
	Budget *Budget `json:"budget,omitempty"`

	// terminationGracePeriod is how long Karpenter waits for a node to drain before it
	// terminates the node regardless, e.g. 2h. Overrides the Baseline and the profile.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold)"
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`

	// weighting says how rung weights (Karpenter's NodePool spec.weight) are chosen.
	// +optional
	Weighting *Weighting `json:"weighting,omitempty"`

	// prunePolicy says what happens to a rung's NodePool when the class no longer renders
	// it: Delete (the default), Retire (limits set to zero, deleted once it has no nodes)
	// or Orphan (left in place, no longer managed).
	// +optional
	PrunePolicy PrunePolicy `json:"prunePolicy,omitempty"`

	// nodeClass overrides the fields of the Baseline's EC2NodeClass that a class may
	// change. Identity and network fields are Baseline-only and have no place here.
	// +optional
	NodeClass *NodeClassOverrides `json:"nodeClass,omitempty"`

	// access says which namespaces may place pods on the class's nodes. Absent, any
	// namespace may. When set, the API server itself refuses (through the
	// ValidatingAdmissionPolicy poolsmith-access the chart installs, reading the class's
	// AccessRule) a pod, a PodTemplate, or the pod template of a Deployment, StatefulSet,
	// ReplicaSet, DaemonSet, ReplicationController, Job or CronJob, from any other
	// namespace that selects the class (poolsmith.dev/class, or one of its rungs by
	// poolsmith.dev/rung or karpenter.sh/nodepool, in its nodeSelector or required node
	// affinity) or tolerates every NoSchedule and NoExecute taint of the class without
	// selecting elsewhere. Exempt: kube-system, pods the DaemonSet controller creates (by
	// its identity, not an ownerReference) and DaemonSets whose only toleration of the
	// class is a blanket one (node agents). The class needs a NoSchedule or NoExecute taint
	// in spec.taints: without one, any pod could land on its nodes and no rule could tell.
	// Every rung of the class also carries the NoExecute taint poolsmith.dev/access=<name>,
	// which the kubelet enforces for pods that name a node (spec.nodeName) and the policy
	// lets only these namespaces tolerate; pods need its toleration to run on the class's
	// nodes. Setting or removing access changes the rungs' taints, so their nodes drift.
	// +optional
	Access *Access `json:"access,omitempty"`

	// headroom keeps spare capacity warm for the class on its preferred rung; see docs/headroom.md.
	// +optional
	Headroom *Headroom `json:"headroom,omitempty"`
}

// Access names the namespaces that may place pods on a class: those listed in namespaces,
// and those whose labels match namespaceSelector. A namespace picks its default class with
// the label poolsmith.dev/default-class, not through this field.
// +kubebuilder:validation:XValidation:rule="has(self.namespaces) || has(self.namespaceSelector)",message="access needs namespaces, a namespaceSelector, or both; omit access to let every namespace use the class"
type Access struct {
	// namespaces may place pods on the class, by name.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector admits the namespaces whose labels match, e.g. matchLabels
	// {team: ml}. It may not be empty: an empty selector would admit every namespace, which
	// is what omitting spec.access says.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && self.matchLabels.size() > 0) || (has(self.matchExpressions) && self.matchExpressions.size() > 0)",message="an empty namespaceSelector would admit every namespace: give it labels or expressions, or omit spec.access to let every namespace use the class"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && e.values.size() > 0 : !has(e.values) || e.values.size() == 0)",message="In and NotIn need values; Exists and DoesNotExist take none"
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`
}

// NamespaceSelector is a label selector over namespaces (metav1.LabelSelector, field for
// field) with bounds so that the API server can judge it within its CEL cost budget.
type NamespaceSelector struct {
	// matchLabels are labels the namespace must have with these values. Value characters
	// are checked when the class is rendered (a per-character check here exceeds the API
	// server's CEL cost budget).
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="label keys must be qualified names"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="label values must be at most 63 characters"
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// matchExpressions are label requirements the namespace must meet, all of them.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	MatchExpressions []NamespaceSelectorRequirement `json:"matchExpressions,omitempty"`
}

// NamespaceSelectorRequirement is one label requirement (metav1.LabelSelectorRequirement).
type NamespaceSelectorRequirement struct {
	// key is the label key.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="label keys must be qualified names"
	// +required
	Key string `json:"key"`
	// operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// values are label values: at least one for In and NotIn, none otherwise.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// Admits reports whether the rule lets the namespace of that name and those labels use the
// class; a nil rule admits every namespace. The access policy (render.AdmissionPolicies) makes the
// same test in CEL.
func (a *Access) Admits(namespace string, nsLabels map[string]string) bool {
	if a == nil || slices.Contains(a.Namespaces, namespace) {
		return true
	}
	if a.NamespaceSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(a.NamespaceSelector.LabelSelector())
	return err == nil && sel.Matches(labels.Set(nsLabels))
}

// LabelSelector is the selector as apimachinery's type.
func (s *NamespaceSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
	}
	return out
}

// Requirement is a Karpenter NodePool requirement (karpenter.sh/v1
// NodeSelectorRequirementWithMinValues, field for field) with the bounds and rules
// Karpenter's NodePool CRD puts on it, so that admission refuses on the class what
// Karpenter would refuse on every rung.
// +kubebuilder:validation:XValidation:rule="self.operator == 'In' ? has(self.values) && self.values.size() != 0 : true",message="requirements with operator 'In' must have a value defined"
// +kubebuilder:validation:XValidation:rule="(self.operator == 'Gt' || self.operator == 'Lt' || self.operator == 'Gte' || self.operator == 'Lte') ? (has(self.values) && self.values.size() == 1 && self.values[0].matches('^[0-9]{1,18}$')) : true",message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single non-negative integer value (at most 18 digits)"
// +kubebuilder:validation:XValidation:rule="(self.operator == 'In' && has(self.minValues)) ? has(self.values) && self.values.size() >= self.minValues : true",message="requirements with 'minValues' must have at least that many values specified in the 'values' field"
type Requirement struct {
	// key is the node label the requirement selects on: a qualified name outside the
	// label domains Karpenter restricts.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="requirement keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters of alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric"
	// +kubebuilder:validation:XValidation:rule="self != 'karpenter.sh/nodepool' && self != 'kubernetes.io/hostname'",message="requirement keys karpenter.sh/nodepool and kubernetes.io/hostname are restricted by Karpenter"
	// +kubebuilder:validation:XValidation:rule="self == 'karpenter.sh/capacity-type' || !self.find('^([^/]+)').endsWith('karpenter.sh')",message="label domain \"karpenter.sh\" is restricted by Karpenter"
	// +kubebuilder:validation:XValidation:rule="self in ['karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !self.find('^([^/]+)').endsWith('karpenter.k8s.aws')",message="label domain \"karpenter.k8s.aws\" is restricted by Karpenter"
	// +required
	Key string `json:"key"`
	// operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt,
	// Gte or Lte.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt;Gte;Lte
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// values are label values: at least one for In, exactly one non-negative integer for
	// Gt, Lt, Gte and Lte, none for Exists and DoesNotExist.
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// minValues is the least number of distinct values Karpenter must keep (alpha in
	// Karpenter).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// Karpenter is the requirement as Karpenter's type, sharing its values.
func (r Requirement) Karpenter() karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues(r)
}

// BaselineReference names a Baseline.
type BaselineReference struct {
	// name of the Baseline.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// InstanceShape constrains instance types by Karpenter's well-known instance labels.
// +kubebuilder:validation:XValidation:rule="!has(self.families) || !has(self.excludeFamilies) || !self.families.exists(f, f in self.excludeFamilies)",message="instances.families and instances.excludeFamilies must not name the same family"
type InstanceShape struct {
	// categories are instance categories (karpenter.k8s.aws/instance-category), e.g. c, m, r.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z]+$`
	// +listType=set
	// +optional
	Categories []string `json:"categories,omitempty"`

	// families are instance families (karpenter.k8s.aws/instance-family), most preferred
	// first, e.g. m7g, m7i. Under consistency Family each becomes its own rung.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Families []string `json:"families,omitempty"`

	// excludeFamilies are instance families nodes must not have.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	ExcludeFamilies []string `json:"excludeFamilies,omitempty"`

	// types are instance types (node.kubernetes.io/instance-type), most preferred first,
	// e.g. m7g.xlarge. Under consistency Type each becomes its own rung.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z0-9]+(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Types []string `json:"types,omitempty"`

	// minGeneration is the oldest instance generation allowed
	// (karpenter.k8s.aws/instance-generation), e.g. 6.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinGeneration *int32 `json:"minGeneration,omitempty"`

	// cpu bounds the vCPU count (karpenter.k8s.aws/instance-cpu), inclusive.
	// +optional
	CPU *IntRange `json:"cpu,omitempty"`

	// memory bounds instance memory (karpenter.k8s.aws/instance-memory), inclusive, as
	// quantities such as 8Gi.
	// +optional
	Memory *QuantityRange `json:"memory,omitempty"`

	// gpu constrains GPU instances.
	// +optional
	GPU *GPUShape `json:"gpu,omitempty"`
}

// IntRange is an inclusive range of whole numbers; either end may be omitted.
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="min must be less than or equal to max"
type IntRange struct {
	// min is the smallest value allowed.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Min *int32 `json:"min,omitempty"`
	// max is the largest value allowed.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Max *int32 `json:"max,omitempty"`
}

// QuantityRange is an inclusive range of quantities; either end may be omitted.
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || quantity(string(self.min)).compareTo(quantity(string(self.max))) <= 0",message="min must be less than or equal to max"
type QuantityRange struct {
	// min is the smallest value allowed, e.g. 8Gi.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`
	// max is the largest value allowed, e.g. 512Gi.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`
}

// GPUShape constrains GPU instances.
type GPUShape struct {
	// count bounds the number of GPUs (karpenter.k8s.aws/instance-gpu-count).
	// +optional
	Count *IntRange `json:"count,omitempty"`
	// manufacturer is the GPU manufacturer (karpenter.k8s.aws/instance-gpu-manufacturer).
	// The GPU profile defaults it to nvidia.
	// +kubebuilder:validation:Enum=nvidia;amd;habana
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// names are GPU models (karpenter.k8s.aws/instance-gpu-name), e.g. t4, a10g, l4, h100.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]+(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Names []string `json:"names,omitempty"`
}

// Weighting says how rung weights are chosen.
type Weighting struct {
	// strategy is RiskAdjustedCost (the default: cost with spot prices raised by their
	// interruption frequency), Cost (price alone) or Static (ladder order alone). Cost
	// strategies rank rungs by the price of what the profile buys (per vCPU for General and
	// BurstableCI, per GiB for MemoryOptimized, per GPU for GPU) over the cheapest types
	// each rung allows, then give them ceiling, ceiling-1, and so on.
	// +optional
	Strategy WeightingStrategy `json:"strategy,omitempty"`

	// podShape, when set, ranks rungs by cost per pod-hour instead: each type's price is
	// divided by how many pods of this shape fit on it after Karpenter's overhead.
	// +optional
	PodShape *PodShape `json:"podShape,omitempty"`

	// nodeOverlays renders Karpenter NodeOverlays (karpenter.sh/v1alpha1, alpha, behind
	// Karpenter's NodeOverlay feature gate) that raise the spot price Karpenter sees for
	// the class's frequently interrupted types by their risk penalty, so its choice inside
	// a rung is risk-aware too. Scoped to the class by its poolsmith.dev/class label. The
	// manager must run with --node-overlays.
	// +optional
	NodeOverlays bool `json:"nodeOverlays,omitempty"`

	// ceiling is the class's highest weight; rungs get ceiling, ceiling-1, and so on. Give
	// classes that can take the same pods separate bands. Defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Ceiling *int32 `json:"ceiling,omitempty"`

	// commitments is Use (the default: rank on-demand rungs by the price under the
	// Baseline's commitments) or Ignore (list prices, and the class gives up its part of
	// every commitment, e.g. a class that must stay on spot). A class can only opt out.
	// +optional
	Commitments CommitmentUse `json:"commitments,omitempty"`
}

// PodShape is a reference pod's resource requests.
// +kubebuilder:validation:XValidation:rule="has(self.cpu) || has(self.memory) || has(self.gpu)",message="podShape needs at least one of cpu, memory or gpu"
type PodShape struct {
	// cpu requested by the pod, e.g. 500m. Positive: a zero request fits any number of pods
	// on every type, so nothing could be priced per pod.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be positive"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// memory requested by the pod, e.g. 1Gi. Positive, like cpu.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be positive"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// gpu is the number of GPUs (nvidia.com/gpu) requested by the pod.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GPU *int32 `json:"gpu,omitempty"`
}

// NodeClassOverrides are the EC2NodeClass fields a WorkloadClass may set on top of its
// Baseline. See the merge rules in docs/concepts.md.
// +kubebuilder:validation:XValidation:rule="!has(self.amiFamily) || has(self.amiSelectorTerms)",message="nodeClass.amiFamily may only be set together with nodeClass.amiSelectorTerms"
type NodeClassOverrides struct {
	// amiSelectorTerms replace the Baseline's AMI selection as a whole.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +optional
	AMISelectorTerms []awsv1.AMISelectorTerm `json:"amiSelectorTerms,omitempty"`

	// amiFamily goes with amiSelectorTerms when they hold no alias.
	// +kubebuilder:validation:Enum=AL2;AL2023;Bottlerocket;Custom;Windows2019;Windows2022;Windows2025
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`

	// blockDeviceMappings are merged with the Baseline's by deviceName, and field by field
	// inside ebs: a class can enlarge a volume and keep the Baseline's encryption and KMS key.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []*awsv1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// tags are added to the Baseline's tags. A Baseline tag cannot be given another value.
	// +optional
	Tags Tags `json:"tags,omitempty"`

	// kubelet is merged with the Baseline's kubelet configuration key by key; this value
	// wins. It is validated as Karpenter validates it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Kubelet awsv1.KubeletConfiguration `json:"kubelet,omitempty"`

	// userData may be set only when the Baseline has none.
	// +optional
	UserData *string `json:"userData,omitempty"`

	// detailedMonitoring enables EC2 detailed monitoring.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// instanceStorePolicy says how to use instance-store disks (RAID0).
	// +optional
	InstanceStorePolicy *awsv1.InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
}

// RungStatus reports one NodePool of the class's ladder.
type RungStatus struct {
	// name of the NodePool.
	Name string `json:"name"`
	// weight is the NodePool's spec.weight.
	Weight int32 `json:"weight"`
	// capacityType is the rung's capacity type.
	CapacityType CapacityType `json:"capacityType"`
	// arch is the rung's architecture.
	Arch Architecture `json:"arch"`
	// family or instance type the rung is pinned to, under consistency Family or Type.
	// +optional
	Slice string `json:"slice,omitempty"`
	// ready is the NodePool's Ready condition status: True, False or Unknown.
	// +optional
	Ready metav1.ConditionStatus `json:"ready,omitempty"`
	// reason explains the readiness or the weight.
	// +optional
	Reason string `json:"reason,omitempty"`
	// priceSources name where the prices that ranked the rung came from, with how many
	// of its cheapest types each priced, e.g. "spot: advisor 2026-11-30 (58), catalog
	// 2025-05-28 (2)": the Spot Instance Advisor's savings (dated by the signals'
	// fetched-at), a prices.json override, or the embedded catalog snapshot. Empty when
	// no price ranked it (Static weights, reserved capacity, no priced type).
	// +optional
	PriceSources string `json:"priceSources,omitempty"`
	// nodes is how many of the class's NodeClaims the rung holds.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// commitment is the id of the Savings Plan or Reserved Instance whose price ranked the
	// rung, if any.
	// +optional
	Commitment string `json:"commitment,omitempty"`
}

// WorkloadClassStatus is the observed state of a WorkloadClass.
type WorkloadClassStatus struct {
	// observedGeneration is the generation of the last successful reconcile.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Synced, Ready, SignalsCurrent and Access; see docs/controller.md.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// profile is the resolved profile.
	// +optional
	Profile Profile `json:"profile,omitempty"`

	// nodeClass is the name of the rendered EC2NodeClass.
	// +optional
	NodeClass string `json:"nodeClass,omitempty"`

	// poolCount is the number of rendered NodePools.
	// +optional
	PoolCount int32 `json:"poolCount,omitempty"`

	// driftNotice names the objects whose last applied change makes Karpenter replace
	// nodes (will drift), or may do so once selectors resolve differently (may drift).
	// +optional
	DriftNotice string `json:"driftNotice,omitempty"`

	// nodePools are the rendered NodePools, in ladder order, then any being retired.
	// +listType=map
	// +listMapKey=name
	// +optional
	NodePools []RungStatus `json:"nodePools,omitempty"`

	// rebalance reports moves of nodes back up the ladder (spec.rebalance).
	// +optional
	Rebalance *RebalanceStatus `json:"rebalance,omitempty"`

	// cost is what the class's nodes cost now, by rung and capacity type; see CostStatus.
	// +optional
	Cost *CostStatus `json:"cost,omitempty"`
	// headroom reports the class's warm capacity (spec.headroom).
	// +optional
	Headroom *HeadroomStatus `json:"headroom,omitempty"`
	// commitments report, for each of the Baseline's Savings Plans and Reserved Instances,
	// the class's entitlement, what its nodes use of it and the state that ranks its rungs
	// (docs/commitments.md); empty when the Baseline declares none.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=70
	// +optional
	Commitments []ClassCommitmentStatus `json:"commitments,omitempty"`
}

// WorkloadClass declares what one kind of workload needs. Poolsmith renders it, on top of
// its Baseline, into one EC2NodeClass and a weighted ladder of NodePools that it owns and
// keeps in sync.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wlc,categories=poolsmith
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it becomes the poolsmith.dev/class label value"
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.status.profile`
// +kubebuilder:printcolumn:name="Pools",type=integer,JSONPath=`.status.poolCount`
// +kubebuilder:printcolumn:name="Cost/h",type=string,JSONPath=`.status.cost.perHour`
// +kubebuilder:printcolumn:name="Headroom",type=string,JSONPath=`.status.headroom.display`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares what the workload needs.
	// +optional
	Spec WorkloadClassSpec `json:"spec,omitempty"`

	// status reports the rendered NodePool family.
	// +optional
	Status WorkloadClassStatus `json:"status,omitempty"`
}

// BaselineName is the Baseline the class uses: spec.baselineRef.name, or "default".
func (wc *WorkloadClass) BaselineName() string {
	if wc.Spec.BaselineRef != nil && wc.Spec.BaselineRef.Name != "" {
		return wc.Spec.BaselineRef.Name
	}
	return DefaultBaselineName
}

// WorkloadClassList is a list of WorkloadClasses.
// +kubebuilder:object:root=true
type WorkloadClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkloadClass{}, &WorkloadClassList{})
}
