package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsmith/poolsmith/internal/cost"
)

type simulation struct {
	Poolsmith struct {
		NodeClaims []struct {
			NodePool, InstanceType, CapacityType, Zone string
			Pods                                       []string
			PricePerHour                               float64
		}
		Unschedulable map[string]string
		Totals        struct{ Nodes, DaemonSets int }
	}
	Classes []classCost
}

func simulateJSON(t *testing.T, args ...string) simulation {
	t.Helper()
	code, out, stderr := run(t, "", append([]string{"simulate", "-o", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("simulate %v: exit %d: %s", args, code, stderr)
	}
	var res simulation
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSimulateOfferings: the account's offerings decide the types, zones and capacity
// types of every NodeClaim; --instance-types and --zones narrow them further.
func TestSimulateOfferings(t *testing.T) {
	web := samples + "/workloads/web-spread.yaml"
	offerings := writeTemp(t, "offerings.yaml", `# c7g only up to xlarge, spot only in us-east-1a and b
capacityTypes: [on-demand]
offerings:
- {instanceType: c7g.large, zone: us-east-1a, capacityTypes: [on-demand, spot]}
- {instanceType: c7g.large, zone: us-east-1b, capacityTypes: [on-demand, spot]}
- {instanceType: c7g.xlarge, zone: us-east-1a}
- {instanceType: c7g.xlarge, zone: us-east-1b}
- {instanceType: c7g.xlarge, zone: us-east-1c}
- {instanceType: m7g.xlarge, zone: us-east-1c}
`)
	res := simulateJSON(t, "-f", samples, "-f", web, "--offerings", offerings)
	if len(res.Poolsmith.Unschedulable) != 0 || len(res.Poolsmith.NodeClaims) == 0 {
		t.Fatalf("%+v", res.Poolsmith)
	}
	allowed := map[string]bool{"c7g.large@us-east-1a": true, "c7g.large@us-east-1b": true, "c7g.xlarge@us-east-1a": true,
		"c7g.xlarge@us-east-1b": true, "c7g.xlarge@us-east-1c": true, "m7g.xlarge@us-east-1c": true}
	for _, nc := range res.Poolsmith.NodeClaims {
		if !allowed[nc.InstanceType+"@"+nc.Zone] || nc.CapacityType == "spot" && nc.InstanceType != "c7g.large" {
			t.Errorf("NodeClaim %+v is not offered", nc)
		}
	}

	res = simulateJSON(t, "-f", samples, "-f", web, "--offerings", offerings, "--instance-types", "c7g.xlarge", "--zones", "us-east-1a")
	for _, nc := range res.Poolsmith.NodeClaims {
		if nc.InstanceType != "c7g.xlarge" || nc.Zone != "us-east-1a" {
			t.Errorf("with --instance-types c7g.xlarge --zones us-east-1a: NodeClaim %+v", nc)
		}
	}
	// Five pods spread over zones with maxSkew 1 and one zone offered: all in it.
	if len(res.Poolsmith.Unschedulable) != 0 {
		t.Errorf("unschedulable: %v", res.Poolsmith.Unschedulable)
	}

	res = simulateJSON(t, "-f", samples, "-f", web, "--instance-types", "m7g.large,m7g.xlarge")
	for _, nc := range res.Poolsmith.NodeClaims {
		if !strings.HasPrefix(nc.InstanceType, "m7g.") {
			t.Errorf("with --instance-types m7g.large,m7g.xlarge: NodeClaim %+v", nc)
		}
	}
}

// TestSimulateRefusesBadOfferings: each mistake is named, with the file and the entry or
// the type, and exits 1 (2 for a malformed flag value).
func TestSimulateRefusesBadOfferings(t *testing.T) {
	web := samples + "/workloads/web-spread.yaml"
	good := writeTemp(t, "good.yaml", "offerings:\n- {instanceType: c7g.large, zone: us-east-1a}\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a missing file", []string{"--offerings", "/nonexistent/offerings.yaml"}, ExitFindings, []string{"--offerings", "/nonexistent/offerings.yaml"}},
		{"a directory", []string{"--offerings", t.TempDir()}, ExitFindings, []string{"--offerings", "is not a regular file"}},
		{"not YAML", []string{"--offerings", writeTemp(t, "bad.yaml", "offerings: [")}, ExitFindings, []string{"--offerings", "bad.yaml", "decoding offerings"}},
		{"the AWS CLI's raw output", []string{"--offerings", writeTemp(t, "raw.json", `{"InstanceTypeOfferings": []}`)}, ExitFindings,
			[]string{"raw.json", `unknown field "InstanceTypeOfferings"`}},
		{"a bad zone", []string{"--offerings", writeTemp(t, "zone.yaml", "offerings:\n- {instanceType: c7g.large, zone: us-east-1}\n- {instanceType: c7g.large, zone: 1a}\n")}, ExitFindings,
			[]string{"zone.yaml", `offerings[1].zone: "1a" is not a zone name`}},
		{"an unknown type in the file", []string{"--offerings", writeTemp(t, "unknown.yaml", "offerings:\n- {instanceType: c7g.huge, zone: us-east-1a}\n")}, ExitFindings,
			[]string{"--offerings", "unknown.yaml", "instance type c7g.huge: the catalog has no such type priced in us-east-1"}},
		{"an unknown type in --instance-types", []string{"--instance-types", "c7g.large,m9z.large"}, ExitFindings,
			[]string{"--instance-types", "instance type m9z.large: the catalog has no such type priced in us-east-1"}},
		{"a type the offerings lack", []string{"--offerings", good, "--instance-types", "m7g.large"}, ExitFindings,
			[]string{"--instance-types", "instance type m7g.large is not in the offerings"}},
		{"zones the offerings lack", []string{"--offerings", good, "--zones", "us-east-1c"}, ExitFindings,
			[]string{"--zones us-east-1c", "offers none of them"}},
		{"a zone of another region", []string{"--offerings", writeTemp(t, "region.yaml", "offerings:\n- {instanceType: c7g.large, zone: eu-west-1a}\n")}, ExitFindings,
			[]string{"region.yaml", "zone eu-west-1a is not in region us-east-1"}},
		{"an empty type", []string{"--instance-types", "c7g.large,,m7g.large"}, ExitUsage, []string{"--instance-types"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, "", append([]string{"simulate", "-f", samples, "-f", web}, tc.args...)...)
			if code != tc.code || out != "" {
				t.Errorf("exit %d (want %d), stdout %q", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestSimulateCountsDaemonSets: the sample agents in the input add their requests to every
// NodeClaim, as Karpenter does; a 1750m pod then needs more than a c7g.large.
func TestSimulateCountsDaemonSets(t *testing.T) {
	pod := writeTemp(t, "pod.yaml", `apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  containers: [{name: c, resources: {requests: {cpu: 1750m, memory: 512Mi}}}]
`)
	only := []string{"--instance-types", "c7g.large,c7g.xlarge"}
	res := simulateJSON(t, append([]string{"-f", samples, "-f", pod}, only...)...)
	if len(res.Poolsmith.NodeClaims) != 1 || res.Poolsmith.NodeClaims[0].InstanceType != "c7g.large" || res.Poolsmith.Totals.DaemonSets != 0 {
		t.Errorf("without DaemonSets: %+v", res.Poolsmith)
	}
	res = simulateJSON(t, append([]string{"-f", samples, "-f", pod, "-f", samples + "/workloads/daemonsets.yaml"}, only...)...)
	if len(res.Poolsmith.NodeClaims) != 1 || res.Poolsmith.NodeClaims[0].InstanceType != "c7g.xlarge" || res.Poolsmith.Totals.DaemonSets != 3 {
		t.Errorf("with the sample agents: %+v", res.Poolsmith)
	}
	if pods := res.Poolsmith.NodeClaims[0].Pods; len(pods) != 1 {
		t.Errorf("a DaemonSet became a pending pod: %v", pods)
	}
}

// simulate prints each class's cost as status.cost would report it once the NodeClaims
// launched: the sum of its simulated NodeClaims' prices, by rung.
func TestSimulatePricesEachClass(t *testing.T) {
	res := simulateJSON(t, "-f", samples, "-f", samples+"/workloads")
	sums := map[string]float64{}
	for _, nc := range res.Poolsmith.NodeClaims {
		class, _, _ := strings.Cut(nc.NodePool, "-")
		sums[class] += nc.PricePerHour
	}
	if len(res.Classes) == 0 || len(sums) == 0 {
		t.Fatalf("no classes priced: %+v", res.Classes)
	}
	for _, cc := range res.Classes {
		if cc.Cost.PerHour != cost.Money(sums[cc.Class]) {
			t.Errorf("class %s: cost %s, its NodeClaims sum to %s", cc.Class, cc.Cost.PerHour, cost.Money(sums[cc.Class]))
		}
		if sums[cc.Class] > 0 && (cc.Cost.IdlePerHour == "" || len(cc.Cost.Rungs) == 0) {
			t.Errorf("class %s: no idle part or rungs: %+v", cc.Class, cc.Cost)
		}
	}
	code, out, _ := run(t, "", "simulate", "-f", samples, "-f", samples+"/workloads")
	if code != ExitOK || !strings.Contains(out, "CLASS ") || !strings.Contains(out, "PREMIUM/H") {
		t.Errorf("simulate's table has no cost columns:\n%s", out)
	}
}
