package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// namespace creates a namespace with labels and the default ServiceAccount the
// ServiceAccount admission plugin looks for (no controller-manager runs here to make it).
func namespace(name string, labels map[string]string) {
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}})
}

// podSpec selects class (when not empty) and carries tolerations.
func podSpec(class string, tolerations ...corev1.Toleration) corev1.PodSpec {
	spec := corev1.PodSpec{
		Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		Tolerations:                  tolerations,
		AutomountServiceAccountToken: ptr.To(false),
	}
	if class != "" {
		spec.NodeSelector = map[string]string{v1alpha1.LabelClass: class}
	}
	return spec
}

func pod(ns, name string, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// admit asks the API server to create obj without storing it: admission, policies
// included, runs in full and obj is filled with what would be stored.
func admit(obj client.Object) error { return env.Client.Create(ctx, obj, client.DryRunAll) }

// admitAs is admit as the service account user (impersonated).
func admitAs(user string, obj client.Object) error {
	return writeAs(user, []string{"system:serviceaccounts"}, obj, false)
}

// writeAs dry-runs a create (or, with update, an update) of obj as user, impersonated with
// groups: admission, policies included, runs in full and nothing is stored.
func writeAs(user string, groups []string, obj client.Object, update bool) error {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return err
	}
	if update {
		return c.Update(ctx, obj, client.DryRunAll)
	}
	return c.Create(ctx, obj, client.DryRunAll)
}

var (
	gpuTaint    = corev1.Toleration{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu-access", Effect: corev1.TaintEffectNoSchedule}
	nvidiaTaint = corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
)

var _ = Describe("Access rules and namespace defaults, enforced by the API server", Ordered, func() {
	const class = "gpu-access"
	var refusal string

	BeforeAll(func() {
		create(newBaseline("access"))
		namespace("ml", map[string]string{v1alpha1.LabelDefaultClass: class})
		namespace("web", nil)
		create(newClass(class, "access", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Profile = v1alpha1.ProfileGPU
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: class, Effect: corev1.TaintEffectNoSchedule}}
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml"}}
		}))
		// An open class a pod in ml may choose instead of its default.
		create(newClass("cpu-open", "access"))
		waitSynced(class)
		waitSynced("cpu-open")
		Eventually(condition(class, v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced))
		// The API server loads policies through an informer: wait until it enforces this one.
		Eventually(func() error {
			return admit(pod("web", "probe", podSpec(class, gpuTaint, nvidiaTaint)))
		}).Should(HaveOccurred())
		refusal = admit(pod("web", "train", podSpec(class, gpuTaint, nvidiaTaint))).Error()
	})

	It("admits a pod of an allowed namespace that selects the class and tolerates its taints", func() {
		Expect(admit(pod("ml", "train", podSpec(class, gpuTaint, nvidiaTaint)))).To(Succeed())
	})

	It("refuses the same pod in another namespace, with a message naming the class and who may use it", func() {
		Expect(refusal).To(ContainSubstring("ValidatingAdmissionPolicy 'poolsmith-access'"))
		Expect(refusal).To(ContainSubstring("Pod train in namespace web could run on WorkloadClass gpu-access"))
		Expect(refusal).To(ContainSubstring("which may only be used from namespaces ml"))
	})

	It("refuses a pod that only tolerates the class's taints, and one that only selects a rung", func() {
		Expect(admit(pod("web", "tolerates", podSpec("", gpuTaint, nvidiaTaint)))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		// It could run on every restricted class: the refusal names whichever rule the API
		// server evaluates first, which depends on what the other specs left.
		Expect(admit(pod("web", "tolerates-all", podSpec("", corev1.Toleration{Operator: corev1.TolerationOpExists})))).To(MatchError(MatchRegexp("could run on WorkloadClass [a-z-]+ ")))
		rung := podSpec("")
		rung.NodeSelector = map[string]string{v1alpha1.LabelRung: class + "-spot-amd64"}
		Expect(admit(pod("web", "rung", rung))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
	})

	It("admits pods elsewhere that cannot land on the class: another class chosen, a taint not tolerated, the DaemonSet controller's, kube-system's", func() {
		elsewhere := podSpec("cpu-open", corev1.Toleration{Operator: corev1.TolerationOpExists})
		Expect(admit(pod("web", "elsewhere", elsewhere))).To(Succeed())
		Expect(admit(pod("web", "half", podSpec("", nvidiaTaint)))).To(Succeed())
		// The DaemonSet controller creates its pods as its own service account.
		Expect(admitAs(render.DaemonSetController, pod("web", "agent-x1", podSpec(class, corev1.Toleration{Operator: corev1.TolerationOpExists})))).To(Succeed())
		create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "kube-system"}})
		Expect(admit(pod("kube-system", "aws-node", podSpec("", corev1.Toleration{Operator: corev1.TolerationOpExists})))).To(Succeed())
	})

	It("refuses a bare pod whose forged controller ownerReference names a DaemonSet: owners are not evidence", func() {
		for _, apiVersion := range []string{"apps/v1", "bogus.example.com/v1"} {
			forged := pod("web", "forged", podSpec(class, corev1.Toleration{Operator: corev1.TolerationOpExists}))
			forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "DaemonSet", Name: "agent", UID: "0f0f0f0f-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
			Expect(admit(forged)).To(MatchError(ContainSubstring("Pod forged in namespace web could run on WorkloadClass gpu-access")), apiVersion)
		}
	})

	It("judges DaemonSet templates: one aimed at the class from outside is refused, a node agent that tolerates everything is admitted", func() {
		ds := func(name string, spec corev1.PodSpec) *appsv1.DaemonSet {
			return &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: spec},
				},
			}
		}
		everything := corev1.Toleration{Operator: corev1.TolerationOpExists}
		Expect(admit(ds("miner", podSpec(class, everything)))).To(MatchError(ContainSubstring("DaemonSet miner in namespace web could run on WorkloadClass gpu-access")))
		rung := podSpec("", everything)
		rung.NodeSelector = map[string]string{"karpenter.sh/nodepool": class + "-spot-amd64"}
		Expect(admit(ds("rung-miner", rung))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		// Tolerating the class's own taints by key aims at the class as surely as selecting it.
		Expect(admit(ds("keyed", podSpec("", gpuTaint, nvidiaTaint)))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		Expect(admit(ds("node-agent", podSpec("", everything)))).To(Succeed())
		inside := ds("miner", podSpec(class, everything))
		inside.Namespace = "ml"
		Expect(admit(inside)).To(Succeed())
	})

	It("judges ReplicationController and PodTemplate templates", func() {
		rc := &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "legacy"},
			Spec: corev1.ReplicationControllerSpec{
				Selector: map[string]string{"app": "legacy"},
				Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}}, Spec: podSpec(class, gpuTaint, nvidiaTaint)},
			},
		}
		Expect(admit(rc)).To(MatchError(ContainSubstring("ReplicationController legacy in namespace web could run on WorkloadClass gpu-access")))
		pt := &corev1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "tmpl"},
			Template:   corev1.PodTemplateSpec{Spec: podSpec(class, gpuTaint, nvidiaTaint)},
		}
		Expect(admit(pt)).To(MatchError(ContainSubstring("PodTemplate tmpl in namespace web could run on WorkloadClass gpu-access")))
		pt.Namespace = "ml"
		Expect(admit(pt)).To(Succeed())
	})

	It("refuses a Deployment whose pod template would land on the class, at creation", func() {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "trainer"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trainer"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "trainer"}}, Spec: podSpec(class, gpuTaint, nvidiaTaint)},
			},
		}
		Expect(admit(d)).To(MatchError(ContainSubstring("Deployment trainer in namespace web could run on WorkloadClass gpu-access")))
		d.Namespace = "ml"
		Expect(admit(d)).To(Succeed())
	})

	It("gives a pod of a default-class namespace that selects no class the class's nodeSelector and tolerations, keeping its own", func() {
		own := corev1.Toleration{Key: "example.com/own", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
		var p *corev1.Pod
		// The API server loads the defaults policy through an informer too.
		Eventually(func() map[string]string {
			p = pod("ml", "notebook", podSpec("", own))
			p.Spec.NodeSelector = map[string]string{"example.com/zone-pref": "a"}
			Expect(admit(p)).To(Succeed())
			return p.Spec.NodeSelector
		}).Should(HaveKey(v1alpha1.LabelClass))
		Expect(p.Spec.NodeSelector).To(Equal(map[string]string{"example.com/zone-pref": "a", v1alpha1.LabelClass: class}))
		Expect(p.Spec.Tolerations).To(ContainElements(own, nvidiaTaint, gpuTaint))

		bare := pod("ml", "bare", podSpec(""))
		Expect(admit(bare)).To(Succeed())
		Expect(bare.Spec.NodeSelector).To(Equal(map[string]string{v1alpha1.LabelClass: class}))
		Expect(bare.Spec.Tolerations).To(ContainElements(nvidiaTaint, gpuTaint))

		chose := pod("ml", "chose", podSpec("cpu-open"))
		Expect(admit(chose)).To(Succeed())
		Expect(chose.Spec.NodeSelector).To(Equal(map[string]string{v1alpha1.LabelClass: "cpu-open"}))
		Expect(chose.Spec.Tolerations).NotTo(ContainElement(gpuTaint))
	})

	It("judges a pod that names a node like any other: the class's nodes carry its NoExecute access taint, which the kubelet enforces and the policy refuses to let others tolerate", func() {
		access := corev1.Taint{Key: v1alpha1.TaintAccess, Value: class, Effect: corev1.TaintEffectNoExecute}
		for _, np := range nodePoolNames(class)() {
			Expect(get(&karpv1.NodePool{}, np).Spec.Template.Spec.Taints).To(ContainElement(access), np)
		}
		Expect(get(&v1alpha1.AccessRule{}, class).Spec.Taints).To(ContainElement(access))
		tolerateAccess := corev1.Toleration{Key: v1alpha1.TaintAccess, Operator: corev1.TolerationOpEqual, Value: class, Effect: corev1.TaintEffectNoExecute}
		named := func(ns, name string, tolerations ...corev1.Toleration) *corev1.Pod {
			p := pod(ns, name, podSpec("", tolerations...))
			p.Spec.NodeName = "ip-10-0-0-1.ec2.internal"
			return p
		}
		// A node's name says nothing to the policy: tolerating the class is refused from
		// outside, with every taint tolerated or only the one the kubelet checks.
		Expect(admit(named("web", "by-name", gpuTaint, nvidiaTaint, tolerateAccess))).To(MatchError(ContainSubstring("Pod by-name in namespace web could run on WorkloadClass gpu-access")))
		Expect(admit(named("web", "by-name-noexecute", tolerateAccess))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		Expect(admit(pod("web", "noexecute", podSpec("", tolerateAccess)))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		// Tolerating the class's other taints is refused too: nodes launched before the
		// access taint existed carry only those until drift replaces them.
		Expect(admit(named("web", "by-name-scheduling", gpuTaint, nvidiaTaint))).To(MatchError(ContainSubstring("could run on WorkloadClass gpu-access")))
		// Without a toleration it is admitted, and the kubelet refuses it on the class's nodes.
		Expect(admit(named("web", "by-name-bare"))).To(Succeed())
		// A default-class namespace's pod that names a node gets the class's tolerations, the
		// access taint's among them, and no nodeSelector the named node might not match.
		p := named("ml", "by-name-default")
		Expect(admit(p)).To(Succeed())
		Expect(p.Spec.Tolerations).To(ContainElements(gpuTaint, nvidiaTaint, tolerateAccess))
		Expect(p.Spec.NodeSelector).To(BeEmpty())
		// And an ordinary pod of ml gets the access toleration with the others.
		bare := pod("ml", "bare-access", podSpec(""))
		Expect(admit(bare)).To(Succeed())
		Expect(bare.Spec.Tolerations).To(ContainElement(tolerateAccess))
	})

	It("reports, on the class, a default-class namespace its access rule excludes", func() {
		namespace("sandbox", map[string]string{v1alpha1.LabelDefaultClass: class})
		Eventually(condition(class, v1alpha1.ConditionAccess)).Should(And(
			haveCondition(metav1.ConditionFalse, v1alpha1.ReasonDefaultExcluded),
			WithTransform(func(c *metav1.Condition) string { return c.Message }, ContainSubstring("namespaces sandbox name this class their default"))))
		// Its pods get no default: the class would refuse them.
		p := pod("sandbox", "bare", podSpec(""))
		Expect(admit(p)).To(Succeed())
		Expect(p.Spec.NodeSelector).To(BeEmpty())
	})

	It("takes a change of spec.access into effect without restarting anything", func() {
		wc := get(&v1alpha1.WorkloadClass{}, class)
		wc.Spec.Access.Namespaces = []string{"ml", "web", "sandbox"}
		updateClass(wc)
		Eventually(func() error { return admit(pod("web", "train", podSpec(class, gpuTaint, nvidiaTaint))) }).Should(Succeed())
		Eventually(condition(class, v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced))
		// Removing the rule leaves an AccessRule the access policy does not select; the
		// defaults policy still reads it.
		wc = get(&v1alpha1.WorkloadClass{}, class)
		wc.Spec.Access = nil
		updateClass(wc)
		Eventually(func() map[string]string { return get(&v1alpha1.AccessRule{}, class).Labels }).Should(HaveKeyWithValue(v1alpha1.LabelRestricted, "false"))
		Expect(get(&v1alpha1.AccessRule{}, class).Spec.Access).To(BeEmpty())
		Eventually(condition(class, v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAccessOpen))
	})

	It("reverts a hand edit to its AccessRule, and restores a deleted one", func() {
		rule := get(&v1alpha1.AccessRule{}, class)
		rule.Spec.Rungs = nil
		Expect(env.Client.Update(ctx, rule)).To(Succeed())
		Eventually(accessRungs(class)).ShouldNot(BeEmpty())
		Expect(env.Client.Delete(ctx, get(&v1alpha1.AccessRule{}, class))).To(Succeed())
		Eventually(accessRungs(class)).ShouldNot(BeEmpty())
	})

	It("deletes the class's policies with the class, even under prunePolicy Orphan", func() {
		wc := get(&v1alpha1.WorkloadClass{}, class)
		wc.Spec.PrunePolicy = v1alpha1.PruneOrphan
		wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ml"}}
		updateClass(wc)
		Eventually(func() map[string]string { return get(&v1alpha1.AccessRule{}, class).Labels }).Should(HaveKeyWithValue(v1alpha1.LabelRestricted, "true"))
		Expect(env.Client.Delete(ctx, wc)).To(Succeed())
		Eventually(exists(&v1alpha1.AccessRule{}, class)).Should(BeFalse())
		// The policies are the chart's: they stay.
		Expect(exists(&admissionv1.ValidatingAdmissionPolicy{}, render.AccessPolicyName)()).To(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: class}, &v1alpha1.WorkloadClass{}))
		}).Should(BeTrue())
		// The orphaned NodePools stay; no policy enforces a class that is gone.
		Expect(nodePoolNames(class)()).To(BeEmpty()) // released: no longer labelled
		Eventually(func() error { return admit(pod("web", "after", podSpec(class, gpuTaint, nvidiaTaint))) }).Should(Succeed())
	})
})

// accessRungs are the rungs the class's AccessRule names (nil while it does not exist).
func accessRungs(class string) func() []string {
	return func() []string {
		rule := &v1alpha1.AccessRule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: class}, rule); err != nil {
			return nil
		}
		return rule.Spec.Rungs
	}
}

// restricted is a class only namespaces may use, with a NoSchedule taint of its own.
func restricted(namespaces ...string) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: wc.Name, Effect: corev1.TaintEffectNoSchedule}}
		wc.Spec.Access = &v1alpha1.Access{Namespaces: namespaces}
	}
}

func dedicated(class string) corev1.Toleration {
	return corev1.Toleration{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: class, Effect: corev1.TaintEffectNoSchedule}
}

var _ = Describe("Access that cannot be escaped", Ordered, func() {
	BeforeAll(func() {
		create(newBaseline("escape"))
		namespace("team-a", nil)
		namespace("team-b", nil)
		namespace("outside", nil)
	})

	It("refuses a pod if any restricted class it could land on forbids its namespace", func() {
		create(newClass("only-a", "escape", restricted("team-a")), newClass("a-and-b", "escape", restricted("team-a", "team-b")))
		waitSynced("only-a")
		waitSynced("a-and-b")
		everything := corev1.Toleration{Operator: corev1.TolerationOpExists}
		// Loaded once the later class refuses.
		Eventually(func() error { return admit(pod("outside", "probe", podSpec("a-and-b", dedicated("a-and-b")))) }).Should(HaveOccurred())
		Eventually(func() error { return admit(pod("team-b", "probe", podSpec("only-a", dedicated("only-a")))) }).Should(HaveOccurred())
		// team-b may use a-and-b, not only-a: a pod that could land on both is refused by only-a.
		Expect(admit(pod("team-b", "anywhere", podSpec("", everything)))).To(MatchError(ContainSubstring("could run on WorkloadClass only-a")))
		Expect(admit(pod("team-b", "chosen", podSpec("a-and-b", dedicated("a-and-b"))))).To(Succeed())
		Expect(admit(pod("team-a", "anywhere", podSpec("", everything)))).To(Succeed())
	})

	It("protects an orphaned rung until its NodePool is gone", func() {
		create(newClass("orphans", "escape", restricted("team-a"), func(wc *v1alpha1.WorkloadClass) { wc.Spec.PrunePolicy = v1alpha1.PruneOrphan }))
		waitSynced("orphans")
		const rung = "orphans-spot-amd64"
		Eventually(accessRungs("orphans")).Should(ContainElement(rung))
		wc := get(&v1alpha1.WorkloadClass{}, "orphans")
		wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
		updateClass(wc)
		waitSynced("orphans")
		Eventually(nodePoolNames("orphans")).ShouldNot(ContainElement(rung)) // released
		Expect(exists(&karpv1.NodePool{}, rung)()).To(BeTrue())
		Expect(accessRungs("orphans")()).To(ContainElement(rung))
		byName := podSpec("")
		byName.NodeSelector = map[string]string{"karpenter.sh/nodepool": rung}
		Expect(admit(pod("outside", "by-name", byName))).To(MatchError(ContainSubstring("could run on WorkloadClass orphans")))
		byRung := podSpec("", dedicated("orphans"))
		byRung.NodeSelector = map[string]string{v1alpha1.LabelRung: rung}
		Expect(admit(pod("outside", "by-rung", byRung))).To(MatchError(ContainSubstring("could run on WorkloadClass orphans")))
		// Gone: the rule forgets it on the class's next pass.
		Expect(env.Client.Delete(ctx, get(&karpv1.NodePool{}, rung))).To(Succeed())
		wc = get(&v1alpha1.WorkloadClass{}, "orphans")
		wc.Spec.Access.Namespaces = []string{"team-a", "team-b"}
		updateClass(wc)
		Eventually(accessRungs("orphans")).ShouldNot(ContainElement(rung))
	})

	It("narrows access at once while the family is blocked, restores a deleted AccessRule, and says enforcement lags", func() {
		create(newClass("blocked", "escape", restricted("team-a", "team-b")))
		waitSynced("blocked")
		Eventually(func() error { return admit(pod("outside", "probe", podSpec("blocked", dedicated("blocked")))) }).Should(HaveOccurred())
		Expect(admit(pod("team-b", "train", podSpec("blocked", dedicated("blocked"))))).To(Succeed())

		// A hand-written NodePool takes the name of a rung the edit adds: the family cannot
		// be written. The same edit drops team-b.
		foreign := foreignNodePool("blocked-spot-arm64", "arm64", nil)
		create(foreign)
		wc := get(&v1alpha1.WorkloadClass{}, "blocked")
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64, v1alpha1.ArchitectureARM64}
		wc.Spec.Access.Namespaces = []string{"team-a"}
		updateClass(wc)
		Eventually(condition("blocked", v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonOwnershipConflict))
		Eventually(condition("blocked", v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonAccessLagging))
		Eventually(func() error { return admit(pod("team-b", "train", podSpec("blocked", dedicated("blocked")))) }).Should(MatchError(ContainSubstring("could run on WorkloadClass blocked")))
		Expect(admit(pod("team-a", "train", podSpec("blocked", dedicated("blocked"))))).To(Succeed())

		// Deleted while blocked: restored, still narrowed.
		Expect(env.Client.Delete(ctx, get(&v1alpha1.AccessRule{}, "blocked"))).To(Succeed())
		Eventually(accessRungs("blocked")).ShouldNot(BeEmpty())
		Eventually(func() error { return admit(pod("team-b", "train", podSpec("blocked", dedicated("blocked")))) }).Should(MatchError(ContainSubstring("could run on WorkloadClass blocked")))

		// A widening waits for the family.
		wc = get(&v1alpha1.WorkloadClass{}, "blocked")
		wc.Spec.Access.Namespaces = []string{"team-a", "team-b", "outside"}
		updateClass(wc)
		Consistently(func() error { return admit(pod("outside", "train", podSpec("blocked", dedicated("blocked")))) }, "3s").Should(HaveOccurred())

		// Unblocked (the next pass, brought on by an edit rather than the conflict's minute
		// requeue): the family is written and access follows the spec.
		Expect(env.Client.Delete(ctx, foreign)).To(Succeed())
		wc = get(&v1alpha1.WorkloadClass{}, "blocked")
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/unblocked": "true"}
		updateClass(wc)
		waitSynced("blocked")
		Eventually(condition("blocked", v1alpha1.ConditionAccess)).Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced))
		Eventually(func() error { return admit(pod("outside", "train", podSpec("blocked", dedicated("blocked")))) }).Should(Succeed())
	})
})
