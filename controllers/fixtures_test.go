package controllers_test

import (
	"fmt"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

func newBaseline(name string) *v1alpha1.Baseline {
	return &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BaselineSpec{NodeClass: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			Tags:                       map[string]string{"cost-center": "1234"},
		}},
	}
}

// newClass is a General class on baseline with spot and on-demand amd64 rungs.
func newClass(name, baseline string, mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	wc := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.WorkloadClassSpec{
			BaselineRef:   &v1alpha1.BaselineReference{Name: baseline},
			Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
		},
	}
	for _, m := range mutate {
		m(wc)
	}
	return wc
}

func create(objs ...client.Object) {
	for _, o := range objs {
		ExpectWithOffset(1, env.Client.Create(ctx, o)).To(Succeed())
	}
}

// updateClass writes wc's spec and labels, retrying on the conflicts the controller's
// status writes cause between a test's read and its write.
func updateClass(wc *v1alpha1.WorkloadClass) {
	spec, labels := wc.Spec.DeepCopy(), wc.Labels
	ExpectWithOffset(1, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := env.Client.Update(ctx, wc)
		if apierrors.IsConflict(err) {
			if gerr := env.Client.Get(ctx, client.ObjectKeyFromObject(wc), wc); gerr != nil {
				return gerr
			}
			wc.Spec, wc.Labels = *spec.DeepCopy(), labels
		}
		return err
	})).To(Succeed())
}

func get[T client.Object](obj T, name string) T {
	ExpectWithOffset(1, env.Client.Get(ctx, client.ObjectKey{Name: name}, obj)).To(Succeed())
	return obj
}

// condition returns the class's condition of type typ, or nil.
func condition(name, typ string) func() *metav1.Condition {
	return func() *metav1.Condition {
		wc := &v1alpha1.WorkloadClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
			return nil
		}
		return meta.FindStatusCondition(wc.Status.Conditions, typ)
	}
}

// haveCondition matches a condition's status and reason.
func haveCondition(s metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(c *metav1.Condition) string { return string(c.Status) + "/" + c.Reason }, Equal(string(s)+"/"+reason)))
}

func waitSynced(name string) *v1alpha1.WorkloadClass {
	EventuallyWithOffset(1, condition(name, v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonApplied))
	wc := &v1alpha1.WorkloadClass{}
	EventuallyWithOffset(1, func() int64 {
		_ = env.Client.Get(ctx, client.ObjectKey{Name: name}, wc)
		return wc.Status.ObservedGeneration - wc.Generation
	}).Should(BeZero())
	return wc
}

func nodePoolNames(class string) func() []string {
	return func() []string {
		list := &karpv1.NodePoolList{}
		Expect(env.Client.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: class})).To(Succeed())
		var names []string
		for _, np := range list.Items {
			names = append(names, np.Name)
		}
		return names
	}
}

func exists(obj client.Object, name string) func() bool {
	return func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Name: name}, obj) == nil
	}
}

// setKarpenterConditions writes status conditions the way Karpenter does.
func setKarpenterConditions(obj interface {
	client.Object
	SetConditions([]status.Condition)
}, conds ...status.Condition) {
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		conds[i].ObservedGeneration = obj.GetGeneration()
		if conds[i].Reason == "" {
			conds[i].Reason = conds[i].Type
		}
	}
	obj.SetConditions(conds)
	ExpectWithOffset(1, env.Client.Status().Update(ctx, obj)).To(Succeed())
}

func ready(s metav1.ConditionStatus, msg string) status.Condition {
	return status.Condition{Type: status.ConditionReady, Status: s, Message: msg}
}

func cpu(n int) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resourceQuantity(fmt.Sprint(n))}
}

// newNodeClaim is a NodeClaim the way Karpenter launches it from rung pool of class: with
// the labels it inherits from the rung's template.
func newNodeClaim(class, pool string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: pool + "-",
			Labels:       map[string]string{karpv1.NodePoolLabelKey: pool, v1alpha1.LabelClass: class, v1alpha1.LabelRung: pool},
		},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		},
	}
}

// foreignNodePool is a hand-written NodePool, as another team would write it: Poolsmith
// must never take it over.
func foreignNodePool(name, arch string, labels map[string]string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}},
				ExpireAfter:  karpv1.MustParseNillableDuration("720h"),
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("0s"), ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized},
		},
	}
}
