//go:build e2e

package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
)

// What a class costs, checked against the simulated account's own price list (the prices
// EC2 charges and Karpenter launches by), never against Poolsmith's priced catalog. The
// class runs on r7i, whose spot capacity this scenario alone switches off (no other
// scenario can launch r7i spot: the node-salad class's r7i rung sits below its c7g one).
var _ = Describe("What a class costs (status.cost)", Ordered, func() {
	const class = "spend"
	r7i := []string{"r7i.large", "r7i.xlarge", "r7i.2xlarge"}
	var d *appsv1.Deployment

	BeforeAll(func() {
		create(workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"r7i"}}
			// For the dashboard: a budget far above what the class costs (the gauge at 0),
			// and rebalance on with the default 30 minutes on a fallback rung before a
			// move (the fallback-nodes gauge and the moves counter; nothing moves).
			wc.Spec.Budget = &v1alpha1.Budget{PerHour: "50"}
			wc.Spec.Rebalance = &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred}
		}))
		expectClassReady(class)
		d = deployment(class, class, 1, "1")
		create(d)
	})

	It("is the sum of its NodeClaims' prices in the account's price list, to the cent", func() {
		expectRunning(class, 1)
		prices := cluster.Cloud.Prices()
		var want expectedCost
		Eventually(func(g Gomega) {
			want = priced(g, prices, class, class+"-spot-amd64")
			g.Expect(want.nodes).To(Equal(1))
			st := costOf(g, class)
			g.Expect(money(g, st.PerHour)).To(BeNumerically("~", want.perHour, 0.00005), "status.cost %+v, NodeClaims:\n%s", st, want.claims)
			g.Expect(st.FallbackPremiumPerHour).To(Equal("0.0000"), "every NodeClaim is on the preferred rung")
			g.Expect(st.Rungs).To(ConsistOf(And(HaveField("Rung", class+"-spot-amd64"), HaveField("CapacityType", "spot"), HaveField("Nodes", int32(1)))))
		}).Should(Succeed())
		AddReportEntry("cost", fmt.Sprintf("status.cost.perHour %s, the account's prices sum to %.6f\n%s", costOf(Default, class).PerHour, want.perHour, want.claims))
	})

	It("has a fallback premium, from 0 to the on-demand price minus the spot price, once spot is switched off", func() {
		cluster.Cloud.SetAvailable(false, karpv1.CapacityTypeSpot, r7i)
		DeferCleanup(func() {
			cluster.Cloud.SetAvailable(true, karpv1.CapacityTypeSpot, r7i)
			// Nothing here proves what Karpenter does with its memory of the failures: a
			// scenario after this one may find r7i spot at once.
			cluster.ForgetCapacityErrors(karpv1.CapacityTypeSpot, r7i)
		})
		// Two pods of 1 CPU do not fit on one r7i.large (2 vCPUs, less allocatable).
		update(d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
		expectRunning(class, 2)
		prices := cluster.Cloud.Prices()
		var want expectedCost
		Eventually(func(g Gomega) {
			want = priced(g, prices, class, class+"-spot-amd64")
			g.Expect(want.fallback).To(Equal(1), "one NodeClaim on the on-demand rung:\n%s", want.claims)
			g.Expect(want.premium).To(BeNumerically(">", 0))
			st := costOf(g, class)
			g.Expect(money(g, st.PerHour)).To(BeNumerically("~", want.perHour, 0.00005), "status.cost %+v, NodeClaims:\n%s", st, want.claims)
			g.Expect(money(g, st.FallbackPremiumPerHour)).To(BeNumerically("~", want.premium, 0.00005), "status.cost %+v, NodeClaims:\n%s", st, want.claims)
			g.Expect(st.Rungs).To(ContainElement(And(HaveField("Rung", class+"-on-demand-amd64"), HaveField("CapacityType", "on-demand"),
				HaveField("Nodes", int32(1)), HaveField("FallbackPremiumPerHour", Not(BeEmpty())))))
		}).Should(Succeed())
		st := costOf(Default, class)
		AddReportEntry("fallback premium", fmt.Sprintf("status.cost.perHour %s (account %.6f), fallbackPremiumPerHour %s (account: on-demand minus spot of the same type and zone, %.6f)\n%s",
			st.PerHour, want.perHour, st.FallbackPremiumPerHour, want.premium, want.claims))
	})

	It("feeds every panel of the chart's Grafana dashboard, queried in a real Prometheus", func() {
		checkDashboard(class)
	})
})

// A budget below what the class costs holds its rungs. On-demand c types of generation 7
// on both architectures: two rungs, the arm64 one preferred (c7g), the amd64 one (c7i) empty.
var _ = Describe("A budget (spec.budget)", func() {
	It("below the class's cost holds every rung at its usage, keeps a new pod pending with BudgetExceeded, and lets it schedule once raised", func() {
		const class = "capped"
		wc := workloadClass(class, func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}
			wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"c"}, MinGeneration: ptr32(7)}
			wc.Spec.Budget = &v1alpha1.Budget{PerHour: "1"}
		})
		create(wc)
		expectClassReady(class)
		d := deployment(class, class, 1, "1")
		create(d)
		expectRunning(class, 1)
		rungs := []string{class + "-on-demand-arm64", class + "-on-demand-amd64"}
		// Karpenter counts the node in its NodePool's status.resources, which the hold freezes.
		Eventually(func(g Gomega) {
			np := getNodePool(g, rungs[0])
			g.Expect(np.Status.Resources.Cpu().IsZero()).To(BeFalse(), "Karpenter counted the node: %v", np.Status.Resources)
			g.Expect(costOf(g, class).PerHour).NotTo(Equal("0.0000"))
		}).Should(Succeed())
		Eventually(classCondition(class, v1alpha1.ConditionBudgetExceeded)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.ReasonUnderBudget)))

		By("a budget below what the class costs: every rung held at what it uses")
		update(wc, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget.PerHour = "0.01" })
		Eventually(classCondition(class, v1alpha1.ConditionBudgetExceeded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonBudgetHeld),
			HaveField("Message", And(ContainSubstring("$0.0100/h"), ContainSubstring("held")))))
		held, heldText := map[string]corev1.ResourceList{}, map[string]string{}
		Eventually(func(g Gomega) {
			for _, rung := range rungs {
				np := getNodePool(g, rung)
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					limit, ok := np.Spec.Limits[name]
					g.Expect(ok).To(BeTrue(), "NodePool %s limits %s: %v", rung, name, np.Spec.Limits)
					used := np.Status.Resources[name]
					g.Expect(limit.Cmp(used)).To(BeZero(), "NodePool %s: %s limit %s, status.resources %s", rung, name, limit.String(), used.String())
				}
				limits := corev1.ResourceList(np.Spec.Limits)
				held[rung], heldText[rung] = limits, fmt.Sprintf("cpu %s memory %s", limits.Cpu(), limits.Memory())
			}
		}).Should(Succeed())
		emptyCPU := held[rungs[1]][corev1.ResourceCPU]
		Expect(emptyCPU.IsZero()).To(BeTrue(), "the empty rung is held at 0: %v", held[rungs[1]])

		By("a second pod stays pending: it fits on no node of the class and Karpenter launches none")
		update(d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
		// The ReplicaSet controller creates the second pod a moment after the scale-up: the
		// check below would otherwise count 0 pending pods before it exists.
		Eventually(func() []corev1.Pod { return pods(class) }).Should(HaveLen(2))
		Consistently(func(g Gomega) {
			g.Expect(nodeClaims(class)).To(HaveLen(1), "Karpenter launches nothing for a held class")
			pending := 0
			for _, p := range pods(class) {
				if p.Spec.NodeName == "" {
					pending++
				}
			}
			g.Expect(pending).To(Equal(1), "one pod pending")
			c := classCondition(class, v1alpha1.ConditionBudgetExceeded)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		By("raising the budget lifts the hold and the pod schedules")
		update(wc, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget.PerHour = "1" })
		Eventually(classCondition(class, v1alpha1.ConditionBudgetExceeded)).Should(HaveField("Reason", v1alpha1.ReasonUnderBudget))
		expectRunning(class, 2)
		// Lifted: no longer frozen at the usage (memory free again), the CPU capped at what
		// the budget left buys, which has room for the pod's node.
		for _, rung := range rungs {
			np := getNodePool(Default, rung)
			Expect(np.Spec.Limits).NotTo(HaveKey(corev1.ResourceMemory), "NodePool %s: %v", rung, np.Spec.Limits)
			limit, used := np.Spec.Limits[corev1.ResourceCPU], np.Status.Resources[corev1.ResourceCPU]
			Expect(limit.Cmp(used)).To(Equal(1), "NodePool %s: cpu limit %s above its usage %s", rung, limit.String(), used.String())
		}
		AddReportEntry("budget", fmt.Sprintf("held at %v, then\n%s", heldText, describe(nodeClaims(class))))
	})
})

func getNodePool(g Gomega, name string) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, np)).To(Succeed())
	return np
}

// costOf is the class's status.cost; it fails until the manager wrote one.
func costOf(g Gomega, class string) v1alpha1.CostStatus {
	wc := &v1alpha1.WorkloadClass{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: class}, wc)).To(Succeed())
	g.Expect(wc.Status.Cost).NotTo(BeNil(), "class %s has no status.cost yet", class)
	return *wc.Status.Cost
}

func money(g Gomega, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	g.Expect(err).NotTo(HaveOccurred(), "an amount in status.cost: %q", s)
	return v
}

// expectedCost is what the account charges for a class's launched NodeClaims.
type expectedCost struct {
	perHour, premium float64
	nodes, fallback  int
	claims           string
}

// priced prices each launched NodeClaim of the class by the account's price for its
// type, zone and capacity type; a NodeClaim off the preferred rung adds its premium: its
// price minus the same type's price in its zone at the preferred rung's capacity type
// (spot: the class's ladder puts spot first, and every rung allows the same types).
func priced(g Gomega, prices map[fakeec2.Pool]float64, class, preferred string) expectedCost {
	var out expectedCost
	var lines []string
	for _, nc := range nodeClaims(class) {
		t, z, ct := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.CapacityTypeLabelKey]
		g.Expect(t).NotTo(BeEmpty(), "NodeClaim %s is not launched yet", nc.Name)
		price, ok := prices[fakeec2.Pool{InstanceType: t, Zone: z, CapacityType: ct}]
		g.Expect(ok).To(BeTrue(), "the account has no price for %s %s %s", t, z, ct)
		out.perHour += price
		out.nodes++
		line := fmt.Sprintf("%s rung=%s %s %s %s $%.6f/h", nc.Name, nc.Labels[labelRung], t, z, ct, price)
		if nc.Labels[labelRung] != preferred {
			ref, ok := prices[fakeec2.Pool{InstanceType: t, Zone: z, CapacityType: karpv1.CapacityTypeSpot}]
			g.Expect(ok).To(BeTrue(), "the account has no spot price for %s %s", t, z)
			out.premium += price - ref
			out.fallback++
			line += fmt.Sprintf(", premium over spot $%.6f/h", price-ref)
		}
		lines = append(lines, line)
	}
	out.claims = strings.Join(lines, "\n")
	return out
}

// checkDashboard runs /usr/bin/prometheus (Debian's package; .ci/run installs it)
// scraping the manager, and requires every query of the chart's dashboard, panels and
// variables, to return series for the class.
func checkDashboard(class string) {
	GinkgoHelper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		Skip("no prometheus binary on PATH (Debian: apt-get install prometheus; .ci/run installs it): the dashboard's queries are not checked")
	}
	raw, err := os.ReadFile("../../charts/poolsmith/dashboards/poolsmith-cost.json")
	Expect(err).NotTo(HaveOccurred())
	panels, variables := dashboardQueries(raw)
	Expect(panels).NotTo(BeEmpty())

	api := startPrometheus(bin, cluster.MetricsURL)
	vars := strings.NewReplacer("${class}", class, "$class", class)
	checked := 0
	for _, q := range panels {
		expr := vars.Replace(q.expr)
		Expect(expr).NotTo(ContainSubstring("$"), "panel %q: a dashboard variable this test does not know: %s", q.panel, q.expr)
		Eventually(func(g Gomega) {
			var out struct {
				Data struct {
					Result []struct {
						Metric map[string]string `json:"metric"`
					} `json:"result"`
				} `json:"data"`
			}
			promGet(g, api+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &out)
			g.Expect(out.Data.Result).NotTo(BeEmpty(), "panel %q: %s returns no series", q.panel, expr)
			for _, r := range out.Data.Result {
				g.Expect(r.Metric).To(HaveKeyWithValue("class", class), "panel %q: %s", q.panel, expr)
			}
		}).WithTimeout(time.Minute).Should(Succeed())
		checked++
	}
	// Grafana's label_values(metric, label): the label's values on the metric's series.
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	for _, v := range variables {
		m := labelValues.FindStringSubmatch(strings.TrimSpace(v.expr))
		Expect(m).NotTo(BeNil(), "variable %q: a query this test cannot run: %s", v.panel, v.expr)
		Eventually(func(g Gomega) {
			var out struct {
				Data []string `json:"data"`
			}
			promGet(g, api+"/api/v1/label/"+m[2]+"/values?"+url.Values{"match[]": {m[1]}}.Encode(), &out)
			g.Expect(out.Data).To(ContainElement(class), "variable %q: %s", v.panel, v.expr)
		}).WithTimeout(time.Minute).Should(Succeed())
		checked++
	}
	msg := fmt.Sprintf("dashboard: %d panels, %d panel queries and %d variable queries return series for class %s in Prometheus (%s)",
		countPanels(panels), len(panels), len(variables), class, bin)
	_, _ = fmt.Fprintln(GinkgoWriter, msg)
	_, _ = fmt.Fprintln(os.Stderr, "e2e: "+msg)
	AddReportEntry("dashboard", msg)
	Expect(checked).To(Equal(len(panels) + len(variables)))
}

// dashboardQuery is one query of the dashboard: a panel's target, or a variable's.
type dashboardQuery struct {
	panel, expr string
}

// dashboardQueries reads every panel target's expr (rows' panels included) and every
// query variable's query from a Grafana dashboard.
func dashboardQueries(raw []byte) (panels, variables []dashboardQuery) {
	GinkgoHelper()
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	Expect(json.Unmarshal(raw, &dash)).To(Succeed())
	var walk func([]json.RawMessage)
	walk = func(list []json.RawMessage) {
		for _, r := range list {
			var p panel
			Expect(json.Unmarshal(r, &p)).To(Succeed())
			for _, t := range p.Targets {
				Expect(t.Expr).NotTo(BeEmpty(), "panel %q has a target without expr", p.Title)
				panels = append(panels, dashboardQuery{panel: p.Title, expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			Expect(json.Unmarshal(v.Query, &obj)).To(Succeed(), "variable %s", v.Name)
			q = obj.Query
		}
		variables = append(variables, dashboardQuery{panel: v.Name, expr: q})
	}
	return panels, variables
}

func countPanels(queries []dashboardQuery) int {
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.panel] = true
	}
	return len(seen)
}

// startPrometheus runs Prometheus, scraping the manager's metrics every second, until the
// scenario ends, and returns its base URL once it has scraped the manager.
func startPrometheus(bin, metricsURL string) string {
	GinkgoHelper()
	target, err := url.Parse(metricsURL)
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: poolsmith
  metrics_path: %q
  static_configs: [{targets: [%q]}]
`, target.Path, target.Host)
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600)).To(Succeed())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	listen := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	logFile, err := os.Create(filepath.Join(cluster.LogDir, "prometheus-"+strconv.Itoa(GinkgoParallelProcess())+".log"))
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	api := "http://" + listen
	Eventually(func(g Gomega) {
		var out struct {
			Data struct {
				Result []struct {
					Value []any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		promGet(g, api+"/api/v1/query?"+url.Values{"query": {`up{job="poolsmith"}`}}.Encode(), &out)
		g.Expect(out.Data.Result).To(HaveLen(1))
		g.Expect(out.Data.Result[0].Value).To(HaveLen(2))
		g.Expect(out.Data.Result[0].Value[1]).To(Equal("1"), "Prometheus scrapes the manager at %s (log in %s)", metricsURL, logFile.Name())
	}).WithTimeout(time.Minute).Should(Succeed())
	return api
}

func promGet(g Gomega, u string, into any) {
	resp, err := http.Get(u)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", u)
	g.Expect(json.NewDecoder(resp.Body).Decode(into)).To(Succeed())
}
