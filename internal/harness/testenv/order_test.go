package testenv_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/render"
)

// The access policy is failurePolicy Fail over a Poolsmith CRD: installed before the CRD
// is served, it refuses every pod outside kube-system; installed after, and removed before
// it, it refuses none. The chart and config/ install in the safe order.
var _ = Describe("The access policy's install and uninstall order", Ordered, func() {
	var order *testenv.Env
	const crdName = "accessrules.poolsmith.dev"
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}, AutomountServiceAccountToken: ptr.To(false)},
		}
	}
	admit := func(ns string) func() error {
		return func() error { return order.Client.Create(ctx, pod(ns), client.DryRunAll) }
	}
	crdKind := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	crd := func() *unstructured.Unstructured {
		root, err := testenv.ModuleDir("")
		Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join(root, "config/crd/bases/poolsmith.dev_accessrules.yaml"))
		Expect(err).NotTo(HaveOccurred())
		c := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(b, &c.Object)).To(Succeed())
		return c
	}
	deleteCRD := func() {
		c := &unstructured.Unstructured{}
		c.SetGroupVersionKind(crdKind)
		c.SetName(crdName)
		Expect(order.Client.Delete(ctx, c)).To(Succeed())
		Eventually(func() bool {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crdKind)
			return apierrors.IsNotFound(order.Client.Get(ctx, client.ObjectKey{Name: crdName}, got))
		}, "30s").Should(BeTrue())
	}

	BeforeAll(func() {
		var err error
		order, err = testenv.Start(testenv.WithoutAdmissionPolicies())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(order.Stop)
		for _, ns := range []string{"default", "kube-system"} {
			Expect(order.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
		}
	})

	It("refuses every pod outside kube-system while the policy is installed without its CRD, until the CRD is served", func() {
		deleteCRD()
		Expect(testenv.InstallAdmissionPolicies(order.Client)).To(Succeed())
		Eventually(admit("default"), "30s").Should(MatchError(ContainSubstring(render.AccessPolicyName)))
		Expect(admit("kube-system")()).To(Succeed())
		start := time.Now()
		Expect(order.Client.Create(ctx, crd())).To(Succeed())
		Eventually(admit("default"), "90s", "500ms").Should(Succeed())
		AddReportEntry("access policy installed before its CRD", "pods refused until "+time.Since(start).Round(time.Second).String()+" after the CRD was created")
	})

	It("refuses nothing when the policies go before the CRD on uninstall", func() {
		for _, obj := range render.AdmissionPolicies(render.DefaultOwnership, render.DefaultHeadroomWriters) {
			Expect(client.IgnoreNotFound(order.Client.Delete(ctx, obj))).To(Succeed())
		}
		deleteCRD()
		Consistently(admit("default"), "5s").Should(Succeed())
	})
})
