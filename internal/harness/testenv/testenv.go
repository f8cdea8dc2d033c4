// Package testenv starts a real kube-apiserver and etcd (built from source by
// hack/envtest.sh) with Poolsmith's CRDs and Karpenter's real CRDs installed, for the test
// suites and `make demo`. Karpenter's CRDs come from the karpenter-provider-aws module in
// the module cache, whose copy of karpenter.sh_nodepools.yaml carries the AWS label rules.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// KarpenterProviderModule is the module whose pkg/apis/crds holds the CRDs installed.
const KarpenterProviderModule = "github.com/aws/karpenter-provider-aws"

// Env is a running control plane with a client for it.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Option changes the control plane before it starts.
type Option func(*options)

type options struct {
	env        *envtest.Environment
	noPolicies bool
}

// WithEnvironment changes the envtest environment before it starts, e.g. where the API
// server's output goes.
func WithEnvironment(f func(*envtest.Environment)) Option {
	return func(o *options) { f(o.env) }
}

// WithoutAdmissionPolicies leaves out the admission policies Start installs as the chart
// does (render.AdmissionPolicies), for a test of their install order.
func WithoutAdmissionPolicies() Option {
	return func(o *options) { o.noPolicies = true }
}

// WithAPIServerFlag appends a kube-apiserver flag, e.g. ("enable-admission-plugins",
// "OwnerReferencesPermissionEnforcement").
func WithAPIServerFlag(name, value string) Option {
	return func(o *options) {
		o.env.ControlPlane.GetAPIServer().Configure().Append(name, value)
	}
}

// Start starts kube-apiserver and etcd from KUBEBUILDER_ASSETS and installs the CRDs.
func Start(opts ...Option) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run tests with `make test`, or export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	}
	dirs, err := CRDDirs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     dirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
	}
	o := &options{env: env}
	for _, opt := range opts {
		opt(o)
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves kube-apiserver and etcd running when installing the CRDs fails.
		_ = env.Stop()
		return nil, fmt.Errorf("starting the control plane from %s: %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	if !o.noPolicies {
		err := InstallAdmissionPolicies(c)
		if err == nil {
			err = awaitAdmissionPolicies(c)
		}
		if err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// InstallAdmissionPolicies creates the admission policies and bindings the chart installs
// (render.AdmissionPolicies), after the CRDs as helm does; the MutatingAdmissionPolicy and
// its binding only where the API server serves them.
func InstallAdmissionPolicies(c client.Client) error {
	for _, obj := range render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters) {
		if err := c.Create(context.Background(), obj); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("installing %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	return nil
}

// awaitAdmissionPolicies returns once the access and guardrail policies no longer stand in
// the way of a plain pod and a plain class: until the API server's informer of the parameter kind has synced, the policy
// (failurePolicy Fail) refuses every pod and workload, which a suite starting at once
// would meet as a flake.
func awaitAdmissionPolicies(c client.Client) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-policy-probe", Namespace: metav1.NamespaceDefault},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
	}
	// The guardrail policy (failurePolicy Fail) refuses every class until its Baseline
	// informer has synced.
	class := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-policy-probe"}}
	var err error
	deadline := time.Now().Add(policySyncTimeout)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		err = c.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), render.AccessPolicyName) {
			continue
		}
		err = c.Create(context.Background(), class.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), render.GuardrailsPolicyName) {
			return awaitGuardrailParams(c, deadline)
		}
	}
	return fmt.Errorf("the admission policies still refused a plain pod or class %s after they were installed: %w", policySyncTimeout, err)
}

// awaitGuardrailParams returns once the guardrail policy judges classes by their
// Baselines. A plain class is also admitted before the API server has loaded the
// policy's binding at all, and then refused ("paramKind ... not yet synced") until its
// Baseline informer has synced, which failed suites at their first class (api/v1alpha1's
// samples, the controllers' first spec) after the wait above had passed. A Baseline
// whose guardrails refuse the probe class proves both: the probe is refused naming that
// Baseline. It is deleted again, and the wait lasts until the API server has seen that.
func awaitGuardrailParams(c client.Client, deadline time.Time) error {
	ctx := context.Background()
	baseline := &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-policy-probe"},
		Spec: v1alpha1.BaselineSpec{
			NodeClass: awsv1.EC2NodeClassSpec{
				Role:                       "poolsmith-policy-probe",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"poolsmith-policy-probe": "true"}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"poolsmith-policy-probe": "true"}}},
			},
			Guardrails: &v1alpha1.Guardrails{Profiles: []v1alpha1.Profile{v1alpha1.ProfileGPU}},
		},
	}
	class := &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-policy-probe"},
		Spec:       v1alpha1.WorkloadClassSpec{BaselineRef: &v1alpha1.BaselineReference{Name: baseline.Name}, Profile: v1alpha1.ProfileGeneral},
	}
	if err := c.Create(ctx, baseline); err != nil {
		return fmt.Errorf("creating the guardrail probe's Baseline: %w", err)
	}
	var err error
	for enforced := false; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		err = c.Create(ctx, class.DeepCopy(), client.DryRunAll)
		switch {
		case !enforced && err != nil && strings.Contains(err.Error(), "guardrails of Baseline "+baseline.Name):
			enforced = true
			if err := c.Delete(ctx, baseline); err != nil {
				return fmt.Errorf("deleting the guardrail probe's Baseline: %w", err)
			}
		case enforced && err == nil:
			return nil
		}
	}
	_ = c.Delete(ctx, baseline)
	return fmt.Errorf("the guardrail policy did not judge a class by its Baseline's guardrails, then stop once the Baseline was deleted, within %s: %v", policySyncTimeout, err)
}

// policySyncTimeout bounds the wait for the API server to enforce the installed policies.
const policySyncTimeout = 2 * time.Minute

// CRDDirs returns Poolsmith's generated CRD directory and Karpenter's.
func CRDDirs() ([]string, error) {
	root, err := ModuleDir("")
	if err != nil {
		return nil, err
	}
	karpenter, err := ModuleDir(KarpenterProviderModule)
	if err != nil {
		return nil, err
	}
	return []string{
		filepath.Join(root, "config", "crd", "bases"),
		filepath.Join(karpenter, "pkg", "apis", "crds"),
	}, nil
}

// ModuleDir asks the go command where a module's sources are: the main module for "",
// otherwise the module cache copy at the version go.mod requires, downloaded if need be.
func ModuleDir(module string) (string, error) {
	args := []string{"list", "-m", "-json"}
	if module != "" {
		args = []string{"mod", "download", "-json", module}
	}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %q with go %s: %w: %s", module, args[0], err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("locating module %q: %w", module, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go found no directory for module %q: %s", module, info.Error)
	}
	return info.Dir, nil
}

// WithAPIServerCertDir keeps kube-apiserver's certificates (its serving CA among them) in
// dir, which the caller owns: envtest otherwise makes a new directory and a new CA on each
// start, and a client that trusted the first CA could not reconnect after a restart of
// APIServer over the same etcd.
func WithAPIServerCertDir(dir string) Option {
	return func(o *options) {
		o.env.ControlPlane.GetAPIServer().CertDir = dir
	}
}
