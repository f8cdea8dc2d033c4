// Package chart_test checks charts/poolsmith with the helm CLI that `make helm` builds:
// helm lint, helm template goldens, a server-side dry run of everything it renders on the
// real API server, the lockdown checks test/deploy makes for config/default, helm
// install, and hostile values that try to inject YAML (hostile_test.go). rbac_test.go
// proves the RBAC the chart and config/default ship by running the manager under it.
package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

var (
	ctx  = context.Background()
	env  *testenv.Env
	root string
	// kubeconfig is an admin kubeconfig for helm and kubectl.
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = testenv.ModuleDir(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Informers LIST then WATCH, as against API servers without streaming lists (the
	// WatchList feature): there the manager needs list, which a streaming list does not.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	setupLogCapture()
	// OwnerReferencesPermissionEnforcement is off by default; without it an owner reference
	// with blockOwnerDeletion needs no finalizers rule, so that rule would look unneeded.
	env, err = testenv.Start(testenv.WithAPIServerFlag("enable-admission-plugins", "OwnerReferencesPermissionEnforcement"), testenv.WithoutAdmissionPolicies()) // helm install installs them
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "chart-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kc, err := user.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "poolsmith-chart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// helmBin is $HELM (make test sets it) or bin/helm.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(root, "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no helm at %s: run `make helm` (make test does): %v", bin, err)
	}
	return bin
}

// helm runs the helm CLI with a private home, so the user's repositories and cache are
// neither read nor written, and returns its stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config",
		"HELM_DATA_HOME="+home+"/data", "KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render runs helm template for release poolsmith in namespace ns with extra args.
func render(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := helm(t, append([]string{"template", "poolsmith", "charts/poolsmith", "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decode(t *testing.T, where, yaml string) []manifest.Object {
	t.Helper()
	objs, err := manifest.Decode(where, strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
