//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/poolsmith/poolsmith/internal/localcluster"
)

var (
	ctx     = context.Background()
	cluster *localcluster.Cluster
	started time.Time
)

func TestEndToEnd(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyPollingInterval(time.Second)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	RunSpecs(t, "End to end: Karpenter v1.15.0 consumes Poolsmith's ladders")
}

var _ = BeforeSuite(func() {
	started = time.Now()
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{NodeOverlays: true, LogDir: os.Getenv("E2E_LOG_DIR")})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("local cluster up in %s; logs in %s\n", time.Since(started).Round(100*time.Millisecond), cluster.LogDir)
	AddReportEntry("cluster start", time.Since(started).Round(100*time.Millisecond).String())
	// The Baseline every test class uses.
	Expect(cluster.Client.Create(ctx, baseline("e2e", "prod"))).To(Succeed())
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

// Each scenario's duration is printed, so the suite's cost is visible in every run.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.State.Is(types.SpecStateSkipped) {
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: %-70s %-7s %s\n", r.LeafNodeText, r.State, r.RunTime.Round(100*time.Millisecond))
	if r.Failed() && cluster != nil {
		fmt.Fprintf(os.Stderr, "e2e: component logs in %s\n", filepath.Clean(cluster.LogDir))
	}
})
