package migrate

import (
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Small local types for API versions current Karpenter no longer ships, written from
// Karpenter's documentation of those versions. Only the spec is read.

// provisionerSpec is karpenter.sh/v1alpha5 Provisioner's spec.
type provisionerSpec struct {
	Annotations            map[string]string                `json:"annotations,omitempty"`
	Labels                 map[string]string                `json:"labels,omitempty"`
	Taints                 []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                   `json:"startupTaints,omitempty"`
	Requirements           []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	KubeletConfiguration   map[string]apiextensionsv1.JSON  `json:"kubeletConfiguration,omitempty"`
	Provider               *awsNodeTemplateSpec             `json:"provider,omitempty"`
	ProviderRef            *providerRef                     `json:"providerRef,omitempty"`
	TTLSecondsAfterEmpty   *int64                           `json:"ttlSecondsAfterEmpty,omitempty"`
	TTLSecondsUntilExpired *int64                           `json:"ttlSecondsUntilExpired,omitempty"`
	Limits                 *struct {
		Resources corev1.ResourceList `json:"resources,omitempty"`
	} `json:"limits,omitempty"`
	Weight        *int32 `json:"weight,omitempty"`
	Consolidation *struct {
		Enabled *bool `json:"enabled,omitempty"`
	} `json:"consolidation,omitempty"`
}

type providerRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

// awsNodeTemplateSpec is karpenter.k8s.aws/v1alpha1 AWSNodeTemplate's spec, which is also
// the shape of a v1alpha5 Provisioner's inline provider.
type awsNodeTemplateSpec struct {
	SubnetSelector        map[string]string           `json:"subnetSelector,omitempty"`
	SecurityGroupSelector map[string]string           `json:"securityGroupSelector,omitempty"`
	InstanceProfile       *string                     `json:"instanceProfile,omitempty"`
	AMIFamily             *string                     `json:"amiFamily,omitempty"`
	AMISelector           map[string]string           `json:"amiSelector,omitempty"`
	UserData              *string                     `json:"userData,omitempty"`
	Tags                  map[string]string           `json:"tags,omitempty"`
	MetadataOptions       *awsv1.MetadataOptions      `json:"metadataOptions,omitempty"`
	BlockDeviceMappings   []*awsv1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	DetailedMonitoring    *bool                       `json:"detailedMonitoring,omitempty"`
	LaunchTemplateName    *string                     `json:"launchTemplate,omitempty"`
	Context               *string                     `json:"context,omitempty"`
}

// nodePoolV1beta1Spec is karpenter.sh/v1beta1 NodePool's spec.
type nodePoolV1beta1Spec struct {
	Template struct {
		Metadata struct {
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata,omitempty"`
		Spec struct {
			NodeClassRef  *providerRef                                  `json:"nodeClassRef,omitempty"`
			Taints        []corev1.Taint                                `json:"taints,omitempty"`
			StartupTaints []corev1.Taint                                `json:"startupTaints,omitempty"`
			Requirements  []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
			Kubelet       map[string]apiextensionsv1.JSON               `json:"kubelet,omitempty"`
		} `json:"spec"`
	} `json:"template"`
	Disruption *struct {
		ConsolidationPolicy string          `json:"consolidationPolicy,omitempty"`
		ConsolidateAfter    *string         `json:"consolidateAfter,omitempty"`
		ExpireAfter         *string         `json:"expireAfter,omitempty"`
		Budgets             []karpv1.Budget `json:"budgets,omitempty"`
	} `json:"disruption,omitempty"`
	Limits corev1.ResourceList `json:"limits,omitempty"`
	Weight *int32              `json:"weight,omitempty"`
}
