package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

var (
	ctx     context.Context
	env     *testenv.Env
	stopMgr context.CancelFunc
	mgrDone chan struct{}
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	RunSpecs(t, "Controllers against a real kube-apiserver with Karpenter's CRDs")
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	startManager()
})

var _ = AfterSuite(func() {
	stopManager()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startManager runs the same manager `poolsmith manager` runs, leader election off. It
// writes as config/default's service account (what the access policy exempts in the
// headroom namespace), with the cluster administrators' group for its rights. It runs
// --headroom=capacitybuffer (the test control plane serves the CRD; no Karpenter resolves
// the buffers): classes that ask for placeholder pods say mechanism: Pods. Its fixed
// waits are shortened (suiteRebalanceRecheck, suiteCostMinWrite) so specs do not sit
// them out.
func startManager() {
	mgrCtx, cancel := context.WithCancel(ctx)
	crds, err := validate.Default()
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: render.DefaultHeadroomWriters.Manager, Groups: []string{"system:masters", "system:authenticated"}}
	cfg.Wrap(sent.wrap)
	mgr, err := operator.New(mgrCtx, cfg, operator.Options{MetricsAddr: "0", ProbeAddr: "0", MaxConcurrentReconciles: 4, SkipNameValidation: true, CommitmentOpenDwell: commitmentDwell, Capabilities: capabilities.Capabilities{NodeOverlays: true, Headroom: v1alpha1.HeadroomCapacityBuffer},
		Validator: refusing{crds}, RebalanceRecheck: suiteRebalanceRecheck, CostMinWrite: suiteCostMinWrite})
	Expect(err).NotTo(HaveOccurred())
	stopMgr, mgrDone = cancel, make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
}

// The suite's manager looks again at what the rebalance controller does not watch (pods,
// PodDisruptionBudgets) within suiteRebalanceRecheck instead of 30 s, and writes a
// class's status.cost at most once per suiteCostMinWrite instead of 15 s: still waits
// the specs must see through, of seconds instead of half a minute.
const (
	suiteRebalanceRecheck = 3 * time.Second
	suiteCostMinWrite     = 2 * time.Second
)

// labelKarpenterRefuses marks a class whose NodePools the suite's validator refuses on top
// of Karpenter's CRDs: render and admission now refuse everything those CRDs would, so a
// refusal the controller must survive has to be made.
const labelKarpenterRefuses = "example.com/karpenter-refuses"

// refusing is Karpenter's and Poolsmith's CRDs, plus a refusal of NodePools labelled
// labelKarpenterRefuses, worded as Karpenter's CEL would word it.
type refusing struct{ *validate.Validator }

func (r refusing) refuses(obj map[string]any) error {
	u := unstructured.Unstructured{Object: obj}
	labels, _, _ := unstructured.NestedStringMap(obj, "spec", "template", "metadata", "labels")
	if u.GetKind() == "NodePool" && labels[labelKarpenterRefuses] != "" {
		return apierrors.NewInvalid(u.GroupVersionKind().GroupKind(), u.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("spec", "template", "metadata", "labels"), labelKarpenterRefuses, "refused for the test"),
		})
	}
	return nil
}

func (r refusing) Create(obj map[string]any) error {
	if err := r.refuses(obj); err != nil {
		return err
	}
	return r.Validator.Create(obj)
}

func (r refusing) Update(obj, old map[string]any) error {
	if err := r.refuses(obj); err != nil {
		return err
	}
	return r.Validator.Update(obj, old)
}

func stopManager() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
		stopMgr = nil
	}
}
