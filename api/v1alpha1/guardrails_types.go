package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// LabelTeam on a WorkloadClass names the team that owns it. The chart's admission policy
// poolsmith-ownership lets a user change a class only when one of the user's groups maps
// to its team (or the user is in the platform group); guardrails.requireTeam makes it
// mandatory.
const LabelTeam = "poolsmith.dev/team"

// Guardrails are the bounds every WorkloadClass that uses a Baseline must satisfy. The API
// server enforces them when a class is created and when its spec or labels change (the
// chart's ValidatingAdmissionPolicy poolsmith-guardrails, whose parameter is the Baseline);
// the controller judges them with the same CEL before every render and reports a class put
// out of bounds by a later Baseline edit as Synced=False GuardrailViolation, changing none
// of its NodePools; poolsmith lint and render judge them offline. Unset fields bound
// nothing. Values a class takes from its profile count as the class's: a GPU-profile class
// that names no capacity types uses on-demand and spot.
// +kubebuilder:validation:XValidation:rule="!has(self.families) || !has(self.categories) || self.families.all(f, f.find('^[a-z]+') in self.categories)",message="guardrails.families: every family must belong to one of guardrails.categories (m7g belongs to m), or no class could use it"
// +kubebuilder:validation:XValidation:rule="!has(self.families) || !has(self.minGeneration) || self.families.all(f, int(f.find('[0-9]+')) >= self.minGeneration)",message="guardrails.families: every family must be of guardrails.minGeneration or newer (m5 is generation 5), or no class could use it"
// +kubebuilder:validation:XValidation:rule="!has(self.capacityTypeGrants) || !has(self.capacityTypes) || self.capacityTypeGrants.all(g, !(g.capacityType in self.capacityTypes))",message="guardrails.capacityTypeGrants: a capacity type guardrails.capacityTypes already allows needs no grant"
// +kubebuilder:validation:XValidation:rule="!has(self.gpuNames) || !has(self.profiles) || 'GPU' in self.profiles || 'Custom' in self.profiles",message="guardrails.gpuNames: no allowed profile can have GPUs (allow GPU or Custom in guardrails.profiles)"
type Guardrails struct {
	// ceilings cap each class's spec.limits, class-wide; a class that sets no limit for a
	// resource with a ceiling gets the ceiling as its limit.
	// +optional
	Ceilings *Ceilings `json:"ceilings,omitempty"`

	// profiles a class may use (its spec.profile, General when unset).
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	// +optional
	Profiles []Profile `json:"profiles,omitempty"`

	// capacityTypes a class may use without a grant, e.g. [spot].
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	// +optional
	CapacityTypes []CapacityType `json:"capacityTypes,omitempty"`

	// capacityTypeGrants let the classes that carry a label use a capacity type
	// capacityTypes does not allow, e.g. on-demand for classes labelled
	// example.com/on-demand=true. Only the platform group may set, change or remove a
	// grant's label on a class.
	// +kubebuilder:validation:MaxItems=3
	// +listType=map
	// +listMapKey=capacityType
	// +optional
	CapacityTypeGrants []CapacityTypeGrant `json:"capacityTypeGrants,omitempty"`

	// architectures a class may use.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	// +optional
	Architectures []Architecture `json:"architectures,omitempty"`

	// categories of instance a class may use (karpenter.k8s.aws/instance-category), e.g.
	// c, m, r. A class's categories, families and types must all belong to them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z]+$`
	// +kubebuilder:validation:items:MaxLength=8
	// +listType=set
	// +optional
	Categories []string `json:"categories,omitempty"`

	// families a class may use (karpenter.k8s.aws/instance-family), e.g. m7g. A class
	// must then name its families or types, each of one of these families.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=32
	// +listType=set
	// +optional
	Families []string `json:"families,omitempty"`

	// minGeneration is the oldest instance generation a class may use: its own
	// instances.minGeneration (or its profile's), or the generation of every family and
	// type it names, must be at least this.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinGeneration *int32 `json:"minGeneration,omitempty"`

	// gpuNames are the GPU models a GPU class may use (karpenter.k8s.aws/instance-gpu-name),
	// e.g. t4, l4. A GPU class (profile GPU, or one that sets instances.gpu) must then name
	// its models in instances.gpu.names, each one of these.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]+(-[a-z0-9]+)*$`
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	GPUNames []string `json:"gpuNames,omitempty"`

	// requireGPUTaint: a GPU class must carry a NoSchedule or NoExecute taint of its own in
	// spec.taints. The nvidia.com/gpu taint the GPU profile adds does not count: every GPU
	// class shares it, and Kubernetes adds its toleration to any pod that requests a GPU,
	// so it keeps no team's pods off another team's GPU nodes.
	// +optional
	RequireGPUTaint bool `json:"requireGPUTaint,omitempty"`

	// requireTeam: a class must carry the label poolsmith.dev/team.
	// +optional
	RequireTeam bool `json:"requireTeam,omitempty"`

	// teams, when set, are the only teams (poolsmith.dev/team) whose classes may use this
	// Baseline, so that a team cannot escape a strict Baseline by naming a laxer one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	Teams []string `json:"teams,omitempty"`
}

// Ceilings cap a class's class-wide limits (spec.limits).
type Ceilings struct {
	// cpu caps spec.limits.cpu, e.g. "256".
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// memory caps spec.limits.memory, e.g. 1Ti.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// gpu caps spec.limits["nvidia.com/gpu"] and spec.limits["amd.com/gpu"], each.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	GPU *resource.Quantity `json:"gpu,omitempty"`
	// nodes caps spec.limits.nodes, the class's node count.
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	// +optional
	Nodes *resource.Quantity `json:"nodes,omitempty"`
	// budgetPerHour caps spec.budget.perHour (US dollars per hour, written as there, e.g.
	// "100.00"): a class's own budget may be no higher and must be enforced (mode Warn is
	// refused), and a class that sets no budget is held to this one, enforced.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,7}([.][0-9]{1,4})?$') && self.matches('[1-9]')",message="must be US dollars per hour above 0 with at most 4 decimals, e.g. 100.00"
	// +optional
	BudgetPerHour string `json:"budgetPerHour,omitempty"`
}

// CapacityTypeGrant lets the classes labelled label=true use capacityType.
type CapacityTypeGrant struct {
	// capacityType the label grants, e.g. on-demand.
	// +required
	CapacityType CapacityType `json:"capacityType"`
	// label is the label key a class carries, with the value "true", to use capacityType,
	// e.g. example.com/on-demand. Only the platform group may set it on a class.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="label keys must be qualified names"
	// +kubebuilder:validation:XValidation:rule="self != 'poolsmith.dev/team'",message="poolsmith.dev/team names the class's team; a grant needs a label of its own"
	// +required
	Label string `json:"label"`
}

// Limit names of the resources ceilings cap.
const (
	LimitNodes     = "nodes"
	LimitNvidiaGPU = "nvidia.com/gpu"
	LimitAMDGPU    = "amd.com/gpu"
)
