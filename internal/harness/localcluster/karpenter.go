package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	kubeletcel "github.com/aws/karpenter-provider-aws/pkg/cel"
	awscloudprovider "github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider/registrationhooks"
	awscontrollers "github.com/aws/karpenter-provider-aws/pkg/controllers"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	awsoperator "github.com/aws/karpenter-provider-aws/pkg/operator"
	awsoptions "github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/amifamily"
	zonalshiftprovider "github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instanceprofile"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancestatus"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/launchtemplate"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/pricing"
	"github.com/aws/karpenter-provider-aws/pkg/providers/securitygroup"
	ssmprovider "github.com/aws/karpenter-provider-aws/pkg/providers/ssm"
	"github.com/aws/karpenter-provider-aws/pkg/providers/subnet"
	"github.com/aws/karpenter-provider-aws/pkg/providers/version"
	"github.com/patrickmn/go-cache"

	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
	"github.com/samber/lo"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	corecontrollers "sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	coreoperator "sigs.k8s.io/karpenter/pkg/operator"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"
)

// clusterEndpoint is what launch templates' user data names; no node ever dials it.
const clusterEndpoint = "https://poolsmith-local.invalid"

// karpenter is a configured operator, ready to start.
type karpenter struct {
	ctx context.Context
	op  *coreoperator.Operator
	// unavailable is the AWS provider's memory of offerings that failed for capacity.
	unavailable *awscache.UnavailableOfferings
}

// Start runs the operator until ctx is done.
func (k *karpenter) Start(ctx context.Context) {
	kctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	go func() { <-ctx.Done(); cancel() }()
	k.op.Start(kctx)
}

// startKarpenter configures Karpenter's operator the way its Helm chart does (through the
// environment) and wires its providers and controllers as the provider's
// cmd/controller/main.go and pkg/operator.NewOperator do, with the simulated account in
// place of the AWS SDK clients.
func startKarpenter(ctx context.Context, c *Cluster, opts Options) (*karpenter, error) {
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	gates := fmt.Sprintf("NodeOverlay=%t,CapacityBuffer=%t", opts.NodeOverlays, opts.CapacityBuffer)
	for key, value := range map[string]string{
		"KUBECONFIG":              c.Kubeconfig,
		"DISABLE_LEADER_ELECTION": "true",
		"CLUSTER_NAME":            ClusterName,
		"CLUSTER_ENDPOINT":        clusterEndpoint,
		"METRICS_PORT":            metricsPort,
		"HEALTH_PROBE_PORT":       probePort,
		"LOG_LEVEL":               opts.KarpenterLogLevel,
		"LOG_OUTPUT_PATHS":        c.logFile.Name(),
		"LOG_ERROR_OUTPUT_PATHS":  c.logFile.Name(),
		// Short batching windows: scenarios create a Deployment at a time.
		"BATCH_IDLE_DURATION": "1s",
		"BATCH_MAX_DURATION":  "3s",
		"FEATURE_GATES":       gates,
	} {
		if err := os.Setenv(key, value); err != nil {
			return nil, fmt.Errorf("configuring Karpenter: %w", err)
		}
	}
	// Karpenter parses os.Args[1:] as its own flags, when the operator is built and again
	// when its manager starts: a test binary's flags would make it exit.
	os.Args = os.Args[:1]

	kctx, op := coreoperator.NewOperator()
	cloud := c.Cloud
	cfg := aws.Config{Region: cloud.Region()}
	eksapi := fake.NewEKSAPI()
	iamapi := fake.NewIAMAPI()
	zonalShift := zonalshiftprovider.NewNoopProvider()

	unavailableOfferings := awscache.NewUnavailableOfferings()
	ssmCache := cache.New(awscache.SSMCacheTTL, awscache.DefaultCleanupInterval)
	validationCache := awscache.NewJitteredCache(awscache.ValidationTTL, 5*time.Minute, awscache.DefaultCleanupInterval)
	recreationCache := cache.New(awscache.RecreationTTL, awscache.DefaultCleanupInterval)

	subnetRefresh := awsoptions.FromContext(kctx).SubnetRefreshInterval
	subnetIPCacheTTL := max(awscache.AvailableIPAddressTTL, subnetRefresh+(awscache.AvailableIPAddressTTL-awscache.DefaultTTL))
	subnets := subnet.NewDefaultProvider(cloud, cache.New(subnetRefresh, awscache.DefaultCleanupInterval), cache.New(subnetIPCacheTTL, awscache.DefaultCleanupInterval))
	securityGroups := securitygroup.NewDefaultProvider(cloud, cache.New(awsoptions.FromContext(kctx).SecurityGroupRefreshInterval, awscache.DefaultCleanupInterval))
	instanceProfiles := instanceprofile.NewDefaultProvider(iamapi,
		cache.New(awscache.InstanceProfileTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DefaultCleanupInterval, awscache.DefaultCleanupInterval),
		cache.New(awscache.ProtectedProfilesTTL, awscache.DefaultCleanupInterval),
		cfg.Region)
	prices := pricing.NewDefaultProvider(cloud.PricingAPI(), cloud, cfg.Region, false)
	// Load the catalog's prices before the first instance types are computed; the pricing
	// controller refreshes them from the same source.
	if err := prices.UpdateOnDemandPricing(kctx); err != nil {
		return nil, fmt.Errorf("loading on-demand prices: %w", err)
	}
	if err := prices.UpdateSpotPricing(kctx); err != nil {
		return nil, fmt.Errorf("loading spot prices: %w", err)
	}
	versions := version.NewDefaultProvider(op.KubernetesInterface, eksapi)
	if err := versions.UpdateVersion(kctx); err != nil {
		return nil, fmt.Errorf("discovering the Kubernetes version: %w", err)
	}
	amis := amifamily.NewDefaultProvider(op.Clock, versions, ssmprovider.NewDefaultProvider(fakeec2.SSM{}, ssmCache), cloud,
		cache.New(awsoptions.FromContext(kctx).AMIRefreshInterval, awscache.DefaultCleanupInterval))
	placementGroups := placementgroup.NewProvider(cloud,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval))
	celEnv, err := kubeletcel.NewEnvironment()
	if err != nil {
		return nil, fmt.Errorf("building Karpenter's CEL environment: %w", err)
	}
	var instanceTypes *instancetype.DefaultProvider
	amiResolver := amifamily.NewDefaultResolver(cfg.Region, func(name string) (amifamily.ENILimits, bool) {
		if instanceTypes == nil {
			return amifamily.ENILimits{}, false
		}
		return instanceTypes.ENILimits(name)
	}, celEnv)
	caBundle, err := awsoperator.GetCABundle(kctx, op.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("reading the API server's CA bundle: %w", err)
	}
	launchTemplates := launchtemplate.NewDefaultProvider(kctx,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cloud, eksapi, amiResolver, securityGroups, subnets, placementGroups,
		caBundle, op.Elected(), net.ParseIP("10.100.0.10"), clusterEndpoint)
	launchTemplates.ClusterCIDR.Store(lo.ToPtr("10.100.0.0/16"))
	capacityReservations := capacityreservation.NewProvider(cloud, op.Clock,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.CapacityReservationAvailabilityTTL, awscache.DefaultCleanupInterval))
	instanceTypes = instancetype.NewDefaultProvider(
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DiscoveredCapacityCacheTTL, awscache.DefaultCleanupInterval),
		cloud, subnets, prices, capacityReservations, placementGroups, unavailableOfferings,
		instancetype.NewDefaultResolver(cfg.Region, celEnv), zonalShift, op.GetClient(), celEnv)
	if err := instanceTypes.UpdateInstanceTypes(kctx); err != nil {
		return nil, fmt.Errorf("loading instance types: %w", err)
	}
	if err := instanceTypes.UpdateInstanceTypeOfferings(kctx); err != nil {
		return nil, fmt.Errorf("loading instance type offerings: %w", err)
	}
	instances := instance.NewDefaultProvider(kctx, cfg.Region, op.EventRecorder, cloud, unavailableOfferings,
		subnets, launchTemplates, capacityReservations, placementGroups, zonalShift,
		cache.New(cache.NoExpiration, cache.NoExpiration))
	instanceStatus := instancestatus.NewDefaultProvider(cloud, op.Clock)
	awsoperator.SetupIndexers(kctx, op.Manager)

	// From here on, as cmd/controller/main.go.
	awsCloudProvider := awscloudprovider.New(instanceTypes, instances, op.EventRecorder, op.GetClient(),
		amis, securityGroups, capacityReservations, placementGroups, op.InstanceTypeStore, caBundle,
		awscloudprovider.WithLegacyRepairPolicies(coreoptions.FromContext(kctx).LegacyNodeRepair),
		awscloudprovider.WithRebootForRepair(awsoptions.FromContext(kctx).FeatureGates.RebootForRepair))
	overlayUndecorated := metrics.Decorate(awsCloudProvider)
	cloudProvider := overlay.Decorate(overlayUndecorated, op.GetClient(), op.InstanceTypeStore)
	repair, err := health.NewRepairPolicyMatcher(kctx, cloudProvider)
	if err != nil {
		return nil, fmt.Errorf("building Karpenter's repair policies: %w", err)
	}
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repair))
	if coreoptions.FromContext(kctx).FeatureGates.ReservedCapacity {
		awsv1.CapacityReservationsEnabled = true
	}
	op.WithControllers(kctx, corecontrollers.NewControllers(kctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
		cloudProvider, overlayUndecorated, clusterState, op.InstanceTypeStore, op.PredictionStore,
		corecontrollers.WithRegistrationHook(registrationhooks.NewPlacementGroupRegistrationHook(instances)))...).
		WithControllers(kctx, awscontrollers.NewControllers(kctx, op.Manager, cfg, op.Clock, cloud, op.GetClient(),
			op.EventRecorder, unavailableOfferings, ssmCache, validationCache, recreationCache,
			cloudProvider, subnets, securityGroups, instanceProfiles, instances,
			prices, amis, launchTemplates, versions, instanceTypes,
			capacityReservations, placementGroups, amiResolver, zonalShift,
			instanceStatus, caBundle, celEnv)...)
	return &karpenter{ctx: kctx, op: op, unavailable: unavailableOfferings}, nil
}
