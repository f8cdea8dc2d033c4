package catalog_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

func load(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFactsParsedAsKarpenterLabelsDeriveThem(t *testing.T) {
	c := load(t)
	for name, want := range map[string]catalog.InstanceType{
		"m7g.xlarge":     {Name: "m7g.xlarge", Family: "m7g", Category: "m", Generation: 7, Size: "xlarge", Arch: "arm64", VCPU: 4, MemoryMiB: 16384},
		"g5.xlarge":      {Name: "g5.xlarge", Family: "g5", Category: "g", Generation: 5, Size: "xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, GPUs: 1, GPUMaker: "nvidia", GPUName: "a10g", GPUMemoryMiB: 24576},
		"t3.micro":       {Name: "t3.micro", Family: "t3", Category: "t", Generation: 3, Size: "micro", Arch: "amd64", VCPU: 2, MemoryMiB: 1024, Burstable: true},
		"u-6tb1.metal":   {Name: "u-6tb1.metal", Family: "u-6tb1", Category: "u", Generation: 1, Size: "metal", Arch: "amd64", VCPU: 448, MemoryMiB: 6291456},
		"g4ad.xlarge":    {Name: "g4ad.xlarge", Family: "g4ad", Category: "g", Generation: 4, Size: "xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, GPUs: 1, GPUMaker: "amd", GPUName: "radeon-pro-v520", GPUMemoryMiB: 8192},
		"inf2.xlarge":    {Name: "inf2.xlarge", Family: "inf2", Category: "inf", Generation: 2, Size: "xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384},
		"m7i-flex.large": {Name: "m7i-flex.large", Family: "m7i-flex", Category: "m", Generation: 7, Size: "large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192},
	} {
		got, ok := c.Types[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if g, w := jsonOf(t, got), jsonOf(t, &want); g != w {
			t.Errorf("%s = %s, want %s", name, g, w)
		}
	}
	if len(c.Types) < 1300 {
		t.Errorf("only %d types", len(c.Types))
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPricesAreConsistent(t *testing.T) {
	c := load(t)
	for _, r := range []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1"} {
		if len(c.Prices[r]) < 700 {
			t.Errorf("%s has %d prices", r, len(c.Prices[r]))
		}
	}
	buckets := map[catalog.Bucket]int{}
	for r, prices := range c.Prices {
		for name, p := range prices {
			if _, ok := c.Types[name]; !ok {
				t.Errorf("%s %s is priced but unknown", r, name)
			}
			if p.OnDemand <= 0 || p.SpotAvg < p.SpotMin || (p.SpotMin > 0 && p.SpotMin > p.OnDemand*1.5) {
				t.Errorf("%s %s has inconsistent prices %+v", r, name, p)
			}
			buckets[p.Interruption]++
		}
	}
	for b := catalog.BucketUnknown; b <= catalog.BucketOver20; b++ {
		if buckets[b] == 0 {
			t.Errorf("no price in bucket %s", b)
		}
	}
	if p := c.Prices["us-east-1"]["m7g.xlarge"]; p.OnDemand != 0.1632 {
		t.Errorf("m7g.xlarge us-east-1 on-demand = %v, want 0.1632", p.OnDemand)
	}
}

func TestPriceOnlyTypesAreListed(t *testing.T) {
	c := load(t)
	missing := c.MissingFacts()
	if len(missing) < 400 {
		t.Errorf("%d price-only types, want about 450", len(missing))
	}
	joined := " " + strings.Join(missing, " ") + " "
	for _, want := range []string{" c8i.large ", " m8i.large ", " r8i.large ", " p6-b200.48xlarge "} {
		if !strings.Contains(joined, want) {
			t.Errorf("%s is not among the price-only types", strings.TrimSpace(want))
		}
	}
	if p := c.Prices["us-east-1"]["c8i.large"]; p.OnDemand <= 0 {
		t.Errorf("c8i.large has no us-east-1 price: %+v", p)
	}
	if c.Types["c8i.large"].Matches(nil) {
		t.Error("a type without facts must not match requirements")
	}
}

func TestMatchesDecidesAsKarpenterLabelsWould(t *testing.T) {
	c := load(t)
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	gpuRung := []karpv1.NodeSelectorRequirementWithMinValues{
		req("karpenter.sh/capacity-type", corev1.NodeSelectorOpIn, "spot"),
		req("karpenter.k8s.aws/instance-gpu-count", corev1.NodeSelectorOpGt, "0"),
		req("karpenter.k8s.aws/instance-gpu-manufacturer", corev1.NodeSelectorOpIn, "nvidia"),
	}
	if !c.Types["g5.xlarge"].Matches(gpuRung) || c.Types["m7g.xlarge"].Matches(gpuRung) || c.Types["g4ad.xlarge"].Matches(gpuRung) {
		t.Error("GPU rung matching is wrong")
	}
	cpuRung := []karpv1.NodeSelectorRequirementWithMinValues{
		req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64"),
		req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpLt, "9"),
		req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "5"),
		req("karpenter.k8s.aws/instance-gpu-count", corev1.NodeSelectorOpDoesNotExist),
	}
	if !c.Types["m7g.xlarge"].Matches(cpuRung) || c.Types["m7g.4xlarge"].Matches(cpuRung) || c.Types["a1.xlarge"].Matches(cpuRung) || c.Types["g5g.xlarge"].Matches(cpuRung) {
		t.Error("CPU rung matching is wrong")
	}
}

// TestEmbeddedCopyIsTheTSV proves the gzip copy the binary embeds holds exactly the
// committed .tsv, the file people read and review.
func TestEmbeddedCopyIsTheTSV(t *testing.T) {
	packed, err := os.ReadFile("zz_generated.catalog.tsv.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("zz_generated.catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("zz_generated.catalog.tsv.gz is not zz_generated.catalog.tsv: run make catalog and commit the result")
	}
	if len(packed) > 64*1024 {
		t.Errorf("the embedded catalog is %d bytes compressed, over 64 KB", len(packed))
	}
}

// TestGeneratorIsReproducible regenerates the catalog from the pinned sources and
// compares it byte for byte with the committed file.
func TestGeneratorIsReproducible(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "run", ".", "-out", out)
	cmd.Dir = filepath.Join("..", "..", "hack", "catalog")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(filepath.Join(out, "zz_generated.catalog.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("zz_generated.catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("regenerating the catalog changed it: run make catalog and commit the result")
	}
	gotPacked, err := os.ReadFile(filepath.Join(out, "zz_generated.catalog.tsv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	wantPacked, err := os.ReadFile("zz_generated.catalog.tsv.gz")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotPacked, wantPacked) {
		t.Error("regenerating the catalog changed its embedded gzip copy: run make catalog and commit the result")
	}
	if len(want) > 300*1024 {
		t.Errorf("the embedded catalog is %d bytes, over the 300 KB target", len(want))
	}
}

func TestPricesNameTheirSource(t *testing.T) {
	c := load(t)
	if p := c.Prices["us-east-1"]["m7g.xlarge"]; p.OnDemandSource != "catalog 2025-05-28" || p.SpotSource != "catalog 2025-05-28" {
		t.Errorf("m7g.xlarge sources %q %q, want catalog 2025-05-28", p.OnDemandSource, p.SpotSource)
	}
	if p := c.Prices["us-east-1"]["c8i.large"]; p.OnDemandSource != "karpenter 2026-07-20" || p.SpotSource != "" {
		t.Errorf("price-only c8i.large sources %q %q, want karpenter 2026-07-20 and none", p.OnDemandSource, p.SpotSource)
	}
}

// TestSpotOutliersFlagTheOddFamilies checks the rule on the snapshot: the gd families of
// the 8th generation at 89% against medians of 63-66% are flagged, ordinary ones are not,
// and the generator's header records exactly what the rule finds, region by region.
func TestSpotOutliersFlagTheOddFamilies(t *testing.T) {
	c := load(t)
	got := map[string]catalog.Outlier{}
	for _, o := range c.SpotOutliers("us-east-1") {
		got[o.Family] = o
	}
	for _, f := range []string{"c8gd", "m8gd", "r8gd"} {
		o, ok := got[f]
		if !ok || o.Z < catalog.OutlierZ || o.Discount < 0.85 || len(o.Types) != 12 {
			t.Errorf("%s: %+v, want a high outlier of 12 types", f, o)
		}
	}
	for _, f := range []string{"c7g", "m7g", "m7i", "r7g", "c6a"} {
		if _, ok := got[f]; ok {
			t.Errorf("%s is flagged but ordinary", f)
		}
	}
	header, err := os.ReadFile("zz_generated.catalog.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range c.Regions() {
		for _, o := range c.SpotOutliers(r) {
			want = append(want, "#   "+r+": "+o.String())
		}
	}
	var recorded []string
	for _, line := range strings.Split(string(header), "\n") {
		if strings.HasPrefix(line, "#   ") && strings.Contains(line, "spot discount") {
			recorded = append(recorded, line)
		}
	}
	sortStrings := func(s []string) string {
		s = append([]string(nil), s...)
		sort.Strings(s)
		return strings.Join(s, "\n")
	}
	if sortStrings(recorded) != sortStrings(want) {
		t.Errorf("the header's outliers:\n%s\nthe rule's:\n%s", sortStrings(recorded), sortStrings(want))
	}
}

func TestWithoutOutliersPutsThemAtTheCategoryMedian(t *testing.T) {
	c := load(t)
	outs := c.SpotOutliers("us-east-1")
	fixed := c.WithoutOutliers("us-east-1", outs)
	p, orig := fixed.Prices["us-east-1"]["c8gd.large"], c.Prices["us-east-1"]["c8gd.large"]
	if d := p.Discount(); d < 0.6 || d > 0.7 || p.SpotSource != "category c median discount" {
		t.Errorf("corrected c8gd.large = %+v (discount %.2f)", p, d)
	}
	if orig.Discount() < 0.85 {
		t.Errorf("the original catalog changed: %+v", orig)
	}
	if fixed.Prices["us-east-1"]["m7g.xlarge"] != c.Prices["us-east-1"]["m7g.xlarge"] {
		t.Error("an ordinary type changed")
	}
}
