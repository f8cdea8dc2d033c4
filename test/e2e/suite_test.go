//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/poolsmith/poolsmith/internal/harness/localcluster"
)

var (
	ctx     = context.Background()
	cluster *sharedCluster
)

func TestEndToEnd(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyPollingInterval(time.Second)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	RunSpecs(t, "End to end: Karpenter v1.15.0 consumes Poolsmith's ladders")
}

// local is the cluster, in process 1 only.
var local *localcluster.Cluster

var _ = SynchronizedBeforeSuite(func() []byte {
	started := time.Now()
	var err error
	local, err = localcluster.Start(ctx, localcluster.Options{NodeOverlays: true, Headroom: true, CapacityBuffer: true, LogDir: os.Getenv("E2E_LOG_DIR")})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("local cluster up in %s; logs in %s\n", time.Since(started).Round(100*time.Millisecond), local.LogDir)
	AddReportEntry("cluster start", time.Since(started).Round(100*time.Millisecond).String())
	// The Baseline every test class uses.
	Expect(local.Client.Create(ctx, baseline("e2e", "prod"))).To(Succeed())
	control, err := serveControl(local)
	Expect(err).NotTo(HaveOccurred())
	data, err := json.Marshal(endpoint{Kubeconfig: local.Kubeconfig, LogDir: local.LogDir, Control: control, Metrics: local.MetricsURL})
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	var ep endpoint
	Expect(json.Unmarshal(data, &ep)).To(Succeed())
	var err error
	cluster, err = connect(ep)
	Expect(err).NotTo(HaveOccurred())
	cluster.Local = local
})

// Process 1 stops the cluster once every other process is done.
var _ = SynchronizedAfterSuite(func() {}, func() {
	if local != nil {
		Expect(local.Stop()).To(Succeed())
	}
})

// Each scenario's duration is printed as it ends (shown by `ginkgo -v`, or for a failed
// scenario), and again with the suite's wall time in the summary below.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.State.Is(types.SpecStateSkipped) {
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: %-70s %-7s %s\n", r.LeafNodeText, r.State, r.RunTime.Round(100*time.Millisecond))
	if r.Failed() && cluster != nil {
		fmt.Fprintf(os.Stderr, "e2e: component logs in %s\n", filepath.Clean(cluster.LogDir))
	}
})

// The suite's cost, once, in process 1 with every process's reports: each scenario's
// duration, process and whether it ran Serial, longest first, then the wall time, then
// the FIGURES the scenarios reported.
var _ = ReportAfterSuite("e2e timings", func(r Report) {
	specs := r.SpecReports.WithLeafNodeType(types.NodeTypeIt)
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].RunTime > specs[j].RunTime })
	for _, s := range specs {
		if s.State.Is(types.SpecStateSkipped) {
			continue
		}
		serial := ""
		if s.IsSerial {
			serial = " serial"
		}
		fmt.Printf("e2e: %8s  %-7s process %d%s  %s\n", s.RunTime.Round(time.Second), s.State, s.ParallelProcess, serial, s.FullText())
	}
	fmt.Printf("e2e: suite wall time %s (%d processes)\n", r.RunTime.Round(time.Second), r.SuiteConfig.ParallelTotal)
	// What scenarios measured (their FIGURES report entries), which ginkgo shows only with -v.
	for _, s := range specs {
		for _, e := range s.ReportEntries {
			if strings.HasPrefix(e.Name, "FIGURES ") {
				fmt.Printf("%s: %s\n", e.Name, e.StringRepresentation())
			}
		}
	}
})
