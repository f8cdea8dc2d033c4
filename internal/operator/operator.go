// Package operator builds Poolsmith's controller-runtime manager: a cache that holds only
// Poolsmith's objects, the NodePools, EC2NodeClasses and admission policies it manages, the
// NodeClaims of its classes, the namespaces that name a default class and, once a class
// sizes its headroom by percentage, bound pods trimmed to their requests (classes and
// Baselines read item by item, internal/decode); the reconcilers
// (WorkloadClass, Baseline, rebalance), health and readiness probes, metrics and leader
// election. `poolsmith manager`, `make demo` and the controller tests all start it here.
package operator

import (
	"context"
	"fmt"
	"net/http"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/controllers"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/scheme"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// Options configure the manager; the manager command's flags fill them.
type Options struct {
	MetricsAddr string
	ProbeAddr   string
	// PprofAddr serves net/http/pprof when set (e.g. 127.0.0.1:6060); off by default.
	PprofAddr               string
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero keeps
	// controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// UserAgent names this replica's requests to the API server (audit logs, metrics);
	// client-go's default when empty.
	UserAgent               string
	MaxConcurrentReconciles int
	// Validator replaces the CRD validator every write is judged by (tests inject refusals).
	Validator plan.Validator
	QPS       float32
	Burst     int
	// SkipNameValidation allows a second manager in one process (tests restart it).
	SkipNameValidation bool
	// Region is the cluster's region, for prices; default us-east-1.
	Region string
	// SignalsConfigMap holds spot signals; default poolsmith-system/poolsmith-signals.
	SignalsConfigMap types.NamespacedName
	// SignalsMaxAge is how old signals may be; default 48h.
	SignalsMaxAge time.Duration
	// CommitmentOpenDwell is how long two nodes of room must hold before an Exhausted
	// commitment is Open again for a class; default 5m (commitment.DefaultOpenDwell).
	CommitmentOpenDwell time.Duration
	// Now is the controller's clock (tests); time.Now when nil.
	Now func() time.Time
	// RebalanceRecheck and CostMinWrite shorten the rebalance controller's look at what it
	// does not watch (default 30s) and the least time between two writes of a class's
	// status.cost (default 15s), for tests; zero keeps the defaults.
	RebalanceRecheck, CostMinWrite time.Duration
	// Capabilities are the switches the flags set (NodeOverlays, NoAccessPolicies,
	// Headroom); New adds what discovery finds (NoDefaultPolicies, HeadroomBuffers),
	// resolves Headroom auto (ResolveHeadroom) and passes the one value down.
	Capabilities capabilities.Capabilities
	// HeadroomProbeTimeout bounds --headroom=auto's probe; DefaultHeadroomProbeTimeout
	// when zero.
	HeadroomProbeTimeout time.Duration
	// Pod is the manager's own Pod (the downward API's POD_NAMESPACE, POD_NAME and
	// POD_UID, which the chart and config/manager set): --headroom=auto's choice is
	// recorded as an event on it. Without a name, only the log says it.
	Pod PodRef
}

// Defaults for Options.
var (
	DefaultSignalsConfigMap = types.NamespacedName{Namespace: "poolsmith-system", Name: "poolsmith-signals"}
	DefaultSignalsMaxAge    = 48 * time.Hour
)

// boundPods selects the pods that hold a node's resources: bound, not terminal.
var boundPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector(observe.PodNodeField, ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "poolsmith.dev"

// New returns a manager with Poolsmith's reconcilers registered.
func New(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	if opts.UserAgent != "" {
		cfg.UserAgent = opts.UserAgent
	}
	if opts.Region == "" {
		opts.Region = catalog.DefaultRegion
	}
	if opts.SignalsConfigMap.Name == "" {
		opts.SignalsConfigMap = DefaultSignalsConfigMap
	}
	if opts.SignalsMaxAge == 0 {
		opts.SignalsMaxAge = DefaultSignalsMaxAge
	}
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	// NodeClaims inherit poolsmith.dev/class from the rung's template: only the classes'
	// nodes are cached, for retirement and rebalancing.
	ofClass, err := labels.Parse(v1alpha1.LabelClass)
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		&karpv1.NodePool{}:    {Label: managed},
		&awsv1.EC2NodeClass{}: {Label: managed},
		&karpv1.NodeClaim{}:   {Label: ofClass},
		// Only the signals ConfigMap: no other ConfigMap of the cluster is cached.
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{opts.SignalsConfigMap.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", opts.SignalsConfigMap.Name),
		},
	}
	caps := opts.Capabilities
	if opts.HeadroomProbeTimeout == 0 {
		opts.HeadroomProbeTimeout = DefaultHeadroomProbeTimeout
	}
	if err := ResolveHeadroom(ctx, cfg, &caps, opts.HeadroomProbeTimeout, opts.Pod); err != nil {
		return nil, err
	}
	if caps.NodeOverlays {
		byObject[&karpv1alpha1.NodeOverlay{}] = cache.ByObject{Label: managed}
	}
	if caps.HeadroomOn() {
		// Only Poolsmith's placeholder Deployments, in the headroom namespace.
		inHeadroom := cache.ByObject{Label: managed, Namespaces: map[string]cache.Config{caps.HeadroomNamespaceOrDefault(): {}}}
		byObject[&appsv1.Deployment{}] = inHeadroom
		if caps.HeadroomBuffers {
			// And their CapacityBuffers and PodTemplates, whichever the mechanism.
			byObject[&corev1.PodTemplate{}] = inHeadroom
			byObject[&cbv1beta1.CapacityBuffer{}] = inHeadroom
		}
		// The usage a percentage-sized headroom is of: bound pods that are not terminal,
		// trimmed to their requests. The informer is built on first use (observe.Usage).
		byObject[&corev1.Pod{}] = cache.ByObject{Field: boundPods, Transform: observe.TrimPod}
	}
	caps.NoDefaultPolicies = true
	if caps.AccessRules() {
		served, err := servesMutatingPolicies(cfg)
		if err != nil {
			return nil, err
		}
		caps.NoDefaultPolicies = !served
		byObject[&v1alpha1.AccessRule{}] = cache.ByObject{Label: managed}
		// Only namespaces that name a default class.
		defaults, err := labels.Parse(v1alpha1.LabelDefaultClass)
		if err != nil {
			return nil, err
		}
		byObject[&corev1.Namespace{}] = cache.ByObject{Label: defaults}
	}
	// With leader election, every write but the elector's passes the fence (fence.go).
	cfg, lock, err := fenced(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	var leaseDuration, renewDeadline, retryPeriod *time.Duration
	if opts.LeaseDuration > 0 {
		leaseDuration = &opts.LeaseDuration
	}
	if opts.RenewDeadline > 0 {
		renewDeadline = &opts.RenewDeadline
	}
	if opts.RetryPeriod > 0 {
		retryPeriod = &opts.RetryPeriod
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.Scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		LeaseDuration:           leaseDuration,
		RenewDeadline:           renewDeadline,
		RetryPeriod:             retryPeriod,
		// The binary exits right after the manager stops, so a new leader may start at once.
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: &opts.SkipNameValidation},
		// The cache holds only the children Poolsmith labels, so its memory does not grow
		// with the cluster's other NodePools and EC2NodeClasses; and without their
		// managedFields (about a third of what it held; updates carry none, so the server
		// keeps its own).
		Cache: cache.Options{ByObject: byObject, DefaultTransform: stripManagedFields},
	}
	// One object that does not fit its Go type must not stop the list and watch of every
	// class or Baseline (internal/decode).
	mgrOpts.NewCache = func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
		newInformer, err := decode.NewInformer(cfg, o.HTTPClient)
		if err != nil {
			return nil, err
		}
		o.NewInformer = newInformer
		c, err := cache.New(cfg, o)
		if err != nil {
			return nil, err
		}
		return stoppableCache{Cache: c, stop: ctx.Done()}, nil
	}
	if lock != nil {
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := controllers.IndexBaselineName(ctx, mgr); err != nil {
		return nil, fmt.Errorf("indexing WorkloadClasses by Baseline: %w", err)
	}
	if err := controllers.IndexClassLabel(ctx, mgr); err != nil {
		return nil, fmt.Errorf("indexing NodePools and NodeClaims by class: %w", err)
	}
	costSignals := &signals.Provider{ConfigMap: opts.SignalsConfigMap, Region: opts.Region, MaxAge: opts.SignalsMaxAge, Now: opts.Now}
	var usage *observe.Usage
	if caps.HeadroomOn() {
		usage = &observe.Usage{NodeClaims: mgr.GetClient(), Pods: mgr.GetClient(), Namespace: caps.HeadroomNamespaceOrDefault(),
			Index: func(ctx context.Context) error {
				return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, observe.PodNodeField, func(o client.Object) []string {
					return []string{o.(*corev1.Pod).Spec.NodeName}
				})
			}}
	}
	if err := (&controllers.WorkloadClassReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("poolsmith"),
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Signals:                 costSignals,
		Validator:               opts.Validator,
		Capabilities:            caps,
		Usage:                   usage,
		ClassIndexed:            true,
		CommitmentOpenDwell:     opts.CommitmentOpenDwell,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the WorkloadClass controller: %w", err)
	}
	if err := (&controllers.RebalanceReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("poolsmith"),
		Signals: costSignals, Region: opts.Region, Now: opts.Now, Recheck: opts.RebalanceRecheck,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the rebalance controller: %w", err)
	}
	if err := (&controllers.CostReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Signals: costSignals, Now: opts.Now, MinWrite: opts.CostMinWrite, ClassIndexed: true,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the cost controller: %w", err)
	}
	if err := (&controllers.BaselineReconciler{Client: mgr.GetClient(), Signals: costSignals}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the Baseline controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("cache not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// servesMutatingPolicies asks the API server's discovery whether it serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, before the cache is built.
func servesMutatingPolicies(cfg *rest.Config) (bool, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return false, fmt.Errorf("creating a REST mapper: %w", err)
	}
	return observe.ServesMutatingPolicies(mapper)
}
