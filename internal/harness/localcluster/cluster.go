package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
	"github.com/poolsmith/poolsmith/internal/harness/fakekubelet"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/operator"
)

// DefaultTypes are the instance types the simulated account offers: enough families,
// sizes and architectures for every sample class to have types on every rung (general,
// ci, analytics with at least 64 GiB, gpu with g6 and g5), and few enough that
// Karpenter's scheduling stays fast on two cores. t4g (generation 4) is in no sample
// class, so tests that switch its capacity off leave the samples' offerings alone.
var DefaultTypes = []string{
	"t4g.large", "t4g.xlarge",
	"c6g.large", "c7g.large", "c7g.xlarge", "c7g.2xlarge", "m7g.large", "m7g.xlarge", "m7g.2xlarge",
	"r7g.large", "r7g.xlarge", "r7g.2xlarge", "x2gd.xlarge",
	"c6i.large", "c7i.large", "c7i.xlarge", "c7i.2xlarge", "m6i.large", "m7i.large", "m7i.xlarge", "m7i.2xlarge",
	"r7i.large", "r7i.xlarge", "r7i.2xlarge",
	// Only the capacity reservation scenarios select these (categories i and im).
	"i4g.large", "im4gn.large",
	"g6.xlarge", "g6.2xlarge", "g6.12xlarge", "g5.xlarge", "g5.2xlarge", "g5.12xlarge",
}

// DefaultDiscoveryTags are the tags the seeded subnets and security group carry: the
// sample Baseline's selectors.
var DefaultDiscoveryTags = map[string]string{"karpenter.sh/discovery": "prod"}

// ClusterName is the cluster name Karpenter tags instances with.
const ClusterName = "poolsmith-local"

// Options configure Start.
type Options struct {
	// Types offered by the simulated account; DefaultTypes when empty.
	Types []string
	// DiscoveryTags of the seeded subnets and security group; DefaultDiscoveryTags when nil.
	DiscoveryTags map[string]string
	// NodeOverlays turns on Karpenter's NodeOverlay feature gate and Poolsmith's overlays.
	NodeOverlays bool
	// LogDir receives kube-scheduler.log, kube-controller-manager.log and karpenter.log
	// (Karpenter's and Poolsmith's logs), created with its parents when missing; a new
	// temporary directory when empty.
	LogDir string
	// KarpenterLogLevel is Karpenter's LOG_LEVEL; "info" when empty.
	KarpenterLogLevel string
	// CapacityBuffer turns on Karpenter's CapacityBuffer feature gate (alpha, off by
	// default): its buffer controller and the provisioner's virtual pods.
	CapacityBuffer bool
	// Headroom runs the manager with --headroom=pods, or --headroom=auto with
	// CapacityBuffer (the chart's default; its probe finds Karpenter's gate on and
	// chooses CapacityBuffer), after installing the headroom namespace and PriorityClass
	// as the chart's headroom.enabled does (HeadroomObjects).
	Headroom bool
}

// Cluster is a running local cluster.
type Cluster struct {
	Env *testenv.Env
	// Client talks to the API server directly (no cache).
	Client client.Client
	// Config is an admin REST config.
	Config *rest.Config
	// Cloud is the simulated EC2 account: switch capacity, read launches.
	Cloud *fakeec2.Cloud
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// LogDir holds the components' logs.
	LogDir string
	// MetricsURL is where Poolsmith's manager serves its metrics (plain HTTP on a free
	// loopback port), for a Prometheus to scrape.
	MetricsURL string

	karpenter *karpenter
	cancel    context.CancelFunc
	done      sync.WaitGroup
	mgrErr    chan error
	processes []*process
	logFile   *os.File
}

var started sync.Once

// Start starts the control plane, kube-scheduler, kube-controller-manager, Karpenter on
// the simulated account, the kubelet stand-in and Poolsmith's manager, which run until
// ctx is done or Stop is called. It may be called once per process.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	first := false
	started.Do(func() { first = true })
	if !first {
		return nil, errors.New("a local cluster was already started in this process: Karpenter's operator runs once per process")
	}
	if len(opts.Types) == 0 {
		opts.Types = DefaultTypes
	}
	if opts.DiscoveryTags == nil {
		opts.DiscoveryTags = DefaultDiscoveryTags
	}
	if opts.KarpenterLogLevel == "" {
		opts.KarpenterLogLevel = "info"
	}
	if opts.LogDir, err = logDir(opts.LogDir); err != nil {
		return nil, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	cloud, err := fakeec2.New(cat, fakeec2.Options{Types: opts.Types, DiscoveryTags: opts.DiscoveryTags})
	if err != nil {
		return nil, fmt.Errorf("seeding the simulated EC2 account: %w", err)
	}

	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	c = &Cluster{Env: env, Client: env.Client, Config: env.Config, Cloud: cloud, LogDir: opts.LogDir, cancel: cancel, mgrErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	if c.Kubeconfig, err = writeKubeconfig(env.Environment, opts.LogDir); err != nil {
		return c, err
	}
	if c.logFile, err = os.Create(filepath.Join(opts.LogDir, "karpenter.log")); err != nil {
		return c, fmt.Errorf("creating karpenter.log: %w", err)
	}

	for _, p := range []*process{
		{name: "kube-scheduler", args: []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0", "-v=1"}},
		{name: "kube-controller-manager", args: []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
			// Not nodelifecycle: it would mark the kubelet-less nodes unreachable. The job
			// controller runs the sample training Job. Each controller acts as its own
			// service account, as on EKS: the access policy exempts the DaemonSet
			// controller's pods by that identity. taint-eviction-controller evicts pods
			// that do not tolerate a node's NoExecute taints (a restricted class's access
			// taint among them), as in a real cluster.
			"--use-service-account-credentials",
			"--controllers=garbagecollector,replicaset,deployment,disruption,job,daemonset,statefulset,cronjob,replicationcontroller,taint-eviction-controller", "-v=1"}},
	} {
		if err := p.start(runCtx, opts.LogDir); err != nil {
			return c, err
		}
		c.processes = append(c.processes, p)
	}

	karpenter, err := startKarpenter(runCtx, c, opts)
	if err != nil {
		return c, err
	}
	c.karpenter = karpenter
	c.done.Go(func() { karpenter.Start(runCtx) })

	// Karpenter has set the process's loggers; Poolsmith's manager logs beside it.
	ctrl.SetLogger(zap.New(zap.WriteTo(c.logFile)))
	kubelet := &fakekubelet.Kubelet{Client: env.Client, Log: ctrl.Log.WithName("kubelet-stand-in")}
	c.done.Go(func() { kubelet.Run(runCtx) })

	caps := capabilities.Capabilities{NodeOverlays: opts.NodeOverlays}
	if opts.Headroom {
		if err := installHeadroom(runCtx, env.Client); err != nil {
			return c, err
		}
		caps.Headroom = v1alpha1.HeadroomPods
		if opts.CapacityBuffer {
			caps.Headroom = v1alpha1.HeadroomAuto
		}
	}
	metricsPort, err := freePort()
	if err != nil {
		return c, err
	}
	c.MetricsURL = "http://127.0.0.1:" + metricsPort + "/metrics"
	mgr, err := operator.New(runCtx, env.Config, operator.Options{
		MetricsAddr: "127.0.0.1:" + metricsPort, ProbeAddr: "0", MaxConcurrentReconciles: 4, Capabilities: caps, Region: cloud.Region(),
	})
	if err != nil {
		return c, err
	}
	c.done.Go(func() { c.mgrErr <- mgr.Start(runCtx) })
	return c, nil
}

// ManagerErr reports Poolsmith's manager stopping.
func (c *Cluster) ManagerErr() <-chan error { return c.mgrErr }

// ForgetCapacityErrors makes Karpenter forget that the given instance types failed for
// capacity at capacityType in any zone, as it does on its own 3 minutes after the last
// failure: a test that switched their capacity off and on again leaves no memory of it
// to the tests after it.
func (c *Cluster) ForgetCapacityErrors(capacityType string, types []string) {
	for _, t := range types {
		for _, z := range c.Cloud.Zones() {
			c.karpenter.unavailable.Delete(ec2types.InstanceType(t), z, capacityType)
		}
	}
}

// Stop stops every component and the control plane.
func (c *Cluster) Stop() error {
	c.cancel()
	for _, p := range c.processes {
		p.stop()
	}
	waited := make(chan struct{})
	go func() { c.done.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
	}
	err := c.Env.Stop()
	if c.logFile != nil {
		_ = c.logFile.Close()
	}
	return err
}

func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding an admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("writing a kubeconfig: %w", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// logDir returns dir, created with its parents when it does not exist (DEMO_LOG_DIR and
// E2E_LOG_DIR name directories a user has not made yet), or a new temporary directory
// when dir is empty.
func logDir(dir string) (string, error) {
	if dir == "" {
		dir, err := os.MkdirTemp("", "poolsmith-localcluster-")
		if err != nil {
			return "", fmt.Errorf("creating a log directory: %w", err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the log directory %s: %w", dir, err)
	}
	return dir, nil
}

// freePort asks the kernel for a port nothing listens on.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
