package chart_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/test/lockdown"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from helm template")

// valueSets are the goldens: the defaults, and one set that turns every option on.
var valueSets = map[string][]string{
	"default": nil,
	"custom":  {"--values", "test/chart/testdata/custom-values.yaml"},
}

func TestLint(t *testing.T) {
	for _, args := range [][]string{
		{"lint", "--strict", "charts/poolsmith"},
		{"lint", "--strict", "charts/poolsmith", "--values", "test/chart/testdata/custom-values.yaml"},
		{"lint", "--strict", "charts/poolsmith-crd"},
	} {
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

func TestTemplateGoldens(t *testing.T) {
	for name, args := range valueSets {
		t.Run(name, func(t *testing.T) {
			got := render(t, "poolsmith-system", args...)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./test/chart -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("helm template with %s values differs from %s; if the change is intended, run go test ./test/chart -update\n%s", name, golden, firstDiff(string(want), got))
			}
		})
	}
}

// firstDiff shows the first differing line, enough to find the change.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return ""
}

func TestDefaultsAreThePinnedRelease(t *testing.T) {
	var chart struct{ AppVersion string }
	if err := yaml.Unmarshal([]byte(mustRead(t, "charts/poolsmith/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	appVersion := chart.AppVersion
	objs := decode(t, "helm template", render(t, "poolsmith-system"))
	var images []string
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				images = append(images, c.(map[string]any)["image"].(string))
			}
		}
	}
	if want := "ghcr.io/poolsmith/poolsmith:" + appVersion; len(images) != 1 || images[0] != want {
		t.Errorf("the manager image is %v, want %s (the chart's appVersion)", images, want)
	}
	kustomization := mustRead(t, "config/default/kustomization.yaml")
	if !strings.Contains(kustomization, `newTag: "`+appVersion+`"`) {
		t.Errorf("config/default/kustomization.yaml does not pin the image to the chart's appVersion %s", appVersion)
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	for set, want := range map[string]string{
		"image.tag=latest":             "/image/tag",
		"region=Mars":                  "/region",
		"signals.maxAge=two days":      "/signals/maxAge",
		"logging.encoder=xml":          "/logging/encoder",
		"replicas=0":                   "/replicas",
		"kubeAPI.qps=0":                "/kubeAPI/qps",
		"extraArgs[0]=leader-elect":    "/extraArgs/0",
		"regoin=us-east-1":             "regoin",
		"metrics.serviceMonitor.foo=1": "foo",
		// What the API server would refuse (issue 21).
		"signals.refresh.schedule=17 3 * *":                          "/signals/refresh/schedule",
		"signals.refresh.schedule=TZ=UTC 17 3 * * *":                 "/signals/refresh/schedule",
		"priorityClassName=a..b":                                     "/priorityClassName",
		"serviceAccount.name=../Evil Name":                           "/serviceAccount/name",
		"signals.configMap.namespace=Evil":                           "/signals/configMap/namespace",
		"signals.configMap.name=a..b":                                "/signals/configMap/name",
		"imagePullSecrets[0].name=a_b":                               "/imagePullSecrets/0/name",
		"nameOverride=Evil":                                          "/nameOverride",
		"fullnameOverride=1st":                                       "/fullnameOverride",
		"podDisruptionBudget.maxUnavailable=abc":                     "/podDisruptionBudget/maxUnavailable",
		"podDisruptionBudget.maxUnavailable=-1":                      "/podDisruptionBudget/maxUnavailable",
		"signals.refresh.fetchImage=curl 8":                          "/signals/refresh/fetchImage",
		"image.repository=ghcr.io/Poolsmith":                         "/image/repository",
		"resources.requests.cpu=lots":                                "/resources/requests/cpu",
		"podLabels.team=a b":                                         "/podLabels/team",
		"nodeSelector.bad key=x":                                     "/nodeSelector",
		"tolerations[0].operator=Maybe":                              "/tolerations/0/operator",
		"topologySpreadConstraints[0].labelSelector.matchLabels.a=b": "/topologySpreadConstraints/0/labelSelector",
	} {
		_, err := helm(t, "template", "poolsmith", "charts/poolsmith", "--set", set)
		if err == nil || !strings.Contains(err.Error(), "'"+want) {
			t.Errorf("--set %s: got %v, want a schema error naming %s", set, err, want)
		}
	}
}

// TestSchemaAcceptsWhatValuesYamlDocuments: the forms values.yaml says a value accepts.
func TestSchemaAcceptsWhatValuesYamlDocuments(t *testing.T) {
	for _, set := range []string{
		"signals.refresh.schedule=@daily",
		"signals.refresh.schedule=@every 6h",
		"signals.refresh.schedule=*/15 1-5 ? JAN-JUN MON-FRI",
		"podDisruptionBudget.maxUnavailable=50%",
		"podDisruptionBudget.maxUnavailable=0",
		"logging.level=3",
		"resources.requests.cpu=0.5",
		"resources.requests.memory=1.5Gi",
		"resources.limits.memory=2e9",
		"signals.refresh.fetchImage=registry.example.com:5000/tools/curl:8.11.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"image.repository=localhost:5000/poolsmith",
		"priorityClassName=system-cluster-critical",
		"serviceAccount.name=poolsmith.manager",
		"podAnnotations.example\\.com/note=any text: even {{ this }}",
		"podLabels.example\\.com/team=a..b",
		"extraArgs[0]=--zap-devel",
	} {
		if _, err := helm(t, "template", "poolsmith", "charts/poolsmith", "--set", set); err != nil {
			t.Errorf("--set %s: %v", set, err)
		}
	}
}

// TestRenderedObjectsAreAcceptedAndLockedDown dry-runs everything helm template renders,
// CRDs included, on the real API server (server-side apply), for both value sets.
func TestRenderedObjectsAreAcceptedAndLockedDown(t *testing.T) {
	installServiceMonitorCRD(t)
	// Pod Security admission enforces the restricted profile on the pods created here.
	for _, ns := range []string{"dry-run", "karpenter", "monitoring"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for name, args := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := decode(t, "helm template ("+name+")", render(t, "dry-run", append(args, "--include-crds")...))
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
				if err := env.Client.Patch(ctx, o.Unstructured, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership, client.DryRunAll); err != nil {
					t.Errorf("%s rejected: %v", o.Where(), err)
				}
			}
			for _, msg := range lockdown.Check(objs) {
				t.Error(msg)
			}
			// Workload objects are only warned about; their pods are what is enforced.
			for _, o := range objs {
				path := map[string][]string{"Deployment": {"spec", "template"}, "CronJob": {"spec", "jobTemplate", "spec", "template"}}[o.GetKind()]
				if path == nil {
					continue
				}
				tmpl, _, err := unstructured.NestedMap(o.Object, path...)
				if err != nil {
					t.Fatal(err)
				}
				pod := &unstructured.Unstructured{Object: tmpl}
				pod.SetAPIVersion("v1")
				pod.SetKind("Pod")
				pod.SetName(o.GetName())
				pod.SetNamespace(o.GetNamespace())
				if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
					t.Errorf("a pod of %s is refused in a namespace enforcing the restricted Pod Security profile: %v", o.Where(), err)
				}
			}
			want := map[string]int{"CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 1,
				"Role": 2, "RoleBinding": 2, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1,
				"ValidatingAdmissionPolicy": 4, "ValidatingAdmissionPolicyBinding": 4}
			if name == "custom" {
				// The ConfigMaps: the signals' and the Grafana dashboard's.
				want["ServiceMonitor"], want["CronJob"], want["ConfigMap"] = 1, 1, 2
				want["ServiceAccount"], want["Role"], want["RoleBinding"] = 2, 3, 3
			}
			// The defaults policy only where helm's capabilities say the cluster serves it.
			if kinds["MutatingAdmissionPolicy"] > 0 {
				want["MutatingAdmissionPolicy"], want["MutatingAdmissionPolicyBinding"] = 1, 1
			}
			for kind, n := range want {
				if kinds[kind] != n {
					t.Errorf("%d %s rendered, want %d", kinds[kind], kind, n)
				}
			}
			for kind := range kinds {
				if _, ok := want[kind]; !ok {
					t.Errorf("unexpected %s rendered", kind)
				}
			}
		})
	}
}

// TestHelmInstall installs the chart with its defaults into the control plane (the CRDs
// are there already: helm skips them), then upgrades it to the customised values (whose
// signals ConfigMap lives in namespace karpenter) and uninstalls it.
func TestHelmInstall(t *testing.T) {
	out, err := helm(t, "install", "poolsmith", "charts/poolsmith", "--namespace", "helm-install", "--create-namespace")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Spot signals: ConfigMap helm-install/poolsmith-signals"; !strings.Contains(out, want) {
		t.Errorf("helm install's notes do not say %q:\n%s", want, out)
	}
	out, err = helm(t, "status", "poolsmith", "--namespace", "helm-install")
	if err != nil || !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm status after install: %v\n%s", err, out)
	}
	live := decode(t, "helm get manifest", mustHelm(t, "get", "manifest", "poolsmith", "--namespace", "helm-install"))
	for _, o := range live {
		got := o.Unstructured.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			t.Errorf("%s not installed: %v", o.Where(), err)
		}
	}
	installServiceMonitorCRD(t)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karpenter"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := helm(t, "upgrade", "poolsmith", "charts/poolsmith", "--namespace", "helm-install", "--values", "test/chart/testdata/custom-values.yaml"); err != nil {
		t.Fatal(err)
	}
	out = mustHelm(t, "status", "poolsmith", "--namespace", "helm-install")
	if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "REVISION: 2") {
		t.Errorf("helm status after upgrade:\n%s", out)
	}
	if _, err := helm(t, "uninstall", "poolsmith", "--namespace", "helm-install"); err != nil {
		t.Fatal(err)
	}
}

func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// installServiceMonitorCRD installs a stand-in for prometheus-operator's ServiceMonitor
// CRD (its YAML is not on the module proxy), for the customised values.
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	monitor := decode(t, "testdata/servicemonitor-crd.yaml", mustRead(t, "test/chart/testdata/servicemonitor-crd.yaml"))
	if err := env.Client.Patch(ctx, monitor[0].Unstructured, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	waitForCRD(t, "servicemonitors.monitoring.coreos.com")
}

// waitForCRD waits until the API server serves a CRD's kind.
func waitForCRD(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not established", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDockerfileMatchesTheChart keeps the Dockerfile, which no engine builds here, honest:
// pinned base images, the Go toolchain the Makefile uses, and the user the chart runs as.
func TestDockerfileMatchesTheChart(t *testing.T) {
	dockerfile := mustRead(t, "Dockerfile")
	var froms []string
	user := ""
	for _, line := range strings.Split(dockerfile, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "FROM":
			froms = append(froms, f[1])
		case len(f) == 2 && f[0] == "USER":
			user = f[1]
		}
	}
	if len(froms) != 2 {
		t.Fatalf("Dockerfile has %d FROM lines, want a build stage and a runtime stage", len(froms))
	}
	for _, img := range froms {
		_, tag, ok := strings.Cut(img[strings.LastIndex(img, "/")+1:], ":")
		if !ok || tag == "" || tag == "latest" {
			t.Errorf("Dockerfile base image %s is not pinned to a tag", img)
		}
	}
	makefile := mustRead(t, "Makefile")
	toolchain := ""
	for _, line := range strings.Split(makefile, "\n") {
		if v, ok := strings.CutPrefix(line, "export GOTOOLCHAIN := go"); ok {
			toolchain = strings.TrimSpace(v)
		}
	}
	if toolchain == "" || !strings.HasPrefix(froms[0], "golang:"+toolchain+"-") {
		t.Errorf("the build stage %s does not use the Makefile's Go toolchain go%s", froms[0], toolchain)
	}
	objs := decode(t, "helm template", render(t, "poolsmith-system"))
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		sc, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec", "securityContext")
		if want := fmt.Sprint(sc["runAsUser"]) + ":" + fmt.Sprint(sc["runAsGroup"]); user != want {
			t.Errorf("Dockerfile USER %q, want %s (the chart's runAsUser and runAsGroup)", user, want)
		}
	}
}

// TestCRDChartAdoptsUpgradesAndKeepsTheCRDs follows docs/deploying.md's path from crds/ to
// charts/poolsmith-crd: the CRDs installed without it are adopted (the labels and
// annotations Helm requires), installed by it, and kept when it is uninstalled.
func TestCRDChartAdoptsUpgradesAndKeepsTheCRDs(t *testing.T) {
	names := []string{"accessrules.poolsmith.dev", "baselines.poolsmith.dev", "workloadclasses.poolsmith.dev"}
	for _, o := range decode(t, "charts/poolsmith-crd", mustHelm(t, "template", "poolsmith-crd", "charts/poolsmith-crd")) {
		if o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s lacks helm.sh/resource-policy: keep; helm uninstall would delete every class", o.Where())
		}
	}
	if _, err := helm(t, "install", "poolsmith-crd", "charts/poolsmith-crd", "--namespace", "default"); err == nil {
		t.Fatal("helm installed poolsmith-crd over CRDs it does not own; docs/deploying.md says adoption is needed")
	}
	for _, name := range names {
		patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":"poolsmith-crd","meta.helm.sh/release-namespace":"default"}}}`
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	mustHelm(t, "install", "poolsmith-crd", "charts/poolsmith-crd", "--namespace", "default")
	mustHelm(t, "upgrade", "poolsmith-crd", "charts/poolsmith-crd", "--namespace", "default")
	out := mustHelm(t, "uninstall", "poolsmith-crd", "--namespace", "default")
	for _, name := range names {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v\n%s", name, err, out)
		}
	}
}
