package render_test

import (
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// baseline is a production-like Baseline: role, subnet and security-group selectors, an
// encrypted root volume, mandatory tags and labels.
func baseline(mutate ...func(*v1alpha1.Baseline)) *v1alpha1.Baseline {
	b := &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineSpec{
			NodeClass: awsv1.EC2NodeClassSpec{
				Role:             "KarpenterNodeRole-prod",
				AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				SubnetSelectorTerms: []awsv1.SubnetSelectorTerm{
					{Tags: map[string]string{"karpenter.sh/discovery": "prod", "network/tier": "private"}},
				},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
				MetadataOptions:            &awsv1.MetadataOptions{HTTPTokens: ptr.To("required"), HTTPPutResponseHopLimit: ptr.To[int64](2)},
				BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{
					DeviceName: ptr.To("/dev/xvda"),
					RootVolume: true,
					EBS: &awsv1.BlockDevice{
						VolumeSize: ptr.To(resource.MustParse("50Gi")),
						VolumeType: ptr.To("gp3"),
						Encrypted:  ptr.To(true),
						KMSKeyID:   ptr.To("arn:aws:kms:us-east-1:111122223333:key/prod"),
					},
				}},
				Tags: map[string]string{"cost-center": "1234", "team": "platform"},
			},
			NodePool: v1alpha1.NodePoolDefaults{
				Labels:      v1alpha1.NodeLabels{"example.com/environment": "prod"},
				ExpireAfter: ptr.To(karpv1.MustParseNillableDuration("720h")),
				Disruption: &v1alpha1.Disruption{
					ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
					ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("1m")),
				},
			},
		},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

// class is a WorkloadClass named name with the given profile.
func class(name string, profile v1alpha1.Profile, mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	wc := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.WorkloadClassSpec{Profile: profile},
	}
	for _, m := range mutate {
		m(wc)
	}
	return wc
}

func withNodeClass(mutate func(*v1alpha1.NodeClassOverrides)) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		if wc.Spec.NodeClass == nil {
			wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{}
		}
		mutate(wc.Spec.NodeClass)
	}
}

func withCapacityTypes(cts ...v1alpha1.CapacityType) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) { wc.Spec.CapacityTypes = cts }
}

func withArchitectures(archs ...v1alpha1.Architecture) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) { wc.Spec.Architectures = archs }
}

func withFamilies(consistency v1alpha1.Consistency, families ...string) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Consistency = consistency
		if wc.Spec.Instances == nil {
			wc.Spec.Instances = &v1alpha1.InstanceShape{}
		}
		wc.Spec.Instances.Families = families
	}
}

func withTypes(types ...string) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Consistency = v1alpha1.ConsistencyType
		if wc.Spec.Instances == nil {
			wc.Spec.Instances = &v1alpha1.InstanceShape{}
		}
		wc.Spec.Instances.Types = types
	}
}

func taint(key, value string, effect corev1.TaintEffect) v1alpha1.Taint {
	return v1alpha1.Taint{Key: key, Value: value, Effect: effect}
}
