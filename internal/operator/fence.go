package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/transport"
)

// ErrLeaseExpired refuses a write made after the replica last renewed its Lease longer
// ago than the renew deadline: another replica may lead by now.
var ErrLeaseExpired = errors.New("not writing: this replica has not renewed its leader Lease within the renew deadline, so another replica may lead")

// defaultRenewDeadline is controller-runtime's, used when Options.RenewDeadline is zero.
const defaultRenewDeadline = 10 * time.Second

// fenced returns, with leader election on, a copy of cfg whose writes pass the fence and
// the Lease lock that feeds it; cfg and a nil lock otherwise.
func fenced(ctx context.Context, cfg *rest.Config, opts Options) (*rest.Config, *fencedLock, error) {
	if !opts.LeaderElection {
		return cfg, nil, nil
	}
	f := &fence{valid: defaultRenewDeadline}
	if opts.RenewDeadline > 0 {
		f.valid = opts.RenewDeadline
	}
	lock, err := f.lock(ctx, cfg, opts.LeaderElectionNamespace, LeaderElectionID, f.valid)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the leader-election lock: %w", err)
	}
	if f.writes, err = f.writeTransport(cfg); err != nil {
		return nil, nil, fmt.Errorf("building the fenced write transport: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(f.guard)
	return cfg, lock, nil
}

// writeTransport is an HTTP transport of cfg's TLS and proxy settings, for writes only,
// on connections of its own that check the fence again before every write to the
// socket. The guard's check alone left a window: a replica stopped after the check and
// before its request reached the wire sent the request when continued, after another
// replica took the Lease (test/chaos's SIGSTOP scenario met one create, once in three
// runs). Frames reach this connection's socket only for writes, so a refusal there
// stops a write and nothing else; the connection fails, and the next write dials anew.
func (f *fence) writeTransport(cfg *rest.Config) (http.RoundTripper, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, err
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if tc.DialHolder != nil && tc.DialHolder.Dial != nil {
		dial = tc.DialHolder.Dial
	}
	return utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               tc.Proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &fencedConn{Conn: c, fence: f}, nil
		},
	}), nil
}

// fencedConn refuses to send bytes unless the fence is held.
type fencedConn struct {
	net.Conn
	fence *fence
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if !c.fence.held() {
		return 0, ErrLeaseExpired
	}
	return c.Conn.Write(b)
}

// fence keeps a replica that lost its Lease without noticing (stopped, starved of CPU,
// cut off) from writing. controller-runtime stops the manager only once its elector runs
// again and fails to renew; reconciles already under way when the process was frozen
// would go on writing beside the new leader. Every write first checks, on the monotonic
// clock (which runs on while a process is stopped), that the Lease was renewed within the
// renew deadline, which is shorter than the lease duration other replicas wait out.
type fence struct {
	valid time.Duration
	// writes carries the writes the guard lets through (writeTransport); nil sends them
	// on the wrapped transport, as reads are.
	writes http.RoundTripper

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal was sent
}

// held reports whether this replica renewed its Lease recently enough to write.
func (f *fence) held() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.renewed.IsZero() && time.Since(f.renewed) < f.valid
}

func (f *fence) renew(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sent.After(f.renewed) {
		f.renewed = sent
	}
}

// guard wraps the transport of every client but the elector's: writes fail with
// ErrLeaseExpired unless the Lease is held.
func (f *fence) guard(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !f.held() {
				return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrLeaseExpired)
			}
			if f.writes != nil {
				return f.writes.RoundTrip(req)
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return r(req) }

// lock is the Lease lock controller-runtime would build (same identity scheme, namespace,
// client timeout and "became leader" event), reporting each successful acquisition or
// renewal to the fence.
func (f *fence) lock(ctx context.Context, cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*fencedLock, error) {
	if namespace == "" {
		data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, fmt.Errorf("no leader-election namespace given and not in a cluster: %w", err)
		}
		namespace = strings.TrimSpace(string(data))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not cost the Lease.
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: core.Events("")})
	go func() { <-ctx.Done(); events.Shutdown() }()
	l, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: id})})
	if err != nil {
		events.Shutdown()
		return nil, err
	}
	return &fencedLock{Interface: l, fence: f}, nil
}

// fencedLock tells the fence when a write of the Lease naming this replica succeeded.
type fencedLock struct {
	resourcelock.Interface
	fence *fence
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, ler)
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.fence.renew(sent)
	}
	return err
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.fence.renew(sent)
	}
	return err
}
