package fakekubelet_test

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/harness/fakekubelet"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
)

var access = corev1.Taint{Key: "poolsmith.dev/access", Value: "ml", Effect: corev1.TaintEffectNoExecute}

func node(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: taints}}
}

func pod(tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n", Tolerations: tolerations}}
}

// TestAdmit mirrors the kubelet's NoExecute check (pkg/kubelet/lifecycle/predicate.go,
// generalFilter): every NoExecute taint must be tolerated, NoSchedule ones are not checked.
func TestAdmit(t *testing.T) {
	noSchedule := corev1.Taint{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		pod   *corev1.Pod
		admit bool
	}{
		{"no taints", node(), pod(), true},
		{"node gone", nil, pod(), true},
		{"an untolerated NoSchedule taint is the scheduler's", node(noSchedule), pod(), true},
		{"an untolerated NoExecute taint", node(noSchedule, access), pod(), false},
		{"only the NoSchedule taint tolerated", node(noSchedule, access), pod(corev1.Toleration{Key: noSchedule.Key, Value: "ml", Effect: corev1.TaintEffectNoSchedule}), false},
		{"tolerated by key and value", node(access), pod(corev1.Toleration{Key: access.Key, Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoExecute}), true},
		{"tolerated with no operator (Equal)", node(access), pod(corev1.Toleration{Key: access.Key, Value: "ml"}), true},
		{"another value", node(access), pod(corev1.Toleration{Key: access.Key, Value: "web", Effect: corev1.TaintEffectNoExecute}), false},
		{"Exists on the key", node(access), pod(corev1.Toleration{Key: access.Key, Operator: corev1.TolerationOpExists}), true},
		{"Exists with no key tolerates everything", node(access), pod(corev1.Toleration{Operator: corev1.TolerationOpExists}), true},
		{"the right key with the NoSchedule effect", node(access), pod(corev1.Toleration{Key: access.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}), false},
		{"Gt is off by default", node(corev1.Taint{Key: "n", Value: "5", Effect: corev1.TaintEffectNoExecute}), pod(corev1.Toleration{Key: "n", Operator: corev1.TolerationOpGt, Value: "1"}), false},
		{"one of two NoExecute taints tolerated", node(access, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoExecute}), pod(corev1.Toleration{Key: access.Key, Operator: corev1.TolerationOpExists}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message, ok := fakekubelet.Admit(tc.pod, tc.node)
			if ok != tc.admit {
				t.Fatalf("admitted %v, want %v", ok, tc.admit)
			}
			if !ok && (reason != "TaintToleration" || message != "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate") {
				t.Errorf("reason %q message %q: not the kubelet's", reason, message)
			}
		})
	}
}

// TestAdmitNodeAffinity mirrors the kubelet's node affinity check (AdmissionCheck in
// pkg/scheduler, called by the kubelet's generalFilter before the taint check): the pod's
// nodeSelector and required node affinity must match the node, a DaemonSet pod's
// metadata.name field included.
func TestAdmitNodeAffinity(t *testing.T) {
	n := node(access)
	n.Labels = map[string]string{"poolsmith.dev/class": "ml", "kubernetes.io/arch": "arm64"}
	tolerate := corev1.Toleration{Operator: corev1.TolerationOpExists}
	required := func(term corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}}
	}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		affinity *corev1.Affinity
		reason   string
	}{
		{name: "no selector"},
		{name: "a matching nodeSelector", selector: map[string]string{"poolsmith.dev/class": "ml"}},
		{name: "a nodeSelector for another class", selector: map[string]string{"poolsmith.dev/class": "web"}, reason: "NodeAffinity"},
		{name: "a nodeSelector for a label the node lacks", selector: map[string]string{"example.com/pool": "a"}, reason: "NodeAffinity"},
		{name: "required affinity on amd64", reason: "NodeAffinity", affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}})},
		{name: "required affinity on arm64", affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}})},
		{name: "a DaemonSet pod for this node", affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}})},
		{name: "a DaemonSet pod for another node", reason: "NodeAffinity", affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}}}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tolerate)
			p.Spec.NodeSelector, p.Spec.Affinity = tc.selector, tc.affinity
			reason, message, ok := fakekubelet.Admit(p, n)
			if ok != (tc.reason == "") || reason != tc.reason {
				t.Fatalf("admitted %v reason %q, want reason %q", ok, reason, tc.reason)
			}
			if !ok && message != "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" {
				t.Errorf("message %q: not the kubelet's", message)
			}
		})
	}
	// The kubelet reports the first failure: affinity is checked before taints.
	if reason, _, _ := fakekubelet.Admit(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"poolsmith.dev/class": "web"}}}, n); reason != "NodeAffinity" {
		t.Errorf("a pod that neither matches nor tolerates: reason %q, want NodeAffinity", reason)
	}
}

// TestSyncRejectsAPodThatDoesNotTolerateItsNode drives one pass against a real API server:
// three pods name a node with a NoExecute taint; the one that tolerates it runs, the one
// that does not and the one whose nodeSelector names another class are reported Failed as
// the kubelet reports them, and stay Failed on the next pass.
func TestSyncRejectsAPodThatDoesNotTolerateItsNode(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs KUBEBUILDER_ASSETS (a control plane from hack/envtest.sh)")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, c := context.Background(), env.Client

	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal", Annotations: map[string]string{fakekubelet.Annotation: "true"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{access}},
	}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, tolerations ...corev1.Toleration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: n.Name, Tolerations: tolerations,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("tolerates", corev1.Toleration{Key: access.Key, Value: access.Value, Effect: corev1.TaintEffectNoExecute})
	mk("named")
	mismatched := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other-class", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: n.Name, NodeSelector: map[string]string{"poolsmith.dev/class": "web"},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := c.Create(ctx, mismatched); err != nil {
		t.Fatal(err)
	}
	k := &fakekubelet.Kubelet{Client: c, Log: logr.Discard()}
	for range 2 {
		if err := k.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := got("tolerates"); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the tolerating pod is %s, want Running", p.Status.Phase)
	}
	p := got("named")
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "TaintToleration" ||
		p.Status.Message != "Pod was rejected: Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate" {
		t.Errorf("the pod that does not tolerate the node's NoExecute taint: phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	p = got("other-class")
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "NodeAffinity" ||
		p.Status.Message != "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" {
		t.Errorf("the pod whose nodeSelector names another class: phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}

// TestSyncReportsANodeWhoseFirstStatusWasLost: registration creates the Node and then posts
// its status; when that post meets a conflict (Karpenter labels a new node at once), the
// next pass must report the node Ready, or it stays NotReady with its pods unrun (the
// simulate agreement scenario met it: two of eight nodes Unknown for good).
func TestSyncReportsANodeWhoseFirstStatusWasLost(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs KUBEBUILDER_ASSETS (a control plane from hack/envtest.sh)")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, c := context.Background(), env.Client

	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-spot-arm64-abcde"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "general"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
		},
	}
	if err := c.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = "aws:///us-east-1a/i-0000000000000000a"
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
	nc.Status.Allocatable = nc.Status.Capacity
	if err := c.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	// The Node as registration left it when its status post failed.
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-i-0000000000000000a.ec2.internal", Annotations: map[string]string{fakekubelet.Annotation: "true"},
			Labels: map[string]string{corev1.LabelArchStable: "arm64"}},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
	}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	k := &fakekubelet.Kubelet{Client: c, Log: logr.Discard()}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
	}
	if !ready || n.Status.Allocatable.Cpu().String() != "2" {
		t.Errorf("the node is not reported Ready with its NodeClaim's allocatable: %+v", n.Status)
	}
}
