package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/render"
)

// validClass is a WorkloadClass that sets most fields; every invalid row breaks one rule.
func validClass() *v1alpha1.WorkloadClass {
	return &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.WorkloadClassSpec{
			BaselineRef:   &v1alpha1.BaselineReference{Name: "default"},
			Profile:       v1alpha1.ProfileGeneral,
			Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved},
			Zones:         []string{"us-east-1a", "us-west-2-lax-1a"},
			Instances: &v1alpha1.InstanceShape{
				Categories:      []string{"c", "m"},
				Families:        []string{"m7g", "m7i"},
				ExcludeFamilies: []string{"t3"},
				MinGeneration:   ptr.To[int32](6),
				CPU:             &v1alpha1.IntRange{Min: ptr.To[int32](2), Max: ptr.To[int32](16)},
				Memory:          &v1alpha1.QuantityRange{Min: ptr.To(resource.MustParse("4Gi")), Max: ptr.To(resource.MustParse("64Gi"))},
			},
			Consistency: v1alpha1.ConsistencyFamily,
			Labels:      v1alpha1.NodeLabels{"example.com/team": "web", "tier": "frontend"},
			Taints:      v1alpha1.Taints{{Key: "example.com/dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			Limits:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
			Disruption: &v1alpha1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
				ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("5m")),
			},
			ExpireAfter:         ptr.To(karpv1.MustParseNillableDuration("168h")),
			FallbackExpireAfter: ptr.To(karpv1.MustParseNillableDuration("24h")),
			Weighting:           &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic, Ceiling: ptr.To[int32](80)},
			PrunePolicy:         v1alpha1.PruneRetire,
			Rebalance: &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred, MaxInterruption: "5-10%",
				After: &metav1.Duration{Duration: 30 * time.Minute}, MaxConcurrent: ptr.To(intstr.FromString("25%")),
				QuietPeriod: &metav1.Duration{Duration: time.Hour}},
			Access: &v1alpha1.Access{
				Namespaces: []string{"web", "web-staging"},
				NamespaceSelector: &v1alpha1.NamespaceSelector{
					MatchLabels:      map[string]string{"example.com/team": "web"},
					MatchExpressions: []v1alpha1.NamespaceSelectorRequirement{{Key: "example.com/tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}},
				},
			},
			NodeClass: &v1alpha1.NodeClassOverrides{
				AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
				Tags:             v1alpha1.Tags{"workload": "web"},
			},
			Headroom: &v1alpha1.Headroom{
				PodShape:   &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi")), ExtendedResources: map[string]string{"aws.amazon.com/neuron": "1"}},
				Replicas:   ptr.To[int32](2),
				Percentage: ptr.To[int32](20),
				Limits:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
				Schedule: []v1alpha1.HeadroomWindow{
					{Start: "0 8 * * 1-5", Duration: metav1.Duration{Duration: 10 * time.Hour}, TimeZone: "Europe/Paris"},
					{Start: "0 0 29 2 *", Duration: metav1.Duration{Duration: time.Hour}},
				},
				Rung:      &v1alpha1.RungSelector{CapacityType: v1alpha1.CapacityTypeOnDemand, Arch: v1alpha1.ArchitectureARM64, Slice: "m7g"},
				Mechanism: v1alpha1.HeadroomPods,
			},
		},
	}
}

// validBaseline is the Baseline sample's shape, built in Go.
func validBaseline() *v1alpha1.Baseline {
	return &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineSpec{
			NodeClass: awsv1.EC2NodeClassSpec{
				Role:                       "KarpenterNodeRole-prod",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
				Tags:                       map[string]string{"cost-center": "1234"},
			},
			NodePool: v1alpha1.NodePoolDefaults{
				Labels:      v1alpha1.NodeLabels{"example.com/environment": "prod"},
				ExpireAfter: ptr.To(karpv1.MustParseNillableDuration("720h")),
			},
			Commitments: validCommitments(),
		},
	}
}

// validCommitments sets every commitment field; its plans run from a month ago to eleven
// months ahead, so the create-time expiry policy admits them whenever the test runs.
func validCommitments() *v1alpha1.Commitments {
	start := metav1.NewTime(time.Now().Add(-30 * 24 * time.Hour).Truncate(time.Second))
	end := metav1.NewTime(start.Add(365 * 24 * time.Hour))
	return &v1alpha1.Commitments{
		SavingsPlans: []v1alpha1.SavingsPlan{
			{ID: "sp-0a1b2c3d", Type: v1alpha1.SavingsPlanEC2Instance, Commitment: "3.00", Family: "m7g", Region: "us-east-1",
				Discount: &v1alpha1.Discount{Default: "27.5%", Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: "31%"}}},
				Start:    &start, End: &end, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}},
			{ID: "sp-compute", Type: v1alpha1.SavingsPlanCompute, Commitment: "12.50", Share: v1alpha1.CommitmentShare{Hourly: "4.00"}},
			{ID: "sp-from-signals", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](100)}},
		},
		ReservedInstances: []v1alpha1.ReservedInstance{
			{ID: "b847fa93-e282-4f55-b59a-1342fexample", InstanceType: "m7g.large", Count: ptr.To[int32](10), Scope: v1alpha1.RIScopeRegion,
				EffectiveHourly: "0.0646", Start: &start, End: &end, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](50)}},
			{ID: "ri-zonal", InstanceType: "c7g.xlarge", Count: ptr.To[int32](2), Scope: v1alpha1.RIScopeZone, Zone: "us-east-1a",
				Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](100)}},
		},
		Allocations: []v1alpha1.CommitmentAllocation{
			{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTeam: "api"}}, Percent: 50},
			{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTeam: "web"}}, Percent: 30},
		},
	}
}

func dryRunCreate(obj client.Object) error {
	return env.Client.Create(ctx, obj, client.DryRunAll)
}

var _ = Describe("Samples", func() {
	It("accepts every manifest in config/samples", func() {
		root, err := testenv.ModuleDir("")
		Expect(err).NotTo(HaveOccurred())
		files, err := filepath.Glob(filepath.Join(root, "config", "samples", "poolsmith_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 5))
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			for _, doc := range strings.Split(string(data), "\n---\n") {
				u := &unstructured.Unstructured{}
				Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), f)
				if len(u.Object) == 0 {
					continue
				}
				Expect(dryRunCreate(u)).To(Succeed(), f)
			}
		}
	})

	It("accepts the largest bounds the renderer holds exactly", func() {
		wc := validClass()
		wc.Spec.Instances.Memory = &v1alpha1.QuantityRange{Min: ptr.To(resource.MustParse("4194305Gi")), Max: ptr.To(resource.MustParse("10Ei"))}
		wc.Spec.Instances.CPU = &v1alpha1.IntRange{Min: ptr.To[int32](1), Max: ptr.To[int32](2147483647)}
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: "Lt", Values: []string{"999999999999999999"}}}
		Expect(dryRunCreate(wc)).To(Succeed())
	})

	It("accepts the fixture objects every invalid row starts from", func() {
		Expect(dryRunCreate(validClass())).To(Succeed())
		Expect(dryRunCreate(validBaseline())).To(Succeed())
	})
})

var _ = DescribeTable("rejects an invalid WorkloadClass, naming the field",
	func(mutate func(*v1alpha1.WorkloadClass), field, message string) {
		wc := validClass()
		mutate(wc)
		err := dryRunCreate(wc)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(field))
		Expect(err.Error()).To(ContainSubstring(message))
	},
	Entry("unknown profile", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Profile = "Batch" },
		"spec.profile", `supported values: "General", "BurstableCI", "GPU", "MemoryOptimized"`),
	Entry("unknown architecture", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Architectures = []v1alpha1.Architecture{"x86"} },
		"spec.architectures[0]", `supported values: "arm64", "amd64"`),
	Entry("duplicate architecture", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureARM64}
	}, "spec.architectures[1]", "Duplicate value"),
	Entry("unknown capacity type", func(wc *v1alpha1.WorkloadClass) { wc.Spec.CapacityTypes = []v1alpha1.CapacityType{"preemptible"} },
		"spec.capacityTypes[0]", `supported values: "spot", "on-demand", "reserved"`),
	Entry("duplicate capacity type", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeSpot}
	}, "spec.capacityTypes[1]", "Duplicate value"),
	Entry("invalid zone", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Zones = []string{"US_EAST_1A"} },
		"spec.zones[0]", "should match"),
	Entry("cpu min above max", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.CPU = &v1alpha1.IntRange{Min: ptr.To[int32](32), Max: ptr.To[int32](4)}
	}, "spec.instances.cpu", "min must be less than or equal to max"),
	Entry("memory min above max", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.Memory = &v1alpha1.QuantityRange{Min: ptr.To(resource.MustParse("64Gi")), Max: ptr.To(resource.MustParse("8Gi"))}
	}, "spec.instances.memory", "min must be less than or equal to max"),
	Entry("generation below 1", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.MinGeneration = ptr.To[int32](0) },
		"spec.instances.minGeneration", "should be greater than or equal to 1"),
	Entry("family both wanted and excluded", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.ExcludeFamilies = []string{"m7i"} },
		"spec.instances", "instances.families and instances.excludeFamilies must not name the same family"),
	Entry("invalid instance type", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.Types = []string{"m7g"} },
		"spec.instances.types[0]", "should match"),
	Entry("unknown consistency", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Consistency = "Random" },
		"spec.consistency", `supported values: "Diverse", "Family", "Type"`),
	Entry("label key syntax", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels["bad key!"] = "x" },
		"spec.labels", "label keys must be qualified names"),
	Entry("label value syntax", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels["example.com/team"] = strings.Repeat("v", 64) },
		"spec.labels", "label values must be at most 63 characters"),
	Entry("label in Poolsmith's domain", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels[v1alpha1.LabelClass] = "other" },
		"spec.labels", "the poolsmith.dev label domain is reserved"),
	Entry("label in Karpenter's domain", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels["karpenter.sh/capacity-type"] = "spot" },
		"spec.labels", "the karpenter.sh label domain is restricted by Karpenter"),
	Entry("label in Karpenter AWS's domain", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels["karpenter.k8s.aws/instance-family"] = "m7g" },
		"spec.labels", "the karpenter.k8s.aws label domain is restricted by Karpenter"),
	Entry("well-known scheduling label", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Labels["kubernetes.io/arch"] = "arm64" },
		"spec.labels", "well-known scheduling labels are set by each rung's requirements"),
	Entry("taint key syntax", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Taints[0].Key = "-bad" },
		"spec.taints[0].key", "taint keys must be qualified names"),
	Entry("taint effect", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Taints[0].Effect = "Sometimes" },
		"spec.taints[0].effect", `supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`),
	Entry("duplicate taint", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Taints = append(wc.Spec.Taints, wc.Spec.Taints[0]) },
		"spec.taints[1]", "Duplicate value"),
	Entry("startup taint effect", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.StartupTaints = v1alpha1.Taints{{Key: "example.com/init", Effect: "Later"}}
	}, "spec.startupTaints[0].effect", "supported values"),
	Entry("reserved tag key", func(wc *v1alpha1.WorkloadClass) { wc.Spec.NodeClass.Tags["kubernetes.io/cluster/prod"] = "owned" },
		"spec.nodeClass.tags", "are reserved by Karpenter"),
	Entry("amiFamily without amiSelectorTerms", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.NodeClass.AMISelectorTerms = nil
		wc.Spec.NodeClass.AMIFamily = ptr.To("AL2023")
	}, "spec.nodeClass", "nodeClass.amiFamily may only be set together with nodeClass.amiSelectorTerms"),
	Entry("alias combined with other AMI terms", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.NodeClass.AMISelectorTerms = append(wc.Spec.NodeClass.AMISelectorTerms, awsv1.AMISelectorTerm{ID: "ami-0123456789abcdef0"})
	}, "spec.nodeClass.amiSelectorTerms", "'alias' is mutually exclusive"),
	Entry("weight ceiling above 100", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Weighting.Ceiling = ptr.To[int32](101) },
		"spec.weighting.ceiling", "should be less than or equal to 100"),
	Entry("unknown weighting strategy", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Weighting.Strategy = "Random" },
		"spec.weighting.strategy", `supported values: "Static", "Cost", "RiskAdjustedCost"`),
	Entry("unknown prune policy", func(wc *v1alpha1.WorkloadClass) { wc.Spec.PrunePolicy = "Keep" },
		"spec.prunePolicy", `supported values: "Delete", "Retire", "Orphan"`),
	Entry("malformed expireAfter", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.ExpireAfter = ptr.To(karpv1.NillableDuration{Raw: []byte(`"5 days"`)})
	}, "spec.expireAfter", "should match"),
	Entry("expireAfter longer than a Go duration holds", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.ExpireAfter = ptr.To(karpv1.NillableDuration{Raw: []byte(`"2562048h"`)})
	}, "spec.expireAfter", "must be a duration of at most 2562047h"),
	Entry("fallbackExpireAfter longer than a Go duration holds", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.FallbackExpireAfter = ptr.To(karpv1.NillableDuration{Raw: []byte(`"99999999h"`)})
	}, "spec.fallbackExpireAfter", "must be a duration of at most 2562047h"),
	Entry("consolidateAfter longer than a Go duration holds", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Disruption.ConsolidateAfter = ptr.To(karpv1.NillableDuration{Raw: []byte(`"99999999h"`)})
	}, "spec.disruption.consolidateAfter", "must be a duration of at most 2562047h"),
	Entry("unknown consolidation policy", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Disruption.ConsolidationPolicy = "Always" },
		"spec.disruption.consolidationPolicy", "supported values"),
	Entry("budget schedule without duration", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: ptr.To("@daily")}}
	}, "spec.disruption.budgets", "each budget must set schedule and duration together"),
	Entry("Custom profile without architectures", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Profile = v1alpha1.ProfileCustom
		wc.Spec.Architectures = nil
	}, "spec", "profile Custom has no defaults: spec.architectures and spec.capacityTypes are required"),
	Entry("extra requirement on a ladder axis", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}
	}, "spec.requirements", "capacity types and architectures are the ladder's axes"),
	Entry("name longer than 63 characters", func(wc *v1alpha1.WorkloadClass) { wc.Name = strings.Repeat("a", 64) },
		"metadata.name", "metadata.name must be at most 63 characters"),
	Entry("negative memory min", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.Memory = &v1alpha1.QuantityRange{Min: ptr.To(resource.MustParse("-8Gi"))}
	}, "spec.instances.memory.min", "must not be negative"),
	Entry("negative memory max", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.Memory = &v1alpha1.QuantityRange{Max: ptr.To(resource.MustParse("-1"))}
	}, "spec.instances.memory.max", "must not be negative"),
	Entry("negative limit", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("-5") },
		"spec.limits", "limits must not be negative"),
	Entry("negative pod shape cpu", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting.PodShape = &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("-500m"))}
	}, "spec.weighting.podShape.cpu", "must be positive"),
	Entry("zero pod shape cpu", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting.PodShape = &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("0"))}
	}, "spec.weighting.podShape.cpu", "must be positive"),
	Entry("zero pod shape memory", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting.PodShape = &v1alpha1.PodShape{Memory: ptr.To(resource.MustParse("0Gi"))}
	}, "spec.weighting.podShape.memory", "must be positive"),
	Entry("family ending in '-'", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.Families = []string{"m7-"} },
		"spec.instances.families[0]", "should match"),
	Entry("excluded family ending in '-'", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.ExcludeFamilies = []string{"t3-"} },
		"spec.instances.excludeFamilies[0]", "should match"),
	Entry("instance type ending in '-'", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.Types = []string{"m7g.xlarge-"} },
		"spec.instances.types[0]", "should match"),
	Entry("GPU name ending in '-'", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Instances.GPU = &v1alpha1.GPUShape{Names: []string{"t4-"}} },
		"spec.instances.gpu.names[0]", "should match"),
	Entry("requirement Gt a negative number", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: "Gt", Values: []string{"-1"}}}
	},
		"spec.requirements[0]: Invalid value", "must have a single non-negative integer value"),
	Entry("requirement Lt a word", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: "Lt", Values: []string{"abc"}}}
	},
		"spec.requirements[0]: Invalid value", "must have a single non-negative integer value"),
	Entry("requirement Gt two values", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: "Gt", Values: []string{"2", "4"}}}
	},
		"spec.requirements[0]: Invalid value", "must have a single non-negative integer value"),
	Entry("requirement In no value", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-hypervisor", Operator: "In", Values: []string{}}}
	},
		"spec.requirements[0]: Invalid value", "requirements with operator 'In' must have a value defined"),
	Entry("requirement on karpenter.sh/nodepool", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.sh/nodepool", Operator: "In", Values: []string{"x"}}}
	},
		"spec.requirements[0].key", "requirement keys karpenter.sh/nodepool and kubernetes.io/hostname are restricted by Karpenter"),
	Entry("requirement in Karpenter's domain", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.sh/foo", Operator: "In", Values: []string{"x"}}}
	},
		"spec.requirements[0].key", `label domain "karpenter.sh" is restricted by Karpenter`),
	Entry("requirement in Karpenter AWS's domain", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/foo", Operator: "In", Values: []string{"x"}}}
	},
		"spec.requirements[0].key", `label domain "karpenter.k8s.aws" is restricted by Karpenter`),
	Entry("requirement key not a qualified name", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "-bad", Operator: "Exists", Values: nil}}
	},
		"spec.requirements[0].key", "requirement keys must be qualified names"),
	Entry("requirement value not a label value", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "example.com/rack", Operator: "In", Values: []string{"bad value!"}}}
	},
		"spec.requirements[0].values[0]", "should match"),
	Entry("access with neither namespaces nor a selector", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Access = &v1alpha1.Access{} },
		"spec.access", "access needs namespaces, a namespaceSelector, or both"),
	Entry("access with an empty selector", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml"}, NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	},
		"spec.access.namespaceSelector", "an empty namespaceSelector would admit every namespace"),
	Entry("access namespace not a namespace name", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Access.Namespaces = []string{"Web_Team"} },
		"spec.access.namespaces[0]", "should match"),
	Entry("access namespace listed twice", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Access.Namespaces = []string{"web", "web"} },
		"spec.access.namespaces[1]", "Duplicate value"),
	Entry("access selector operator unknown", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchExpressions[0].Operator = "Matches"
	}, "spec.access.namespaceSelector.matchExpressions[0].operator", `supported values: "In", "NotIn", "Exists", "DoesNotExist"`),
	Entry("access selector In without values", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchExpressions[0].Values = nil
	}, "spec.access.namespaceSelector", "In and NotIn need values; Exists and DoesNotExist take none"),
	Entry("access selector Exists with values", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchExpressions[0].Operator = metav1.LabelSelectorOpExists
	}, "spec.access.namespaceSelector", "In and NotIn need values; Exists and DoesNotExist take none"),
	Entry("access selector label key syntax", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchLabels = map[string]string{"bad key!": "x"}
	}, "spec.access.namespaceSelector.matchLabels", "label keys must be qualified names"),
	Entry("access selector label value too long", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchLabels = map[string]string{"team": strings.Repeat("v", 64)}
	}, "spec.access.namespaceSelector.matchLabels", "label values must be at most 63 characters"),
	Entry("access selector expression key syntax", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Access.NamespaceSelector.MatchExpressions[0].Key = "-bad"
	}, "spec.access.namespaceSelector.matchExpressions[0].key", "label keys must be qualified names"),
	Entry("unknown rebalance policy", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.Policy = "Always" },
		"spec.rebalance.policy", `supported values: "Off", "Preferred"`),
	Entry("unknown interruption bucket", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.MaxInterruption = "12%" },
		"spec.rebalance.maxInterruption", `supported values: "<5%", "5-10%", "10-15%", "15-20%", ">20%"`),
	Entry("rebalance maxConcurrent zero", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.MaxConcurrent = ptr.To(intstr.FromInt32(0)) },
		"spec.rebalance.maxConcurrent", "must be a number from 1 to 2147483647 or a percentage from 1% to 100%"),
	Entry("rebalance maxConcurrent above 100%", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.MaxConcurrent = ptr.To(intstr.FromString("150%")) },
		"spec.rebalance.maxConcurrent", "must be a number from 1 to 2147483647 or a percentage from 1% to 100%"),
	Entry("rebalance maxConcurrent neither number nor percentage", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.MaxConcurrent = ptr.To(intstr.FromString("two")) },
		"spec.rebalance.maxConcurrent", "must be a number from 1 to 2147483647 or a percentage from 1% to 100%"),
	Entry("rebalance quietPeriod zero", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Rebalance.QuietPeriod = &metav1.Duration{} },
		"spec.rebalance.quietPeriod", "must be a positive duration"),
	Entry("headroom percentage 0", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Percentage = ptr.To[int32](0) },
		"spec.headroom.percentage", "should be greater than or equal to 1"),
	Entry("headroom percentage 150", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Percentage = ptr.To[int32](150) },
		"spec.headroom.percentage", "should be less than or equal to 100"),
	Entry("headroom replicas above 1000", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Replicas = ptr.To[int32](1001) },
		"spec.headroom.replicas", "should be less than or equal to 1000"),
	Entry("headroom cron with four fields", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule[0].Start = "0 8 * *" },
		"spec.headroom.schedule[0].start", "start: five cron fields"),
	Entry("headroom cron macro", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule[0].Start = "@daily" },
		"spec.headroom.schedule[0].start", "start: five cron fields"),
	Entry("headroom window on Feb 31", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule[0].Start = "0 9 31 2 *" },
		"spec.headroom.schedule[0].start", "start: this day of month never occurs in those months"),
	Entry("headroom window on the 31st of short months", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule[0].Start = "0 9 31 4,6 *" },
		"spec.headroom.schedule[0].start", "start: this day of month never occurs in those months"),
	Entry("headroom window in an unknown time zone", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Schedule[0].TimeZone = "Mars/Olympus" },
		"spec.headroom.schedule[0].timeZone", "timeZone: not an IANA time zone"),
	Entry("headroom window longer than a week", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom.Schedule[0].Duration = metav1.Duration{Duration: 169 * time.Hour}
	}, "spec.headroom.schedule[0].duration", "duration: 1m..168h"),
	Entry("headroom unit more GPUs than instances.gpu.count.max", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.GPU = &v1alpha1.GPUShape{Count: &v1alpha1.IntRange{Max: ptr.To[int32](1)}}
		wc.Spec.Headroom.PodShape.GPU = ptr.To[int32](2)
	}, "spec.headroom.podShape.gpu", "headroom.podShape.gpu must be at most instances.gpu.count.max"),
	Entry("headroom unit larger than any instance type", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances.CPU = nil
		wc.Spec.Headroom.PodShape.CPU = ptr.To(resource.MustParse("897"))
	}, "spec.headroom.podShape.cpu", "must be at most 896"),
	Entry("headroom unit of zero memory", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.PodShape.Memory = ptr.To(resource.MustParse("0")) },
		"spec.headroom.podShape.memory", "must be positive"),
	Entry("headroom unit with no resource", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.PodShape = &v1alpha1.HeadroomPodShape{} },
		"spec.headroom.podShape", "podShape needs a resource"),
	Entry("headroom extended resource named nvidia.com/gpu", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom.PodShape.ExtendedResources = map[string]string{"nvidia.com/gpu": "1"}
	}, "spec.headroom.podShape.extendedResources", "qualified names with a domain, other than nvidia.com/gpu"),
	Entry("headroom extended resource of half a unit", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom.PodShape.ExtendedResources = map[string]string{"aws.amazon.com/neuron": "500m"}
	}, "spec.headroom.podShape.extendedResources", "values must be positive integers"),
	Entry("headroom limit of zero", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Headroom.Limits[corev1.ResourceCPU] = resource.MustParse("0")
	},
		"spec.headroom.limits", "limits: every quantity must be positive"),
	Entry("headroom mechanism unknown", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Mechanism = "Off" },
		"spec.headroom.mechanism", `supported values: "Auto", "CapacityBuffer", "Pods"`),
	Entry("headroom rung of an unknown capacity type", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom.Rung.CapacityType = "preemptible" },
		"spec.headroom.rung.capacityType", "supported values"),
	Entry("requirement minValues above its values", func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "example.com/rack", Operator: "In", Values: []string{"a"}, MinValues: ptr.To(2)}}
	}, "spec.requirements[0]: Invalid value", "requirements with 'minValues' must have at least that many values"),
)

var _ = DescribeTable("rejects an invalid Baseline, naming the field",
	func(mutate func(*v1alpha1.Baseline), field, message string) {
		b := validBaseline()
		mutate(b)
		err := dryRunCreate(b)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(field))
		Expect(err.Error()).To(ContainSubstring(message))
	},
	Entry("both role and instanceProfile", func(b *v1alpha1.Baseline) { b.Spec.NodeClass.InstanceProfile = ptr.To("KarpenterNodeInstanceProfile") },
		"spec.nodeClass", "nodeClass must set exactly one of role or instanceProfile"),
	Entry("neither role nor instanceProfile", func(b *v1alpha1.Baseline) { b.Spec.NodeClass.Role = "" },
		"spec.nodeClass", "nodeClass must set exactly one of role or instanceProfile"),
	Entry("AMI selection without alias or amiFamily", func(b *v1alpha1.Baseline) {
		b.Spec.NodeClass.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
	}, "spec.nodeClass", "nodeClass.amiFamily is required when no amiSelectorTerm is an alias"),
	Entry("restricted tag (Karpenter's own rule)", func(b *v1alpha1.Baseline) { b.Spec.NodeClass.Tags["karpenter.sh/nodepool"] = "x" },
		"spec.nodeClass.tags", "tag contains a restricted tag matching karpenter.sh/nodepool"),
	Entry("rebalance default with an unknown policy", func(b *v1alpha1.Baseline) {
		b.Spec.Rebalance = &v1alpha1.Rebalance{Policy: "On"}
	}, "spec.rebalance.policy", `supported values: "Off", "Preferred"`),
	Entry("headroom default with percentage 150", func(b *v1alpha1.Baseline) {
		b.Spec.Headroom = &v1alpha1.Headroom{Percentage: ptr.To[int32](150)}
	}, "spec.headroom.percentage", "should be less than or equal to 100"),
	Entry("no subnet selector (Karpenter's own rule)", func(b *v1alpha1.Baseline) { b.Spec.NodeClass.SubnetSelectorTerms = nil },
		"spec.nodeClass.subnetSelectorTerms", "Required value"),
	Entry("node label in Karpenter's domain", func(b *v1alpha1.Baseline) { b.Spec.NodePool.Labels["karpenter.sh/nodepool"] = "x" },
		"spec.nodePool.labels", "the karpenter.sh label domain is restricted by Karpenter"),
	Entry("startup taint effect", func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.StartupTaints = v1alpha1.Taints{{Key: "example.com/init", Effect: "Soon"}}
	}, "spec.nodePool.startupTaints[0].effect", "supported values"),
	Entry("malformed consolidateAfter", func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.Disruption = &v1alpha1.Disruption{ConsolidateAfter: ptr.To(karpv1.NillableDuration{Raw: []byte(`"soon"`)})}
	}, "spec.nodePool.disruption.consolidateAfter", "should match"),
	Entry("negative commitment", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Commitment = "-1" },
		"spec.commitments.savingsPlans[0].commitment", "commitment: US dollars per hour, more than 0 and at most 5000"),
	Entry("zero commitment", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Commitment = "0.00" },
		"spec.commitments.savingsPlans[0].commitment", "commitment: US dollars per hour, more than 0 and at most 5000"),
	Entry("commitment above AWS's largest", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Commitment = "5000.01" },
		"spec.commitments.savingsPlans[1].commitment", "commitment: US dollars per hour, more than 0 and at most 5000"),
	Entry("discount of 100%", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Discount.Default = "100%" },
		"spec.commitments.savingsPlans[0].discount.default", "default: a percentage from 0% to 99.99%"),
	Entry("negative discount", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Discount.Default = "-5%" },
		"spec.commitments.savingsPlans[0].discount.default", "default: a percentage from 0% to 99.99%"),
	Entry("family discount above 100%", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Discount.Families[0].Discount = "120%" },
		"spec.commitments.savingsPlans[0].discount.families[0].discount", "discount: a percentage from 0% to 99.99%"),
	Entry("unknown family", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Family = "m9z" },
		"spec.commitments.savingsPlans[0].family", "family: m9z is not an instance family Poolsmith's catalog knows"),
	Entry("unknown family in the discounts", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans[0].Discount.Families = append(b.Spec.Commitments.SavingsPlans[0].Discount.Families, v1alpha1.FamilyDiscount{Family: "m9z", Discount: "20%"})
	}, "spec.commitments.savingsPlans[0].discount.families[1].family", "family: m9z is not an instance family Poolsmith's catalog knows"),
	Entry("Reserved Instance of an unknown family", func(b *v1alpha1.Baseline) { b.Spec.Commitments.ReservedInstances[0].InstanceType = "m9z.large" },
		"spec.commitments.reservedInstances[0].instanceType", "instanceType: m9z.large is not of an instance family Poolsmith's catalog knows"),
	Entry("EC2Instance plan without a family", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Family = "" },
		"spec.commitments.savingsPlans[0].family", "family: an EC2Instance plan names its instance family"),
	Entry("Compute plan with a family", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Family = "m7g" },
		"spec.commitments.savingsPlans[1].family", "family: only an EC2Instance plan has one"),
	Entry("end before start", func(b *v1alpha1.Baseline) {
		sp := &b.Spec.Commitments.SavingsPlans[0]
		sp.End = ptr.To(metav1.NewTime(sp.Start.Add(-time.Hour)))
	}, "spec.commitments.savingsPlans[0].end", "end: must be after start"),
	Entry("a four-year term", func(b *v1alpha1.Baseline) {
		sp := &b.Spec.Commitments.SavingsPlans[0]
		sp.End = ptr.To(metav1.NewTime(sp.Start.Add(4 * 365 * 24 * time.Hour)))
	}, "spec.commitments.savingsPlans[0].end", "end: a plan's term is at most 3 years"),
	Entry("share of 0%", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Share.Percent = ptr.To[int32](0) },
		"spec.commitments.savingsPlans[0].share.percent", "should be greater than or equal to 1"),
	Entry("share of 101%", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[0].Share.Percent = ptr.To[int32](101) },
		"spec.commitments.savingsPlans[0].share.percent", "should be less than or equal to 100"),
	Entry("negative hourly share", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Share.Hourly = "-4" },
		"spec.commitments.savingsPlans[1].share.hourly", "hourly: US dollars per hour, more than 0"),
	Entry("hourly share above the commitment", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Share.Hourly = "20" },
		"spec.commitments.savingsPlans[1].share.hourly", "share.hourly: more than the plan's commitment"),
	Entry("share both hourly and percent", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Share.Percent = ptr.To[int32](10) },
		"spec.commitments.savingsPlans[1].share", "share: exactly one of hourly and percent"),
	Entry("Reserved Instance share in dollars", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.ReservedInstances[0].Share = v1alpha1.CommitmentShare{Hourly: "1.00"}
	}, "spec.commitments.reservedInstances[0].share", "share: a Reserved Instance's share is a percent of its normalized units"),
	Entry("zonal Reserved Instance without a zone", func(b *v1alpha1.Baseline) { b.Spec.Commitments.ReservedInstances[1].Zone = "" },
		"spec.commitments.reservedInstances[1].zone", "zone: a zonal Reserved Instance names its zone"),
	Entry("negative effectiveHourly", func(b *v1alpha1.Baseline) { b.Spec.Commitments.ReservedInstances[0].EffectiveHourly = "-0.06" },
		"spec.commitments.reservedInstances[0].effectiveHourly", "effectiveHourly: US dollars per hour, more than 0"),
	Entry("unknown Savings Plan type", func(b *v1alpha1.Baseline) { b.Spec.Commitments.SavingsPlans[1].Type = "Database" },
		"spec.commitments.savingsPlans[1].type", `supported values: "Compute", "EC2Instance"`),
	Entry("allocations over 100%", func(b *v1alpha1.Baseline) { b.Spec.Commitments.Allocations[1].Percent = 60 },
		"spec.commitments.allocations", "allocations: percents add up to more than 100"),
)

// An entry naming only its id and share takes its facts from the signals' commitments.json
// (docs/commitments.md): the API server admits it, and still refuses a bad figure in it.
var _ = DescribeTable("Baseline commitments naming only id and share",
	func(mutate func(*v1alpha1.Baseline), field, message string) {
		b := validBaseline()
		b.Spec.Commitments = &v1alpha1.Commitments{}
		mutate(b)
		err := dryRunCreate(b)
		if field == "" {
			Expect(err).NotTo(HaveOccurred())
			return
		}
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(field))
		Expect(err.Error()).To(ContainSubstring(message))
	},
	Entry("a Savings Plan with a percent share is admitted", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}}}
	}, "", ""),
	Entry("a Savings Plan with an hourly share is admitted (no commitment to bound it)", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Share: v1alpha1.CommitmentShare{Hourly: "1.20"}}}
	}, "", ""),
	Entry("a Reserved Instance is admitted", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.ReservedInstances = []v1alpha1.ReservedInstance{{ID: "b847fa93-e282-4f55-b59a-1342fexample", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](50)}}}
	}, "", ""),
	Entry("one fact given beside them is admitted (the export completes the rest)", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Discount: &v1alpha1.Discount{Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: "31%"}}},
			Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}}}
	}, "", ""),
	Entry("a share of 0% is still refused", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](0)}}}
	}, "spec.commitments.savingsPlans[0].share.percent", "should be greater than or equal to 1"),
	Entry("no share is still refused", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d"}}
	}, "spec.commitments.savingsPlans[0].share", "share: exactly one of hourly and percent"),
	Entry("a Reserved Instance's share in dollars is still refused", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.ReservedInstances = []v1alpha1.ReservedInstance{{ID: "ri-1", Share: v1alpha1.CommitmentShare{Hourly: "1.00"}}}
	}, "spec.commitments.reservedInstances[0].share", "share: a Reserved Instance's share is a percent of its normalized units"),
	Entry("a family alone (no type) is still refused", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "sp-0a1b2c3d", Family: "m7g", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}}}
	}, "spec.commitments.savingsPlans[0].family", "family: only an EC2Instance plan has one"),
	Entry("an end before its start is still refused", func(b *v1alpha1.Baseline) {
		start := metav1.NewTime(time.Now().Add(-24 * time.Hour).Truncate(time.Second))
		b.Spec.Commitments.ReservedInstances = []v1alpha1.ReservedInstance{{ID: "ri-1", Start: &start, End: ptr.To(metav1.NewTime(start.Add(-time.Hour))),
			Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](50)}}}
	}, "spec.commitments.reservedInstances[0].end", "end: must be after start"),
	Entry("a malformed id is still refused", func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = []v1alpha1.SavingsPlan{{ID: "SP_1", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)}}}
	}, "spec.commitments.savingsPlans[0].id", "should match"),
)

var _ = Describe("Commitments", func() {
	// The API server enforces a new policy a moment after it is created, and awaiting it
	// at start would cost every suite: each refusal is awaited here instead.
	refused := func(b *v1alpha1.Baseline) func(g Gomega) {
		return func(g Gomega) {
			err := dryRunCreate(b)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(render.CommitmentsPolicyName))
		}
	}
	It("refuse a Baseline created with an expired plan, naming it", func() {
		b := validBaseline()
		sp := &b.Spec.Commitments.SavingsPlans[0]
		sp.Start, sp.End = ptr.To(metav1.NewTime(time.Now().Add(-400*24*time.Hour))), ptr.To(metav1.NewTime(time.Now().Add(-35*24*time.Hour)))
		Eventually(refused(b)).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(dryRunCreate(b).Error()).To(ContainSubstring("spec.commitments.savingsPlans[sp-0a1b2c3d].end: " + sp.End.UTC().Format(time.RFC3339) + " is past (a Baseline may not be created with an expired commitment)"))
	})
	It("refuse a Baseline created with a Reserved Instance that ended a minute ago", func() {
		b := validBaseline()
		b.Spec.Commitments.ReservedInstances[1].End = ptr.To(metav1.NewTime(time.Now().Add(-time.Minute)))
		Eventually(refused(b)).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(dryRunCreate(b).Error()).To(ContainSubstring("spec.commitments.reservedInstances[ri-zonal].end: "))
	})
	It("admit an update that adds an expired plan: CEL has no clock but the create time", func() {
		expired := validBaseline()
		expired.Spec.Commitments.SavingsPlans[0].End = ptr.To(metav1.NewTime(time.Now().Add(-time.Hour)))
		Eventually(refused(expired)).WithTimeout(30 * time.Second).Should(Succeed()) // the policy is in force
		b := validBaseline()
		b.Name = "commitments-update"
		Expect(env.Client.Create(ctx, b)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, b))).To(Succeed()) })
		b.Spec.Commitments.SavingsPlans[0].End = ptr.To(metav1.NewTime(time.Now().Add(-time.Hour)))
		Expect(env.Client.Update(ctx, b)).To(Succeed())
	})
})
