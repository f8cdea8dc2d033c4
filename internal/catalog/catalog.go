// Package catalog is Poolsmith's embedded EC2 instance catalog: facts for every type the
// sources know (family, category, generation and size parsed the way Karpenter's labels
// derive them, vCPU, memory, architecture, GPUs, burstable) and per-region Linux prices
// with the Spot Instance Advisor's interruption bucket, each price naming its source and
// date. It also finds spot outliers: families whose spot discount departs from their
// category's (outliers.go). hack/catalog generates zz_generated.catalog.tsv from pinned
// sources; its header names them, their dates and licences, the guards applied and each
// region's outliers. Nothing is fetched at run time; signals (internal/signals) overlay
// live figures on it.
package catalog

//go:generate sh -c "cd ../../hack/catalog && go run . -out ../../internal/catalog"

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// packed is zz_generated.catalog.tsv gzipped by the same generator: 55 KB of the binary
// instead of 253 KB. Load inflates it once; the .tsv beside it is what people read.
//
//go:embed zz_generated.catalog.tsv.gz
var packed []byte

// Bucket is a Spot Instance Advisor interruption-frequency bucket.
type Bucket int

// Buckets, by the advisor's index. BucketUnknown is an entry the advisor has no figure for.
const (
	BucketUnknown     Bucket = -1
	BucketUnder5      Bucket = 0 // <5%
	Bucket5To10       Bucket = 1 // 5-10%
	Bucket10To15      Bucket = 2 // 10-15%
	Bucket15To20      Bucket = 3 // 15-20%
	BucketOver20      Bucket = 4 // >20%
	bucketCount              = 5
	unknownBucketText        = "unknown"
)

var bucketLabels = [bucketCount]string{"<5%", "5-10%", "10-15%", "15-20%", ">20%"}

func (b Bucket) String() string {
	if b < 0 || b >= bucketCount {
		return unknownBucketText
	}
	return bucketLabels[b]
}

// InstanceType holds the facts Karpenter's well-known labels expose.
type InstanceType struct {
	Name         string `json:"name"`
	Family       string `json:"family"`
	Category     string `json:"category"`
	Generation   int    `json:"generation"`
	Size         string `json:"size"`
	Arch         string `json:"arch"`
	VCPU         int    `json:"vcpu"`
	MemoryMiB    int64  `json:"memoryMiB"`
	GPUs         int    `json:"gpus,omitempty"`
	GPUMaker     string `json:"gpuManufacturer,omitempty"`
	GPUName      string `json:"gpuName,omitempty"`
	GPUMemoryMiB int64  `json:"gpuMemoryMiB,omitempty"`
	Burstable    bool   `json:"burstable,omitempty"`
	// PriceOnly marks a type known only from Karpenter's price table: its facts are not.
	PriceOnly bool `json:"priceOnly,omitempty"`

	labels map[string]string // computed once by Parse
}

// Price is a type's Linux shared-tenancy price in one region, in USD per hour.
type Price struct {
	OnDemand float64 `json:"onDemand"`
	// SpotMin and SpotAvg are over the region's zones; zero when spot is not offered.
	SpotMin      float64 `json:"spotMin,omitempty"`
	SpotAvg      float64 `json:"spotAvg,omitempty"`
	Interruption Bucket  `json:"interruption"`
	// OnDemandSource and SpotSource name where each figure came from: "catalog <date>"
	// (the snapshot), "karpenter <date>" (Karpenter's on-demand table), "advisor <date>"
	// (on-demand x (1 - the Spot Instance Advisor's savings)) or "override" (prices.json).
	OnDemandSource string `json:"onDemandSource,omitempty"`
	SpotSource     string `json:"spotSource,omitempty"`
}

// Catalog price sources, before any date.
const (
	SourceCatalog   = "catalog"
	SourceKarpenter = "karpenter"
	SourceAdvisor   = "advisor"
	SourceOverride  = "override"
)

// Catalog is the parsed embedded catalog.
type Catalog struct {
	Types  map[string]*InstanceType
	Prices map[string]map[string]Price // region -> type -> price
	// Dates are the sources' dates by source name ("catalog", "karpenter"), from the
	// catalog's "source" rows.
	Dates map[string]string

	derived sync.Map // Derived's results, by key
}

// Derived returns compute's result for key, computed once per catalog: every class priced
// against the same catalog shares what is derived from it (a rung's price over hundreds of
// types, for one) instead of deriving it again on every render. compute must depend on
// nothing but the catalog and what key spells out, and the catalog must not change after
// its first use (a changed feed makes a new catalog).
func (c *Catalog) Derived(key string, compute func() any) any {
	if v, ok := c.derived.Load(key); ok {
		return v
	}
	v, _ := c.derived.LoadOrStore(key, compute())
	return v
}

var (
	once   sync.Once
	loaded *Catalog
	err    error
)

// Load parses the embedded catalog once.
func Load() (*Catalog, error) {
	once.Do(func() {
		var text string
		if text, err = inflate(packed); err == nil {
			loaded, err = Parse(text)
		}
	})
	return loaded, err
}

// inflate is the embedded catalog's text.
func inflate(gz []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", fmt.Errorf("reading the embedded catalog: %w", err)
	}
	var text strings.Builder
	text.Grow(int(binary.LittleEndian.Uint32(gz[len(gz)-4:]))) // gzip's trailer: the size inflated
	if _, err := io.Copy(&text, zr); err != nil {
		return "", fmt.Errorf("reading the embedded catalog: %w", err)
	}
	return text.String(), nil
}

// Parse reads a catalog in the generated format.
func Parse(text string) (*Catalog, error) {
	c := &Catalog{Types: map[string]*InstanceType{}, Prices: map[string]map[string]Price{}, Dates: map[string]string{}}
	for n, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		bad := func(e error) error { return fmt.Errorf("catalog line %d %q: %w", n+1, line, e) }
		switch {
		case f[0] == "type" && len(f) == 14:
			t := &InstanceType{Name: f[1], Family: f[2], Category: f[3], Size: f[5], Arch: f[6], GPUMaker: undash(f[10]), GPUName: undash(f[11]), Burstable: f[13] == "1"}
			ints := []*int{&t.Generation, &t.VCPU, &t.GPUs}
			for i, s := range []string{f[4], f[7], f[9]} {
				v, e := strconv.Atoi(s)
				if e != nil {
					return nil, bad(e)
				}
				*ints[i] = v
			}
			var e1, e2 error
			t.MemoryMiB, e1 = strconv.ParseInt(f[8], 10, 64)
			t.GPUMemoryMiB, e2 = strconv.ParseInt(f[12], 10, 64)
			if e1 != nil || e2 != nil {
				return nil, bad(fmt.Errorf("memory: %v %v", e1, e2))
			}
			c.Types[t.Name] = t
		case f[0] == "price" && len(f) == 7:
			p := Price{Interruption: BucketUnknown}
			vals := []*float64{&p.OnDemand, &p.SpotMin, &p.SpotAvg}
			for i, s := range f[3:6] {
				v, e := strconv.ParseFloat(s, 64)
				if e != nil {
					return nil, bad(e)
				}
				*vals[i] = v
			}
			if f[6] != "-" {
				b, e := strconv.Atoi(f[6])
				if e != nil || b < 0 || b >= bucketCount {
					return nil, bad(fmt.Errorf("bucket %q", f[6]))
				}
				p.Interruption = Bucket(b)
			}
			if c.Prices[f[1]] == nil {
				c.Prices[f[1]] = map[string]Price{}
			}
			c.Prices[f[1]][f[2]] = p
		case f[0] == "source" && len(f) == 3:
			c.Dates[f[1]] = f[2]
		case f[0] == "priceonly" && len(f) == 3:
			v, e := strconv.ParseFloat(f[2], 64)
			if e != nil {
				return nil, bad(e)
			}
			c.Types[f[1]] = &InstanceType{Name: f[1], Family: strings.SplitN(f[1], ".", 2)[0], PriceOnly: true}
			if c.Prices["us-east-1"] == nil {
				c.Prices["us-east-1"] = map[string]Price{}
			}
			c.Prices["us-east-1"][f[1]] = Price{OnDemand: v, Interruption: BucketUnknown}
		default:
			return nil, bad(fmt.Errorf("unknown row"))
		}
	}
	for _, t := range c.Types {
		t.labels = t.computeLabels()
	}
	for _, prices := range c.Prices {
		for name, p := range prices {
			p.OnDemandSource = c.Source(SourceCatalog)
			if c.Types[name] != nil && c.Types[name].PriceOnly {
				p.OnDemandSource = c.Source(SourceKarpenter)
			}
			if p.SpotAvg > 0 {
				p.SpotSource = c.Source(SourceCatalog)
			}
			prices[name] = p
		}
	}
	return c, nil
}

// Source names one of the catalog's sources with its date, e.g. "catalog 2025-05-28".
func (c *Catalog) Source(name string) string {
	if d := c.Dates[name]; d != "" {
		return name + " " + d
	}
	return name
}

// CountedSources lists price sources by how many prices each gave, most first, e.g.
// "advisor 2026-11-30 (58), catalog 2025-05-28 (2)"; an empty source is "unknown".
func CountedSources(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		shown := n
		if shown == "" {
			shown = "unknown"
		}
		parts[i] = fmt.Sprintf("%s (%d)", shown, counts[n])
	}
	return strings.Join(parts, ", ")
}

// Discount is the spot price's discount on on-demand, 0..1; 0 without a spot price.
func (p Price) Discount() float64 {
	if p.SpotAvg <= 0 || p.OnDemand <= 0 {
		return 0
	}
	return 1 - p.SpotAvg/p.OnDemand
}

func undash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// Regions are the regions with prices, sorted.
func (c *Catalog) Regions() []string {
	out := make([]string, 0, len(c.Prices))
	for r := range c.Prices {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// MissingFacts are the types known only by price, sorted.
func (c *Catalog) MissingFacts() []string {
	var out []string
	for n, t := range c.Types {
		if t.PriceOnly {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Labels are the well-known Karpenter labels a node of this type carries (those the
// catalog knows), for matching against NodePool requirements. Do not modify the map.
func (t *InstanceType) Labels() map[string]string {
	if t.labels == nil {
		t.labels = t.computeLabels()
	}
	return t.labels
}

func (t *InstanceType) computeLabels() map[string]string {
	l := map[string]string{
		"node.kubernetes.io/instance-type":  t.Name,
		"karpenter.k8s.aws/instance-family": t.Family,
		"kubernetes.io/os":                  "linux",
	}
	if t.PriceOnly {
		return l
	}
	l["kubernetes.io/arch"] = t.Arch
	l["karpenter.k8s.aws/instance-category"] = t.Category
	l["karpenter.k8s.aws/instance-generation"] = strconv.Itoa(t.Generation)
	l["karpenter.k8s.aws/instance-size"] = t.Size
	l["karpenter.k8s.aws/instance-cpu"] = strconv.Itoa(t.VCPU)
	l["karpenter.k8s.aws/instance-memory"] = strconv.FormatInt(t.MemoryMiB, 10)
	if t.GPUs > 0 {
		l["karpenter.k8s.aws/instance-gpu-count"] = strconv.Itoa(t.GPUs)
		l["karpenter.k8s.aws/instance-gpu-manufacturer"] = t.GPUMaker
		l["karpenter.k8s.aws/instance-gpu-name"] = t.GPUName
		l["karpenter.k8s.aws/instance-gpu-memory"] = strconv.FormatInt(t.GPUMemoryMiB, 10)
	}
	return l
}

// factKeys are the labels the catalog knows for every type with facts; a requirement on
// one of them is decided by the type's value (or its absence), others are not the
// catalog's to judge (capacity type, zone).
var factKeys = map[string]bool{
	"node.kubernetes.io/instance-type": true, "kubernetes.io/os": true, "kubernetes.io/arch": true,
	"karpenter.k8s.aws/instance-family": true, "karpenter.k8s.aws/instance-category": true,
	"karpenter.k8s.aws/instance-generation": true, "karpenter.k8s.aws/instance-size": true,
	"karpenter.k8s.aws/instance-cpu": true, "karpenter.k8s.aws/instance-memory": true,
	"karpenter.k8s.aws/instance-gpu-count": true, "karpenter.k8s.aws/instance-gpu-manufacturer": true,
	"karpenter.k8s.aws/instance-gpu-name": true, "karpenter.k8s.aws/instance-gpu-memory": true,
}

// Matches says whether a node of this type could satisfy every requirement, as Karpenter
// would decide from the type's labels. Types known only by price never match: their
// facts are unknown. To test many types, compile the requirements once with NewMatcher.
func (t *InstanceType) Matches(reqs []karpv1.NodeSelectorRequirementWithMinValues) bool {
	return NewMatcher(reqs).Matches(t)
}

// Matcher holds requirements compiled once for testing many types.
type Matcher struct {
	reqs []*scheduling.Requirement
}

// PinnedCapacityType is the capacity type a rung's requirements pin (the ladder pins one
// per rung); on-demand when they pin none.
func PinnedCapacityType(reqs []karpv1.NodeSelectorRequirementWithMinValues) string {
	for _, r := range reqs {
		if r.Key == karpv1.CapacityTypeLabelKey && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return karpv1.CapacityTypeOnDemand
}

// NewMatcher compiles the requirements on labels the catalog knows; others (capacity
// type, zone) are not the catalog's to judge.
func NewMatcher(reqs []karpv1.NodeSelectorRequirementWithMinValues) *Matcher {
	m := &Matcher{}
	for _, r := range reqs {
		if factKeys[r.Key] {
			m.reqs = append(m.reqs, scheduling.NewRequirement(r.Key, r.Operator, r.Values...))
		}
	}
	return m
}

// Matches says whether a node of type t satisfies every compiled requirement.
func (m *Matcher) Matches(t *InstanceType) bool {
	if t.PriceOnly {
		return false
	}
	labels := t.Labels()
	for _, r := range m.reqs {
		value, ok := labels[r.Key]
		if !ok {
			if op := r.Operator(); op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist {
				return false
			}
			continue
		}
		if !r.Has(value) {
			return false
		}
	}
	return true
}
