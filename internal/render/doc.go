// Package render is Poolsmith's pure renderer: (Baseline, WorkloadClass, Options) in,
// one EC2NodeClass, a ladder of NodePools and the Provenance of every field out. It has
// no client and no clock, and the same input gives byte-identical output. The controller
// applies exactly what it returns; the CLI prints it.
//
// # Precedence
//
// Lowest first: Karpenter's default < Baseline < profile < class. Baseline-only fields
// are never overridden.
//
// # Merge rules
//
// Every row is field by field, never branch by branch:
//
//	role / instanceProfile, subnetSelectorTerms, securityGroupSelectorTerms,
//	metadataOptions, associatePublicIPAddress, capacity-reservation and placement
//	selectors          Baseline only; the class type has no such field.
//	amiSelectorTerms   the class may replace them as a whole, together with amiFamily.
//	blockDeviceMappings merged by deviceName, and field by field inside ebs.
//	tags               key by key; Baseline keys are mandatory: a class value that
//	                   differs is a BaselineConflict naming the key.
//	kubelet            key by key (objects such as evictionHard key by key too); the class
//	                   wins; validated with Karpenter's ValidateKubeletConfig.
//	userData           from the Baseline; a class may set it only when the Baseline has none.
//	detailedMonitoring, instanceStorePolicy   the class may set them.
//	NodePool labels / annotations   key by key; Baseline keys are mandatory, like tags.
//	taints, startupTaints           union by (key, effect); the later layer's value wins.
//	disruption, expireAfter, terminationGracePeriod   per field, by precedence; budgets
//	                   are replaced as a whole by the highest layer that sets them.
//	rebalance          per field: class, else Baseline, else Poolsmith's default
//	                   (settings.go; not written to any object, see Settings).
//
// # Settings
//
// Besides objects, the renderer resolves the settings Poolsmith acts on itself (Settings:
// spec.rebalance, spec.access as enforced), each with its origin, through the same pick
// as every field. Result.Settings carries them; Resolve gives them without rendering the
// objects (the rebalance controller's need). Inputs are what a class is rendered from;
// internal/observe's Source.Assemble gathers them for the controller and the CLI.
//
// # Ladder
//
// Rungs nest capacity types (outermost), then architectures, then families (consistency
// Family) or instance types (Type), each in the class's preference order. Each rung pins
// its slice with In requirements so no node can match two rungs of one class. Names are a
// stable function of the class name and the slice; Static weights are ceiling,
// ceiling-1, ... in ladder order.
//
// # Access
//
// Every class renders an AccessRule named after it (poolsmith.dev/v1alpha1): its access
// rule, resolved scheduling taints and rungs. It is the parameter of the two admission
// policies the chart installs once (AdmissionPolicies): poolsmith-access refuses pods and
// workload pod templates of other namespaces that could land on a restricted class, and
// poolsmith-default gives pods of namespaces labelled poolsmith.dev/default-class=<class>
// the class's nodeSelector and tolerations (access.go). The manager writes no admission
// policy. Options.Capabilities.NoAccessPolicies leaves the AccessRule out.
package render
