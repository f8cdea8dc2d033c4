// Package demo runs Poolsmith's main job on an embedded control plane: a real
// kube-apiserver and etcd with Poolsmith's and Karpenter's CRDs, the samples applied, and
// a report of what the API server holds. `make demo` and its smoke test call Run.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/testenv"
)

// FieldManager is the server-side apply field manager the demo applies samples with.
const FieldManager = "poolsmith-demo"

// Options configure Run.
type Options struct {
	// SamplesDir holds the manifests to apply.
	SamplesDir string
	// Hold keeps the control plane running until ctx is done, and writes a kubeconfig.
	Hold bool
}

// Run starts the control plane, applies the samples and reports what it did on out.
func Run(ctx context.Context, out io.Writer, opts Options) error {
	start := time.Now()
	fmt.Fprintf(out, "Starting kube-apiserver and etcd from %s ...\n", os.Getenv("KUBEBUILDER_ASSETS"))
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(out, "stopping the control plane: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "Control plane up in %s with these CRDs installed:\n", time.Since(start).Round(100*time.Millisecond))
	if err := printCRDs(ctx, out, env.Client); err != nil {
		return err
	}

	objs, err := manifest.Load([]string{opts.SamplesDir}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nApplying %d objects from %s (server-side apply, field manager %q):\n", len(objs), opts.SamplesDir, FieldManager)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  KIND\tNAME\tFILE")
	for _, o := range objs {
		if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", o.Where(), err)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", o.GetKind(), o.GetName(), filepath.Base(o.Source))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nEvery sample passed the API server's schema and CEL validation.\n")

	if !opts.Hold {
		return nil
	}
	kubeconfig, err := writeKubeconfig(env.Environment)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDEMO_HOLD=1: the control plane keeps running until you press Ctrl-C. Try:\n  KUBECONFIG=%s %s get workloadclasses\n",
		kubeconfig, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"))
	<-ctx.Done()
	return nil
}

func printCRDs(ctx context.Context, out io.Writer, c client.Client) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	var names []string
	for _, crd := range crds.Items {
		names = append(names, crd.Name)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "  %s\n", strings.Join(names, "\n  "))
	return nil
}

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding a demo user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("writing a kubeconfig: %w", err)
	}
	path := filepath.Join(os.TempDir(), "poolsmith-demo.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
