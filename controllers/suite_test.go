package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/testenv"
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

// startManager runs the same manager `poolsmith manager` runs, leader election off.
func startManager() {
	mgrCtx, cancel := context.WithCancel(ctx)
	mgr, err := operator.New(mgrCtx, env.Config, operator.Options{MetricsAddr: "0", ProbeAddr: "0", MaxConcurrentReconciles: 4, SkipNameValidation: true, NodeOverlays: true})
	Expect(err).NotTo(HaveOccurred())
	stopMgr, mgrDone = cancel, make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
}

func stopManager() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
		stopMgr = nil
	}
}
