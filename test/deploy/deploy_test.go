// Package deploy_test checks config/default: kustomize builds it, the real API server
// accepts every object, and the Deployment and RBAC are as locked down as documented
// (test/lockdown, the checks charts/poolsmith passes too).
package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/test/lockdown"
)

func TestDefaultKustomizationIsAcceptedAndLeastPrivilege(t *testing.T) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", "../../config/default")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v: %s", err, stderr.String())
	}
	objs, err := manifest.Decode("config/default", bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}

	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()

	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		opts := []client.PatchOption{client.FieldOwner("deploy-test"), client.ForceOwnership}
		if o.GetKind() != "Namespace" {
			opts = append(opts, client.DryRunAll)
		}
		if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, opts...); err != nil {
			t.Errorf("%s rejected: %v", o.Where(), err)
		}
	}
	for _, msg := range lockdown.Check(objs) {
		t.Error(msg)
	}
	// The signals refresh sample goes into the namespace config/default created.
	refresh, err := manifest.Load([]string{"../../config/samples/signals"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range refresh {
		if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner("deploy-test"), client.ForceOwnership, client.DryRunAll); err != nil {
			t.Errorf("%s rejected: %v", o.Where(), err)
		}
	}
	if len(refresh) != 5 {
		t.Errorf("config/samples/signals has %d objects, want 5", len(refresh))
	}

	for kind, want := range map[string]int{"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 2, "RoleBinding": 2, "Deployment": 1} {
		if kinds[kind] != want {
			t.Errorf("config/default has %d %s, want %d", kinds[kind], kind, want)
		}
	}
}
