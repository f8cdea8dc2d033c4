package validate_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbiddenDeps are import-path prefixes no binary of this module may link: the API
// server's storage and registry and the etcd client (k8s.io/apiextensions-apiserver's
// registry/customresource brought them all), the admission webhook client with gRPC
// (apiserver's policy/validating brought them) and controller-runtime's fake client (it
// brings every group's apply configurations). Nothing Poolsmith runs needs them, and
// together they made the manager image and the CLI teams download into CI 88 MB instead
// of 64. Nor may a binary link the test and demo scaffolding (internal/harness: the
// local cluster brings all of Karpenter and its fake AWS APIs).
var forbiddenDeps = []string{
	"k8s.io/apiserver/pkg/storage",
	"k8s.io/apiserver/pkg/registry",
	"go.etcd.io/etcd",
	"k8s.io/apiextensions-apiserver/pkg/registry",
	"k8s.io/apiserver/pkg/admission/plugin/webhook/generic",
	"google.golang.org/grpc",
	"sigs.k8s.io/controller-runtime/pkg/client/fake",
	// Policy expression kinds whose packages link more than compiling them runs (the
	// OpenAPI client and type converter; the admission metrics): policyexpr.go has twins.
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating",
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions",
	"github.com/poolsmith/poolsmith/internal/harness",
}

// TestBinariesLinkNoStorage fails when the manager (the main package, which is also the
// CLI) or the CLI package imports, at any depth, one of forbiddenDeps, and prints the
// import chain that brings it in.
func TestBinariesLinkNoStorage(t *testing.T) {
	for _, root := range []string{"github.com/poolsmith/poolsmith", "github.com/poolsmith/poolsmith/internal/cli"} {
		t.Run(root, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, root)
			cmd.Dir = "../.."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", root, err)
			}
			imports := map[string][]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				imports[f[0]] = f[1:]
			}
			if _, ok := imports[root]; !ok || len(imports) < 100 {
				t.Fatalf("go list -deps %s listed %d packages; the check would prove nothing", root, len(imports))
			}
			var linked []string
			for pkg := range imports {
				for _, bad := range forbiddenDeps {
					if pkg == bad || strings.HasPrefix(pkg, bad+"/") {
						linked = append(linked, pkg)
					}
				}
			}
			if len(linked) == 0 {
				return
			}
			slices.Sort(linked)
			chains := make([]string, 0, 3)
			for _, pkg := range linked[:min(3, len(linked))] {
				chains = append(chains, strings.Join(importChain(imports, root, pkg), " -> "))
			}
			t.Errorf("%s links %d packages it must not (forbiddenDeps), among them:\n%s", root, len(linked), strings.Join(chains, "\n"))
		})
	}
}

// importChain is a shortest chain of imports from root to pkg.
func importChain(imports map[string][]string, root, pkg string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{pkg}
}
