//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
	"github.com/poolsmith/poolsmith/internal/harness/localcluster"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// The suite runs its scenarios in parallel Ginkgo processes (`ginkgo -p`, as `make e2e`
// does) against one local cluster. Karpenter's operator runs once per process, so
// process 1 starts the cluster and serves what only it can reach (the simulated EC2
// account, Karpenter's memory of failed offerings and its metrics registry) on a
// loopback HTTP endpoint; every process, process 1 included, reaches them through it.

// sharedCluster is a scenario's view of the cluster, the same in every process.
type sharedCluster struct {
	// Client talks to the API server directly (no cache).
	Client client.Client
	// Config is an admin REST config, for clients of other kinds.
	Config *rest.Config
	// Cloud is the simulated EC2 account: switch capacity, read launches.
	Cloud *remoteCloud
	// Kubeconfig is the path of an admin kubeconfig; LogDir holds the components' logs.
	Kubeconfig, LogDir string
	// MetricsURL is where Poolsmith's manager (in process 1) serves its metrics.
	MetricsURL string
	// Local is the cluster itself, set only in process 1, where Serial specs run: a
	// scenario that needs more of it than this type offers is Serial.
	Local *localcluster.Cluster
}

// endpoint is what process 1 hands every process.
type endpoint struct {
	Kubeconfig string `json:"kubeconfig"`
	LogDir     string `json:"logDir"`
	Control    string `json:"control"`
	Metrics    string `json:"metrics"`
}

// serveControl serves the local cluster's in-process parts on a loopback port and
// returns its base URL. The server lives as long as the process.
func serveControl(c *localcluster.Cluster) (string, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /available", func(w http.ResponseWriter, r *http.Request) {
		var req availability
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.Cloud.SetAvailable(req.Available, req.CapacityType, req.Types, req.Zones...)
	})
	mux.HandleFunc("POST /forget", func(w http.ResponseWriter, r *http.Request) {
		var req availability
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.ForgetCapacityErrors(req.CapacityType, req.Types)
	})
	// Capacity reservations: add one (POST), list them with their free counts (GET).
	mux.HandleFunc("POST /reservations", func(w http.ResponseWriter, r *http.Request) {
		var req fakeec2.CapacityReservation
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.Cloud.AddCapacityReservation(req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("GET /reservations", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(c.Cloud.CapacityReservations())
	})
	mux.HandleFunc("GET /launches", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(c.Cloud.Launches())
	})
	// The account's price list: what each pool (type, zone, capacity type) is charged.
	mux.HandleFunc("GET /prices", func(w http.ResponseWriter, _ *http.Request) {
		var out []poolPrice
		for _, t := range c.Cloud.Types() {
			for _, z := range c.Cloud.Zones() {
				for _, ct := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
					if p, ok := c.Cloud.Price(fakeec2.Pool{InstanceType: t.Name, Zone: z, CapacityType: ct}); ok {
						out = append(out, poolPrice{Pool: fakeec2.Pool{InstanceType: t.Name, Zone: z, CapacityType: ct}, PerHour: p})
					}
				}
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /account", func(w http.ResponseWriter, _ *http.Request) {
		acct := account{Region: c.Cloud.Region(), Zones: c.Cloud.Zones()}
		for _, t := range c.Cloud.Types() {
			acct.Types = append(acct.Types, t.Name)
		}
		_ = json.NewEncoder(w).Encode(acct)
	})
	// What `aws ec2 describe-instance-type-offerings` and `describe-spot-price-history`
	// print for the account: the inputs docs/cli.md turns into simulate's --offerings.
	mux.HandleFunc("GET /aws/describe-instance-type-offerings", func(w http.ResponseWriter, r *http.Request) {
		out, _ := c.Cloud.DescribeInstanceTypeOfferings(r.Context(), nil)
		_ = json.NewEncoder(w).Encode(map[string]any{"InstanceTypeOfferings": out.InstanceTypeOfferings})
	})
	mux.HandleFunc("GET /aws/describe-spot-price-history", func(w http.ResponseWriter, r *http.Request) {
		out, _ := c.Cloud.DescribeSpotPriceHistory(r.Context(), nil)
		_ = json.NewEncoder(w).Encode(map[string]any{"SpotPriceHistory": out.SpotPriceHistory})
	})
	mux.HandleFunc("GET /aws/describe-capacity-reservations", func(w http.ResponseWriter, r *http.Request) {
		out, err := c.Cloud.DescribeCapacityReservations(r.Context(), &ec2.DescribeCapacityReservationsInput{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"CapacityReservations": out.CapacityReservations})
	})
	mux.HandleFunc("GET /disruptions", func(w http.ResponseWriter, r *http.Request) {
		total, err := disruptedTotal(r.URL.Query().Get("reason"), r.URL.Query().Get("nodepool"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprint(w, strconv.FormatFloat(total, 'g', -1, 64))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening for the control endpoint: %w", err)
	}
	go func() { _ = http.Serve(l, mux) }()
	return "http://" + l.Addr().String(), nil
}

// disruptedTotal reads Karpenter's karpenter_nodeclaims_disrupted_total for a reason and
// a NodePool from the process's metrics registry, where Karpenter's operator registers it.
func disruptedTotal(reason, nodePool string) (float64, error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "karpenter_nodeclaims_disrupted_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == reason && labels["nodepool"] == nodePool {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total, nil
}

type availability struct {
	Available    bool     `json:"available"`
	CapacityType string   `json:"capacityType"`
	Types        []string `json:"types"`
	Zones        []string `json:"zones,omitempty"`
}

// poolPrice is what the simulated account charges per hour for a pool.
type poolPrice struct {
	fakeec2.Pool
	PerHour float64 `json:"perHour"`
}

type account struct {
	Region string   `json:"region"`
	Zones  []string `json:"zones"`
	Types  []string `json:"types"`
}

// connect builds a process's view of the cluster process 1 started.
func connect(ep endpoint) (*sharedCluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", ep.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ep.Kubeconfig, err)
	}
	// Scenarios poll every second; client-go's default of 5 requests a second would queue them.
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	cloud := &remoteCloud{base: ep.Control, http: &http.Client{Timeout: time.Minute}}
	if err := cloud.get("/account", &cloud.account); err != nil {
		return nil, err
	}
	return &sharedCluster{Client: c, Config: cfg, Cloud: cloud, Kubeconfig: ep.Kubeconfig, LogDir: ep.LogDir, MetricsURL: ep.Metrics}, nil
}

// ForgetCapacityErrors makes Karpenter forget that the given instance types failed for
// capacity at capacityType in any zone, as it does on its own 3 minutes after the last
// failure (localcluster.Cluster.ForgetCapacityErrors).
func (c *sharedCluster) ForgetCapacityErrors(capacityType string, types []string) {
	GinkgoHelper()
	Expect(c.Cloud.post("/forget", availability{CapacityType: capacityType, Types: types})).To(Succeed())
}

// disruptions reads Karpenter's karpenter_nodeclaims_disrupted_total for a reason and a
// NodePool (process 1's metrics registry).
func (c *sharedCluster) disruptions(reason, nodePool string) float64 {
	GinkgoHelper()
	var total float64
	q := url.Values{"reason": {reason}, "nodepool": {nodePool}}
	Expect(c.Cloud.get("/disruptions?"+q.Encode(), &total)).To(Succeed())
	return total
}

// remoteCloud is the simulated EC2 account (fakeec2.Cloud) as scenarios use it, through
// process 1's control endpoint.
type remoteCloud struct {
	base string
	http *http.Client
	account
}

// SetAvailable switches capacity of the types at capacityType on or off in the zones
// (every zone when none are given).
func (r *remoteCloud) SetAvailable(available bool, capacityType string, types []string, zones ...string) {
	GinkgoHelper()
	Expect(r.post("/available", availability{Available: available, CapacityType: capacityType, Types: types, Zones: zones})).To(Succeed())
}

// Launches returns every CreateFleet call so far, oldest first.
func (r *remoteCloud) Launches() []fakeec2.Launch {
	GinkgoHelper()
	var out []fakeec2.Launch
	Expect(r.get("/launches", &out)).To(Succeed())
	return out
}

// AddCapacityReservation creates a capacity reservation in the account (fakeec2.Cloud's).
func (r *remoteCloud) AddCapacityReservation(res fakeec2.CapacityReservation) {
	GinkgoHelper()
	Expect(r.post("/reservations", res)).To(Succeed())
}

// CapacityReservation is the account's reservation id, with its free count now.
func (r *remoteCloud) CapacityReservation(id string) fakeec2.CapacityReservation {
	GinkgoHelper()
	var all []fakeec2.CapacityReservation
	Expect(r.get("/reservations", &all)).To(Succeed())
	for _, res := range all {
		if res.ID == id {
			return res
		}
	}
	Fail("the account has no capacity reservation " + id)
	return fakeec2.CapacityReservation{}
}

// Prices is the account's price list, per pool: the prices EC2 charges and Karpenter
// launches by (the simulated account's, not Poolsmith's priced catalog).
func (r *remoteCloud) Prices() map[fakeec2.Pool]float64 {
	GinkgoHelper()
	var list []poolPrice
	Expect(r.get("/prices", &list)).To(Succeed())
	out := map[fakeec2.Pool]float64{}
	for _, p := range list {
		out[p.Pool] = p.PerHour
	}
	return out
}

// Region is the account's region.
func (r *remoteCloud) Region() string { return r.account.Region }

// Zones are the account's availability zones.
func (r *remoteCloud) Zones() []string { return append([]string(nil), r.account.Zones...) }

// Types are the instance types offered, sorted by name, from the embedded catalog.
func (r *remoteCloud) Types() []*catalog.InstanceType {
	GinkgoHelper()
	cat, err := catalog.Load()
	Expect(err).NotTo(HaveOccurred())
	var out []*catalog.InstanceType
	for _, name := range r.account.Types {
		t, ok := cat.Types[name]
		Expect(ok).To(BeTrue(), "the catalog has no instance type %s", name)
		out = append(out, t)
	}
	return out
}

// AWSCLI returns what `aws ec2 <command> --output json` prints for the account, for
// command describe-instance-type-offerings, describe-spot-price-history or
// describe-capacity-reservations.
func (r *remoteCloud) AWSCLI(command string) []byte {
	GinkgoHelper()
	var out json.RawMessage
	Expect(r.get("/aws/"+command, &out)).To(Succeed())
	return out
}

func (r *remoteCloud) get(path string, into any) error {
	resp, err := r.http.Get(r.base + path)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return decode(resp, into)
}

func (r *remoteCloud) post(path string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := r.http.Post(r.base+path, "application/json", bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	return decode(resp, nil)
}

func decode(resp *http.Response, into any) error {
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(data, into)
}
