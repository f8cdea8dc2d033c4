//go:build e2e

package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/fakekubelet"
)

// Issue #22, finding 1: a pod that names a restricted class's node (spec.nodeName) skips
// the scheduler, and no admission policy can read the Node it names. The class's NoExecute
// access taint, which the kubelet enforces, is what keeps it off; the access policy judges
// who may tolerate it.
var _ = Describe("Placement by name on a restricted class", func() {
	It("runs a pod that names the class's node only if its namespace may use the class", func() {
		const class, allowed, outside = "e2e-access", "e2e-access-ml", "e2e-access-web"
		// No namespace controller runs here to delete a namespace, nor a ServiceAccount
		// controller to give it its default account: both are made by hand and left.
		for ns, labels := range map[string]map[string]string{allowed: {v1alpha1.LabelDefaultClass: class}, outside: nil} {
			Expect(cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})).To(Succeed())
			Expect(client.IgnoreAlreadyExists(cluster.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))).To(Succeed())
		}
		dedicated := corev1.Taint{Key: "example.com/dedicated", Value: class, Effect: corev1.TaintEffectNoSchedule}
		access := corev1.Taint{Key: v1alpha1.TaintAccess, Value: class, Effect: corev1.TaintEffectNoExecute}
		tolerate := func(t corev1.Taint) corev1.Toleration {
			return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect}
		}
		create(workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64}
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Taints = v1alpha1.Taints{{Key: dedicated.Key, Value: dedicated.Value, Effect: dedicated.Effect}}
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{allowed}}
		}))
		expectClassReady(class)

		By("a workload of the allowed namespace gets the class a node, which carries the access taint")
		labels := map[string]string{labelApp: class}
		create(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: class, Namespace: allowed},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector:                  map[string]string{labelClass: class},
						Tolerations:                   []corev1.Toleration{tolerate(dedicated), tolerate(access)},
						TerminationGracePeriodSeconds: ptr.To[int64](0),
						AutomountServiceAccountToken:  ptr.To(false),
						Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						}}},
					},
				},
			},
		})
		var node string
		Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(cluster.Client.List(ctx, list, client.InNamespace(allowed), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			g.Expect(list.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			node = list.Items[0].Spec.NodeName
		}).WithTimeout(4 * time.Minute).Should(Succeed())
		n := &corev1.Node{}
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		Expect(n.Spec.Taints).To(ContainElements(dedicated, access))
		Expect(n.Labels).To(HaveKeyWithValue(labelClass, class))

		named := func(ns, name string, tolerations ...corev1.Toleration) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{
					NodeName:                      node,
					Tolerations:                   tolerations,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					AutomountServiceAccountToken:  ptr.To(false),
					Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			}
		}
		phase := func(p *corev1.Pod) func() string {
			return func() string {
				live := &corev1.Pod{}
				if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), live); apierrors.IsNotFound(err) {
					return "gone"
				} else if err != nil {
					return err.Error()
				}
				if live.Status.Reason != "" {
					return string(live.Status.Phase) + " " + live.Status.Reason
				}
				return string(live.Status.Phase)
			}
		}

		By("a pod of another namespace that names the node with no toleration is admitted, and the kubelet refuses it")
		intruder := named(outside, "by-name")
		create(intruder)
		// The kubelet reports it Failed; the taint-eviction controller may delete it first.
		var outcome string
		Eventually(func() string { outcome = phase(intruder)(); return outcome }).
			WithPolling(100 * time.Millisecond).Should(BeElementOf(string(corev1.PodFailed)+" "+fakekubelet.ReasonTaintToleration, "gone"))
		Consistently(phase(intruder)).WithTimeout(5 * time.Second).ShouldNot(HavePrefix(string(corev1.PodRunning)))
		AddReportEntry("pod named the node from outside", outcome)

		By("a pod of the allowed namespace that names the node gets the class's tolerations from the namespace default, and runs")
		member := named(allowed, "by-name")
		create(member)
		Expect(member.Spec.Tolerations).To(ContainElements(tolerate(dedicated), tolerate(access)))
		Expect(member.Spec.NodeSelector).To(BeEmpty())
		Eventually(phase(member)).Should(Equal(string(corev1.PodRunning)))
		Consistently(phase(member)).WithTimeout(5 * time.Second).Should(Equal(string(corev1.PodRunning)))

		By("a pod of another namespace that names the node and tolerates the access taint is refused by the API server")
		err := cluster.Client.Create(ctx, named(outside, "tolerates", tolerate(access)))
		Expect(err).To(MatchError(ContainSubstring("Pod tolerates in namespace " + outside + " could run on WorkloadClass " + class)))
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	})
})
