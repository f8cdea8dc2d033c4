package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// The chain that makes placeholders, each link as kube-controller-manager makes it.
func replicaSetOf(d *appsv1.Deployment, ns string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name + "-5d8f7c", Labels: d.Spec.Template.Labels},
		Spec:       appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: *d.Spec.Template.DeepCopy()},
	}
}

func podOf(d *appsv1.Deployment, ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name + "-5d8f7c-x2x9q", Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
}

// copyOf is d's spec under another name in ns, as a user would write it.
func copyOf(d *appsv1.Deployment, ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *d.Spec.DeepCopy()}
}

// The suite's manager writes as render.DefaultHeadroomWriters.Manager (startManager), the
// identity the policies testenv installs exempt in the headroom namespace.
var _ = Describe("Headroom of a class with spec.access, judged by the API server", Ordered, func() {
	// open is a class any namespace may default to.
	const class, open, allowed, tenant = "hr-acc", "hr-acc-open", "hr-ml", "hr-web"
	h := render.DefaultHeadroomWriters
	var placeholders *appsv1.Deployment
	var admins = []string{"system:masters"}
	// alice may write workloads in the headroom namespace and in her own: RBAC is additive,
	// and a ClusterRoleBinding of edit would grant as much; only the policies stand in her way.
	const alice = "alice"

	BeforeAll(func() {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: h.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		// The chart installs the PriorityClass the placeholders run at; the Priority admission
		// plugin refuses a pod naming one that does not exist.
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-headroom"}, Value: -10, PreemptionPolicy: ptr.To(corev1.PreemptNever)}
		if err := env.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		namespace(allowed, nil)
		namespace(tenant, nil)
		// What edit grants on workloads (edit itself is aggregated by a controller that does
		// not run here).
		create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hr-workloads"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "update"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"create", "update"}},
		}})
		for _, ns := range []string{h.Namespace, tenant} {
			create(&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-edit"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hr-workloads"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alice}},
			})
		}
		create(newBaseline("hr-acc-base"))
		create(newClass(open, "hr-acc-base"))
		create(newClass(class, "hr-acc-base", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: class, Effect: corev1.TaintEffectNoSchedule}}
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{allowed}}
			wc.Spec.Headroom = &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}, Mechanism: v1alpha1.HeadroomPods}
		}))
		Eventually(condition(class, v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced))
		// The API server loads policies through an informer: wait until it enforces this one.
		Eventually(func() error {
			return admit(pod(tenant, "probe", podSpec(class, dedicated(class))))
		}).Should(MatchError(ContainSubstring("could run on WorkloadClass " + class)))
	})

	// Other specs count the restricted classes a pod could land on.
	AfterAll(func() {
		for _, name := range []string{class, open} {
			Expect(env.Client.Delete(ctx, get(&v1alpha1.WorkloadClass{}, name))).To(Succeed())
			Eventually(exists(&v1alpha1.AccessRule{}, name)).Should(BeFalse())
		}
	})

	It("(a) writes the placeholders of a restricted class: the manager's Deployment, its ReplicaSet and pods are admitted, and the pods can run on the rung", func() {
		waitSynced(class)
		Eventually(headroomDeployment(class)).ShouldNot(BeNil())
		placeholders = headroomDeployment(class)()
		Expect(*placeholders.Spec.Replicas).To(Equal(int32(2)))

		rs := replicaSetOf(placeholders, h.Namespace)
		Expect(admitAs(render.DeploymentController, rs)).To(Succeed())
		p := podOf(placeholders, h.Namespace)
		Expect(admitAs(render.ReplicaSetController, p)).To(Succeed())

		// What was admitted can run where it is pinned: the rung's NodePool exists and
		// every NoSchedule and NoExecute taint of it, the access taint among them, is
		// tolerated.
		pool := p.Spec.NodeSelector[karpv1.NodePoolLabelKey]
		np := &karpv1.NodePool{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: pool}, np)).To(Succeed())
		Expect(np.Spec.Template.Spec.Taints).To(ContainElement(HaveField("Key", v1alpha1.TaintAccess)))
		for _, taint := range np.Spec.Template.Spec.Taints {
			tolerated := false
			for _, t := range p.Spec.Tolerations {
				tolerated = tolerated || t.ToleratesTaint(klog.Background(), &taint, false)
			}
			Expect(tolerated).To(BeTrue(), "taint %v of %s", taint, pool)
		}
	})

	It("(a) leaves placeholders alone when the headroom namespace is labelled with a default class", func() {
		waitSynced(open)
		for _, ns := range []string{h.Namespace, allowed} {
			n := &corev1.Namespace{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[v1alpha1.LabelDefaultClass] = open
			Expect(env.Client.Update(ctx, n)).To(Succeed())
		}
		DeferCleanup(func() {
			n := &corev1.Namespace{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: h.Namespace}, n)).To(Succeed())
			delete(n.Labels, v1alpha1.LabelDefaultClass)
			Expect(env.Client.Update(ctx, n)).To(Succeed())
		})
		// The same label on another namespace defaults a bare pod: the policy is live.
		Eventually(func() map[string]string {
			bare := pod(allowed, "bare", podSpec(""))
			_ = admit(bare)
			return bare.Spec.NodeSelector
		}).Should(HaveKeyWithValue(v1alpha1.LabelClass, open))
		bare := pod(h.Namespace, "bare", podSpec(""))
		Expect(admit(bare)).To(Succeed())
		Expect(bare.Spec.NodeSelector).To(BeEmpty(), "the defaults policy rewrote a pod in the headroom namespace")
	})

	It("(b) judges anyone else writing in the headroom namespace: a cluster admin's or alice's copy, her ReplicaSet and pod, and her edit of the manager's Deployment", func() {
		refused := MatchError(ContainSubstring("in namespace " + h.Namespace + " could run on WorkloadClass " + class))
		Expect(admit(copyOf(placeholders, h.Namespace, "admins-copy"))).To(refused)
		Expect(writeAs(alice, nil, copyOf(placeholders, h.Namespace, "alices-copy"), false)).To(refused)
		Expect(writeAs(alice, nil, replicaSetOf(placeholders, h.Namespace), false)).To(refused)
		Expect(writeAs(alice, nil, podOf(placeholders, h.Namespace), false)).To(refused)
		edited := headroomDeployment(class)()
		edited.Spec.Template.Spec.Containers[0].Args = []string{"--mine"}
		Expect(writeAs(alice, nil, edited, true)).To(refused)
		// alice is refused by the policy, not by RBAC: a pod that cannot land on the class is admitted.
		Expect(writeAs(alice, nil, pod(h.Namespace, "harmless", podSpec("")), false)).To(Succeed())
	})

	It("(c) grants no exemption outside the headroom namespace, nor to another kind: a tenant's workload is judged at every link", func() {
		refused := MatchError(ContainSubstring("in namespace " + tenant + " could run on WorkloadClass " + class))
		Expect(writeAs(alice, nil, copyOf(placeholders, tenant, "mine"), false)).To(refused)
		// Were her Deployment admitted earlier (before the class was restricted), the
		// controllers' copies of it in her namespace are judged all the same.
		Expect(admitAs(render.DeploymentController, replicaSetOf(placeholders, tenant))).To(refused)
		Expect(admitAs(render.ReplicaSetController, podOf(placeholders, tenant))).To(refused)
		// The manager's identity is exempt for Deployments in the headroom namespace only.
		Expect(writeAs(h.Manager, admins, copyOf(placeholders, tenant, "managers"), false)).To(refused)
		Expect(writeAs(h.Manager, admins, podOf(placeholders, h.Namespace), false)).To(MatchError(ContainSubstring("could run on WorkloadClass " + class)))
		Expect(writeAs(h.Manager, admins, replicaSetOf(placeholders, h.Namespace), false)).To(MatchError(ContainSubstring("could run on WorkloadClass " + class)))
		// The class's own namespace may: the rule still admits what it should.
		Expect(writeAs(h.Manager, admins, copyOf(placeholders, allowed, "ml-copy"), false)).To(Succeed())
	})

	It("(d) admits the manager's PodTemplate (the CapacityBuffer's unit) in the headroom namespace only, and judges anyone else's", func() {
		template := func(ns, name string) *corev1.PodTemplate {
			return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Template: *placeholders.Spec.Template.DeepCopy()}
		}
		Expect(writeAs(h.Manager, admins, template(h.Namespace, class+"-headroom"), false)).To(Succeed())
		Expect(admit(template(h.Namespace, "admins-template"))).To(MatchError(ContainSubstring("in namespace " + h.Namespace + " could run on WorkloadClass " + class)))
		Expect(writeAs(h.Manager, admins, template(tenant, "managers-template"), false)).To(MatchError(ContainSubstring("in namespace " + tenant + " could run on WorkloadClass " + class)))
	})
})
