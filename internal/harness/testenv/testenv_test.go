package testenv_test

import (
	"context"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
)

var (
	ctx = context.Background()
	env *testenv.Env
)

func TestHarness(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Test harness: a real control plane with Karpenter's CRDs")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func nodeClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "harness"},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
}

func nodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "harness"},
		Spec: karpv1.NodePoolSpec{
			Weight: ptr.To[int32](10),
			Template: karpv1.NodeClaimTemplate{
				Spec: karpv1.NodeClaimTemplateSpec{
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "harness"},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
						{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m"}},
					},
					ExpireAfter: karpv1.MustParseNillableDuration("720h"),
				},
			},
			Disruption: karpv1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter:    karpv1.MustParseNillableDuration("1m"),
				Budgets:             []karpv1.Budget{{Nodes: "10%"}},
			},
		},
	}
}

var _ = Describe("Karpenter's CRDs", func() {
	It("accept a NodePool and an EC2NodeClass built with Karpenter's Go types", func() {
		nc, np := nodeClass(), nodePool()
		Expect(env.Client.Create(ctx, nc)).To(Succeed())
		Expect(env.Client.Create(ctx, np)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, np))).To(Succeed())
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, nc))).To(Succeed())
		})

		got := &karpv1.NodePool{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(np), got)).To(Succeed())
		Expect(got.Spec.Template.Spec.ExpireAfter.String()).To(Equal("720h0m0s"))
		Expect(*got.Spec.Weight).To(BeNumerically("==", 10))
	})

	It("enforce Karpenter's CEL rules (the NodePool rejects a restricted label)", func() {
		np := nodePool()
		np.Spec.Template.Labels = map[string]string{"karpenter.sh/custom": "x"}
		err := env.Client.Create(ctx, np, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring(`label domain "karpenter.sh" is restricted`)))
	})

	It("carry the AWS provider's label rules (only its copy of the NodePool CRD has them)", func() {
		np := nodePool()
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/not-a-label", Operator: corev1.NodeSelectorOpExists})
		err := env.Client.Create(ctx, np, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring(`label domain "karpenter.k8s.aws" is restricted`)))
	})

	It("enforce the EC2NodeClass's rules (exactly one of role and instanceProfile)", func() {
		nc := nodeClass()
		nc.Spec.InstanceProfile = ptr.To("profile")
		err := env.Client.Create(ctx, nc, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("must specify exactly one of ['role', 'instanceProfile']")))
	})
})
