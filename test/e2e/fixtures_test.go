//go:build e2e

package e2e_test

import (
	"fmt"
	"sort"
	"strings"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

const (
	labelRung  = v1alpha1.LabelRung
	labelClass = v1alpha1.LabelClass
	labelApp   = "app"
	namespace  = "default"
)

// baseline is a test Baseline: the seeded subnets and security group (unless discovery
// names other tags), maxPods 110 (what simulate assumes, instead of ENI-based limits) and
// no consolidation (a profile's consolidation outranks it: a scenario that needs none on a
// General class sets the class's own consolidateAfter: Never).
func baseline(name, discovery string) *v1alpha1.Baseline {
	selector := map[string]string{"karpenter.sh/discovery": discovery}
	return &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BaselineSpec{
			NodeClass: awsv1.EC2NodeClassSpec{
				Role:                       "KarpenterNodeRole-e2e",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: selector}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: selector}},
				Kubelet:                    awsv1.KubeletConfiguration{"maxPods": {Raw: []byte("110")}},
				Tags:                       map[string]string{"team": "platform"},
			},
			NodePool: v1alpha1.NodePoolDefaults{
				ExpireAfter:            ptr.To(karpv1.MustParseNillableDuration("720h")),
				TerminationGracePeriod: &metav1.Duration{Duration: 300e9},
				Disruption: &v1alpha1.Disruption{
					ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
					ConsolidateAfter:    ptr.To(karpv1.MustParseNillableDuration("Never")),
					Budgets:             []karpv1.Budget{{Nodes: "100%"}},
				},
			},
		},
	}
}

// workloadClass is a test class on Baseline "e2e": arm64 before amd64, spot before
// on-demand, c and m families of generation 6 or later, static weights from 100.
func workloadClass(name string, mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	wc := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.WorkloadClassSpec{
			BaselineRef:   &v1alpha1.BaselineReference{Name: "e2e"},
			Profile:       v1alpha1.ProfileGeneral,
			Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64},
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
			Instances:     &v1alpha1.InstanceShape{Categories: []string{"c", "m"}, MinGeneration: ptr.To[int32](6)},
			Weighting:     &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic},
		},
	}
	for _, m := range mutate {
		m(wc)
	}
	return wc
}

// deployment is a workload of replicas pods that select the class and request cpu each.
func deployment(name, class string, replicas int32, cpu string) *appsv1.Deployment {
	labels := map[string]string{labelApp: name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{labelClass: class},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")},
					}}},
				},
			},
		},
	}
}

// create creates objects and deletes them when the scenario ends, waiting for each to be
// gone (a class is gone once Karpenter has drained its nodes).
func create(objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(cluster.Client.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
	DeferCleanup(func() {
		for i := len(objs) - 1; i >= 0; i-- {
			remove(objs[i])
		}
	})
}

// remove deletes an object and waits until it is gone.
func remove(o client.Object) {
	GinkgoHelper()
	Expect(client.IgnoreNotFound(cluster.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationForeground)))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(cluster.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
	}).WithTimeout(4*time.Minute).Should(BeTrue(), "%T %s is not gone", o, o.GetName())
}

// update applies mutate to the live object, retrying on conflicts.
func update[T client.Object](o T, mutate func(T)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate(o)
		return cluster.Client.Update(ctx, o)
	})).To(Succeed())
}

// classCondition returns the class's condition of type typ, for Eventually.
func classCondition(name, typ string) func(g Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		wc := &v1alpha1.WorkloadClass{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, wc)).To(Succeed())
		c := meta.FindStatusCondition(wc.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "class %s has no %s condition", name, typ)
		g.Expect(c.ObservedGeneration).To(Equal(wc.Generation), "class %s's %s condition is for an older generation", name, typ)
		return c
	}
}

// expectClassReady waits for the class to be Ready=True AllReady, which Poolsmith says
// only when Karpenter reports its EC2NodeClass and every NodePool Ready.
func expectClassReady(name string) {
	GinkgoHelper()
	Eventually(classCondition(name, v1alpha1.ConditionReady)).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonAllReady)))
}

// nodeClaims lists the class's NodeClaims that are not being deleted.
func nodeClaims(class string) []karpv1.NodeClaim {
	GinkgoHelper()
	list := &karpv1.NodeClaimList{}
	Expect(cluster.Client.List(ctx, list, client.MatchingLabels{labelClass: class})).To(Succeed())
	var out []karpv1.NodeClaim
	for _, nc := range list.Items {
		if nc.DeletionTimestamp.IsZero() {
			out = append(out, nc)
		}
	}
	return out
}

// allNodeClaims lists the class's NodeClaims, including those being deleted.
func allNodeClaims(class string) []karpv1.NodeClaim {
	GinkgoHelper()
	list := &karpv1.NodeClaimList{}
	Expect(cluster.Client.List(ctx, list, client.MatchingLabels{labelClass: class})).To(Succeed())
	return list.Items
}

// pods lists the pods of an app.
func pods(app string) []corev1.Pod {
	GinkgoHelper()
	list := &corev1.PodList{}
	Expect(cluster.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{labelApp: app})).To(Succeed())
	return list.Items
}

// expectRunning waits until n pods of the app run on nodes, and returns the pods.
func expectRunning(app string, n int) []corev1.Pod {
	GinkgoHelper()
	var running []corev1.Pod
	Eventually(func(g Gomega) {
		running = nil
		for _, p := range pods(app) {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
				running = append(running, p)
			}
		}
		g.Expect(running).To(HaveLen(n), "running pods of %s", app)
	}).Should(Succeed())
	return running
}

// rungsOf counts the class's live NodeClaims by rung.
func rungsOf(claims []karpv1.NodeClaim) map[string]int {
	out := map[string]int{}
	for _, nc := range claims {
		out[nc.Labels[labelRung]]++
	}
	return out
}

// describe summarises NodeClaims for failure messages and reports.
func describe(claims []karpv1.NodeClaim) string {
	var lines []string
	for _, nc := range claims {
		lines = append(lines, fmt.Sprintf("%s rung=%s type=%s zone=%s capacity=%s", nc.Name, nc.Labels[labelRung],
			nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.CapacityTypeLabelKey]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// disruptions reads Karpenter's karpenter_nodeclaims_disrupted_total for a reason and a
// NodePool from the metrics registry of the process that runs Karpenter.
func disruptions(reason, nodePool string) float64 {
	GinkgoHelper()
	return cluster.disruptions(reason, nodePool)
}
