package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/scheme"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// managerFlags are the manager command's flags.
type managerFlags struct {
	operator.Options
	kubeconfig       string
	signalsConfigMap string
	accessPolicies   bool
	headroom         headroomFlags
	zap              zap.Options
}

func (f *managerFlags) register(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8080", `address the Prometheus metrics endpoint binds to; "0" disables it`)
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "", "address net/http/pprof binds to, e.g. 127.0.0.1:6060; empty (the default) disables it")
	fs.BoolVar(&f.LeaderElection, "leader-elect", true, "elect a leader so only one replica reconciles; turn off for a single local run")
	fs.StringVar(&f.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease; required out of cluster when --leader-elect is on")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes the Lease")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps retrying to renew before it stops (the process exits); less than the lease duration")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	fs.StringVar(&f.UserAgent, "user-agent", "", "User-Agent of this replica's API requests, e.g. to tell replicas apart in the audit log; client-go's default (poolsmith/<version> ...) when empty")
	fs.IntVar(&f.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "WorkloadClasses reconciled in parallel")
	fs.Float32Var(&f.QPS, "kube-api-qps", 50, "steady queries per second to the API server")
	fs.IntVar(&f.Burst, "kube-api-burst", 100, "burst of queries to the API server")
	fs.StringVar(&f.Region, "region", catalog.DefaultRegion, "the cluster's AWS region: selects the prices and spot signals cost weights use")
	fs.StringVar(&f.signalsConfigMap, "signals-configmap", operator.DefaultSignalsConfigMap.String(), "NAMESPACE/NAME of the ConfigMap holding the Spot Instance Advisor feed; it is watched")
	fs.BoolVar(&f.Capabilities.NodeOverlays, "node-overlays", false, "let classes render NodeOverlays (weighting.nodeOverlays); needs Karpenter's NodeOverlay CRD and feature gate")
	fs.BoolVar(&f.accessPolicies, "access-policies", true, "enforce spec.access and namespace default classes: write each class's AccessRule, the parameter of the admission policies the chart installs; false writes none (AccessRules written earlier stay enforced until they or their class are deleted)")
	f.headroom.manager = true
	f.headroom.register(fs, "placeholder pods run at the PriorityClass poolsmith-headroom, which the chart installs")
	fs.DurationVar(&f.SignalsMaxAge, "signals-max-age", operator.DefaultSignalsMaxAge, "how old spot signals may be before they count as stale and the catalog is used instead")
	fs.DurationVar(&f.CommitmentOpenDwell, "commitment-open-dwell", commitment.DefaultOpenDwell, "how long two nodes of room must hold before a Savings Plan or Reserved Instance Exhausted for a class ranks its rungs again (hysteresis; docs/commitments.md)")
	goflags := flag.NewFlagSet("zap", flag.ContinueOnError)
	f.zap.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
}

func newManagerCommand() *cobra.Command {
	var flags managerFlags
	c := &cobra.Command{
		Use:   "manager",
		Short: "Run the operator (also what poolsmith runs with no command)",
		Long: `Run the Poolsmith operator: it renders every WorkloadClass on top of its Baseline and
keeps the generated EC2NodeClass and NodePools in sync, reporting in the class's status.`,
		Example: `  poolsmith manager --leader-elect=false --kubeconfig ~/.kube/config
  poolsmith --leader-election-namespace poolsmith-system`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runManager(c, &flags) },
	}
	flags.register(c)
	return c
}

func runManager(c *cobra.Command, flags *managerFlags) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&flags.zap)))
	cfg, inCluster, err := restConfig(flags.kubeconfig)
	if err != nil {
		return usageError{err}
	}
	if flags.LeaderElection && flags.LeaderElectionNamespace == "" && !inCluster {
		return usageError{fmt.Errorf("--leader-election-namespace is required out of cluster while --leader-elect is on (or pass --leader-elect=false)")}
	}
	ns, name, ok := strings.Cut(flags.signalsConfigMap, "/")
	if !ok || ns == "" || name == "" {
		return usageError{fmt.Errorf("--signals-configmap %q must be NAMESPACE/NAME", flags.signalsConfigMap)}
	}
	flags.SignalsConfigMap = types.NamespacedName{Namespace: ns, Name: name}
	if flags.CommitmentOpenDwell < 0 {
		return usageError{fmt.Errorf("--commitment-open-dwell %s is negative: it is how long room must hold before a commitment opens again, e.g. 5m", flags.CommitmentOpenDwell)}
	}
	flags.Capabilities.NoAccessPolicies = !flags.accessPolicies
	if err := flags.headroom.apply(&flags.Capabilities); err != nil {
		return err
	}
	// The downward API names the manager's Pod (the chart and config/manager set these).
	flags.Pod = operator.PodRef{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME"), UID: types.UID(os.Getenv("POD_UID"))}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := operator.New(ctx, cfg, flags.Options)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("poolsmith").Info("starting manager", "leaderElection", flags.LeaderElection, "metrics", flags.MetricsAddr)
	return mgr.Start(ctx)
}

// restConfig loads --kubeconfig, or the in-cluster config, or the default loading rules.
func restConfig(kubeconfig string) (*rest.Config, bool, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		return cfg, false, err
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, true, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, false, fmt.Errorf("no kubeconfig: %w", err)
	}
	return cfg, os.Getenv("KUBERNETES_SERVICE_HOST") != "", nil
}

// liveClient is an uncached client for the offline commands that read or write a cluster.
// liveCatalog is the live client, the command's context and the priced catalog as the
// manager reads it (the signals ConfigMap cm), saying on stderr how fresh the signals are:
// what diff and cost start from.
func liveCatalog(c *cobra.Command, kubeconfig string, cm types.NamespacedName, region string, maxAge time.Duration) (client.Client, context.Context, *catalog.Catalog, error) {
	cl, err := liveClient(kubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	provider := &signals.Provider{ConfigMap: cm, Region: region, MaxAge: maxAge}
	cat, freshness, err := provider.Catalog(ctx, cl)
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Fprintf(c.ErrOrStderr(), "signals: %s: %s\n", freshness.Reason, freshness.Message)
	return cl, ctx, cat, nil
}

func liveClient(kubeconfig string) (client.Client, error) {
	cfg, _, err := restConfig(kubeconfig)
	if err != nil {
		return nil, usageError{err}
	}
	return client.New(cfg, client.Options{Scheme: scheme.Scheme})
}
