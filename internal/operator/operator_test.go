package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/operator"
)

// TestAccessOnAControlPlaneWithoutMutatingAdmissionPolicy runs the manager against a
// kube-apiserver that does not serve admissionregistration.k8s.io/v1
// MutatingAdmissionPolicy (as before Kubernetes v1.36): discovery finds it missing, access
// rules are still written and enforced, and the class says defaults are unavailable. Then
// the manager runs with --access-policies=false and says the feature is off.
func TestAccessOnAControlPlaneWithoutMutatingAdmissionPolicy(t *testing.T) {
	env, err := testenv.Start(testenv.WithAPIServerFlag("feature-gates", "MutatingAdmissionPolicy=false"),
		testenv.WithAPIServerFlag("runtime-config", "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	c := env.Client
	if err := c.List(ctx, &admissionv1.MutatingAdmissionPolicyList{}); !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		t.Fatalf("the control plane still serves MutatingAdmissionPolicy (list: %v)", err)
	}
	must(t, c.Create(ctx, &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.BaselineSpec{NodeClass: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-test",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
	}}}))
	must(t, c.Create(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: v1alpha1.WorkloadClassSpec{
		Profile:       v1alpha1.ProfileGPU,
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand},
		Taints:        v1alpha1.Taints{{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Access:        &v1alpha1.Access{Namespaces: []string{"ml"}},
	}}))

	stop := run(t, env, operator.Options{})
	waitAccess(t, c, v1alpha1.ReasonDefaultsUnavailable)
	if err := c.Get(ctx, client.ObjectKey{Name: "gpu"}, &v1alpha1.AccessRule{}); err != nil {
		t.Fatalf("the AccessRule was not written: %v", err)
	}
	// And it is enforced.
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}))
	must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "web"}}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p"}, Spec: corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		NodeSelector: map[string]string{v1alpha1.LabelClass: "gpu"},
	}}
	var refused error
	for deadline := time.Now().Add(15 * time.Second); refused == nil && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		refused = c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
	}
	if refused == nil || !strings.Contains(refused.Error(), "could run on WorkloadClass gpu") {
		t.Fatalf("a pod of namespace web selecting gpu: %v", refused)
	}
	stop()

	stop = run(t, env, operator.Options{Capabilities: capabilities.Capabilities{NoAccessPolicies: true}})
	defer stop()
	waitAccess(t, c, v1alpha1.ReasonAccessDisabled)
}

func run(t *testing.T, env *testenv.Env, opts operator.Options) func() {
	t.Helper()
	opts.MetricsAddr, opts.ProbeAddr, opts.SkipNameValidation = "0", "0", true
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.New(ctx, env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
}

func waitAccess(t *testing.T, c client.Client, reason string) {
	t.Helper()
	var last *metav1.Condition
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		wc := &v1alpha1.WorkloadClass{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "gpu"}, wc); err != nil {
			t.Fatal(err)
		}
		synced := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
		if last = meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionAccess); last != nil && last.Reason == reason &&
			last.Status == metav1.ConditionFalse && synced != nil && synced.Status == metav1.ConditionTrue {
			return
		}
	}
	t.Fatalf("Access condition %+v, want False/%s", last, reason)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
