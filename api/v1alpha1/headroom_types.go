package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HeadroomMechanism says how spare capacity is held: Karpenter's CapacityBuffer or
// placeholder pods. In spec, Auto takes the manager's choice; in status, Off says the
// manager holds none (--headroom=off).
type HeadroomMechanism string

const (
	// HeadroomAuto takes the manager's choice (--headroom).
	HeadroomAuto HeadroomMechanism = "Auto"
	// HeadroomCapacityBuffer renders a CapacityBuffer (autoscaling.x-k8s.io/v1beta1) and
	// its PodTemplate; Karpenter holds the units as virtual pods. Karpenter's
	// CapacityBuffer feature gate must be on.
	HeadroomCapacityBuffer HeadroomMechanism = "CapacityBuffer"
	// HeadroomPods renders a Deployment of pause pods at the negative priority of the
	// PriorityClass poolsmith-headroom, which real pods preempt. Works with any Karpenter.
	HeadroomPods HeadroomMechanism = "Pods"
	// HeadroomOff (status only): the manager runs with --headroom=off.
	HeadroomOff HeadroomMechanism = "Off"
)

// Headroom ceilings: no instance type in the catalog is larger (api's agreement test checks
// them against internal/catalog), so a unit above them could never be placed.
const (
	HeadroomMaxCPU    = "896"
	HeadroomMaxMemory = "32Ti"
	HeadroomMaxGPU    = 8
)

// Headroom keeps spare capacity warm for a class: units of podShape, held on one rung, so
// that a burst of pods starts on nodes that are already up. See docs/headroom.md.
type Headroom struct {
	// podShape is one unit of headroom: the requests of one placeholder pod. Default: the
	// class's weighting.podShape, else the typical pod (half the allocatable of the
	// smallest instance type of the chosen rung; see docs/headroom.md).
	// +optional
	PodShape *HeadroomPodShape `json:"podShape,omitempty"`

	// replicas is a fixed number of units. With percentage, the larger of the two is held.
	// 0 with no percentage turns a Baseline's default headroom off for this class.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// percentage is a share of the class's live requests (the pods running on its nodes,
	// placeholders and DaemonSet pods excluded), in units, rounded up; 1..100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`

	// limits cap the headroom's total requests (cpu, memory, nvidia.com/gpu or an
	// extended resource): the unit count is at most limits / podShape for every resource
	// both name.
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, quantity(string(self[k])).isGreaterThan(quantity('0')))",message="limits: every quantity must be positive"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// schedule is a list of windows outside which the headroom is zero, e.g. office hours.
	// Empty: always on.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Schedule []HeadroomWindow `json:"schedule,omitempty"`

	// rung selects the rung the spare nodes come from: the most preferred rung matching
	// every field set. Default: the top (most preferred) rung.
	// +optional
	Rung *RungSelector `json:"rung,omitempty"`

	// mechanism is Auto (the default: the manager's choice), Pods (placeholder pods) or
	// CapacityBuffer (falls back to Pods, reported, where the manager has none).
	// +kubebuilder:validation:Enum=Auto;CapacityBuffer;Pods
	// +optional
	Mechanism HeadroomMechanism `json:"mechanism,omitempty"`
}

// HeadroomPodShape is one unit's requests.
// +kubebuilder:validation:XValidation:rule="has(self.cpu) || has(self.memory) || has(self.gpu) || has(self.extendedResources)",message="podShape needs a resource: cpu, memory, gpu or extendedResources"
type HeadroomPodShape struct {
	// cpu requested by one unit, e.g. 1. Positive, at most 896 (the largest instance type's).
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be positive"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('896')) <= 0",message="must be at most 896, the largest instance type's vCPUs"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// memory requested by one unit, e.g. 2Gi. Positive, at most 32Ti (the largest type's).
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be positive"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('32Ti')) <= 0",message="must be at most 32Ti, the largest instance type's memory"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// gpu is the number of GPUs (nvidia.com/gpu) one unit requests, 1..8 (the most any
	// instance type has).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	// +optional
	GPU *int32 `json:"gpu,omitempty"`
	// extendedResources one unit requests, e.g. {"aws.amazon.com/neuron": "1"}: qualified
	// names other than nvidia.com/gpu (that is gpu), positive integers.
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.contains('/') && k != 'nvidia.com/gpu' && !format.qualifiedName().validate(k).hasValue())",message="extendedResources: qualified names with a domain, other than nvidia.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 20 && isQuantity(self[k]) && quantity(self[k]).isInteger() && quantity(self[k]).isGreaterThan(quantity('0')))",message="extendedResources: values must be positive integers"
	// +optional
	ExtendedResources map[string]string `json:"extendedResources,omitempty"`
}

// HeadroomWindow is a time window in which the headroom is held: it opens at each time
// start names and stays open for duration.
type HeadroomWindow struct {
	// start is a five-field cron expression (minute hour day-of-month month day-of-week),
	// read in timeZone, e.g. "0 8 * * 1-5" for 08:00 on weekdays.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9*,/-]+( [0-9*,/-]+){2} [0-9A-Za-z*,/-]+ [0-9A-Za-z*,/-]+$')",message="start: five cron fields (minute hour day-of-month month day-of-week), no @-macros"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+$') || !((self.split(' ')[3] in ['2', 'feb', 'FEB']) && self.split(' ')[2].split(',').all(d, d in ['30', '31'])) && !(self.split(' ')[3].split(',').all(m, m in ['4', '6', '9', '11', 'apr', 'jun', 'sep', 'nov', 'APR', 'JUN', 'SEP', 'NOV']) && self.split(' ')[2] == '31')",message="start: this day of month never occurs in those months"
	// +required
	Start string `json:"start"`

	// duration is how long the window stays open after each start, 1m..168h, in elapsed
	// time (a DST change does not stretch it).
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="duration: 1m..168h"
	// +required
	Duration metav1.Duration `json:"duration"`

	// timeZone is an IANA time zone name, e.g. Europe/Paris. Default UTC.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="timestamp('2026-01-01T00:00:00Z').getHours(self) >= 0",message="timeZone: not an IANA time zone"
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// RungSelector picks a rung of the class's ladder: the most preferred rung matching every
// field set.
type RungSelector struct {
	// capacityType of the rung: spot, on-demand or reserved.
	// +optional
	CapacityType CapacityType `json:"capacityType,omitempty"`
	// arch of the rung: arm64 or amd64.
	// +optional
	Arch Architecture `json:"arch,omitempty"`
	// slice is the instance family or type of a rung under consistency Family or Type.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)?$`
	// +optional
	Slice string `json:"slice,omitempty"`
}

// HeadroomStatus reports the class's warm capacity.
type HeadroomStatus struct {
	// mechanism is what was rendered: CapacityBuffer, Pods, or Off.
	// +optional
	Mechanism HeadroomMechanism `json:"mechanism,omitempty"`
	// rung is the NodePool the units are pinned to.
	// +optional
	Rung string `json:"rung,omitempty"`
	// desired is the number of units asked for.
	Desired int32 `json:"desired"`
	// ready is the number of units placed on running nodes: the Deployment's available
	// replicas (Pods), or desired when Karpenter reports the buffer fits existing
	// capacity (CapacityBuffer).
	Ready int32 `json:"ready"`
	// display is "ready/desired", the Headroom printer column.
	// +optional
	Display string `json:"display,omitempty"`
	// warmNodes are the nodes of the rung the ready units keep up: nodes running
	// placeholders and no other pod but DaemonSet pods (Pods); nodes running no pod but
	// DaemonSet pods, the fewest whose room holds the ready units (CapacityBuffer).
	// +optional
	WarmNodes int32 `json:"warmNodes,omitempty"`
	// idleCostPerHour is an estimate in USD of what the idle units cost per hour: the
	// ready units (for a CapacityBuffer, those the room on the rung's nodes still holds)
	// times the unit's price on the rung's cheapest type per unit.
	// +optional
	IdleCostPerHour string `json:"idleCostPerHour,omitempty"`
	// priceSources name where that price came from, as on the rungs.
	// +optional
	PriceSources string `json:"priceSources,omitempty"`
	// window says whether the schedule is open, and until when.
	// +optional
	Window string `json:"window,omitempty"`
	// nextChange is when the schedule next opens or closes.
	// +optional
	NextChange *metav1.Time `json:"nextChange,omitempty"`
	// shrinkPendingSince is when a percentage-sized headroom first found itself too large;
	// it shrinks once that has held for 10 minutes.
	// +optional
	ShrinkPendingSince *metav1.Time `json:"shrinkPendingSince,omitempty"`
	// reason is Ready, Provisioning, CappedByLimits, CappedByClassLimits,
	// MechanismFallback, Disabled, Closed, PriorityClassMissing or NotObserved.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message explains reason.
	// +optional
	Message string `json:"message,omitempty"`
}

// Reasons in status.headroom.reason.
const (
	// HeadroomReasonReady: every desired unit is ready.
	HeadroomReasonReady = "Ready"
	// HeadroomReasonProvisioning: some units wait for a node.
	HeadroomReasonProvisioning = "Provisioning"
	// HeadroomReasonCappedByLimits: spec.headroom.limits hold the count below the size.
	HeadroomReasonCappedByLimits = "CappedByLimits"
	// HeadroomReasonCappedByClassLimits: the class's spec.limits leave no room for more.
	HeadroomReasonCappedByClassLimits = "CappedByClassLimits"
	// HeadroomReasonMechanismFallback: CapacityBuffer was asked for and the manager has
	// none; placeholder pods are used.
	HeadroomReasonMechanismFallback = "MechanismFallback"
	// HeadroomReasonDisabled: the manager runs with --headroom=off.
	HeadroomReasonDisabled = "Disabled"
	// HeadroomReasonClosed: no schedule window is open; desired is 0.
	HeadroomReasonClosed = "Closed"
	// HeadroomReasonPriorityClassMissing: the PriorityClass poolsmith-headroom does not
	// exist, so the API server refuses placeholder pods (mechanism Pods).
	HeadroomReasonPriorityClassMissing = "PriorityClassMissing"
	// HeadroomReasonNotObserved: Karpenter has not reported on the CapacityBuffer.
	HeadroomReasonNotObserved = "NotObserved"
)

// Headroom names.
const (
	// LabelHeadroom names the class on its placeholder pods and headroom children.
	LabelHeadroom = "poolsmith.dev/headroom"
	// HeadroomPriorityClass is the PriorityClass of placeholder pods, installed by the chart.
	HeadroomPriorityClass = "poolsmith-headroom"
	// DefaultHeadroomNamespace is where headroom children live unless
	// --headroom-namespace says otherwise.
	DefaultHeadroomNamespace = "poolsmith-headroom"
)

// GetDisplay is status.headroom.display, "" when there is no status.
func (s *HeadroomStatus) GetDisplay() string {
	if s == nil {
		return ""
	}
	return s.Display
}
