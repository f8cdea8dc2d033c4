package signals

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// CommitmentsKey holds the account's Savings Plans and Reserved Instances, normalized from
// what the AWS CLI printed (`poolsmith signals commitments`; docs/commitments.md).
const CommitmentsKey = "commitments.json"

// CommitmentsFieldManager applies CommitmentsKey, and only it, so `signals publish`
// (field manager poolsmith-signals) and `signals commitments` never remove each other's
// keys from the shared ConfigMap.
const CommitmentsFieldManager = "poolsmith-commitments"

// CommitmentFacts is the document under CommitmentsKey: what AWS says of each commitment,
// with the field names of the Baseline's spec.commitments, so that a Baseline naming an id
// can take these facts field by field.
type CommitmentFacts struct {
	// ExportedAt is when the AWS CLI's output was read.
	ExportedAt time.Time `json:"exportedAt"`
	// Region is the region the export kept.
	Region            string              `json:"region"`
	SavingsPlans      []SavingsPlanFacts  `json:"savingsPlans,omitempty"`
	ReservedInstances []ReservedInstFacts `json:"reservedInstances,omitempty"`
}

// SavingsPlanFacts is one Savings Plan, from describe-savings-plans, with its per-type
// rates from describe-savings-plan-rates when given.
type SavingsPlanFacts struct {
	ID         string     `json:"id"`
	Type       string     `json:"type"`
	Commitment string     `json:"commitment"`
	Family     string     `json:"family,omitempty"`
	Region     string     `json:"region,omitempty"`
	State      string     `json:"state"`
	Start      *time.Time `json:"start,omitempty"`
	End        *time.Time `json:"end,omitempty"`
	// Rates are US dollars per hour of one instance, by instance type (Linux/UNIX,
	// shared tenancy, in Region).
	Rates map[string]string `json:"rates,omitempty"`
}

// ReservedInstFacts is one Reserved Instance (Linux/UNIX, default tenancy), from
// describe-reserved-instances.
type ReservedInstFacts struct {
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	Count        int32  `json:"count"`
	// Scope is Region (size-flexible in the family) or AvailabilityZone, with Zone.
	Scope string `json:"scope"`
	Zone  string `json:"zone,omitempty"`
	// EffectiveHourly is the amortized price of one instance: FixedPrice over the term's
	// hours, plus UsagePrice, plus the hourly recurring charges.
	EffectiveHourly string     `json:"effectiveHourly"`
	Start           *time.Time `json:"start,omitempty"`
	End             *time.Time `json:"end,omitempty"`
}

var (
	commitmentID = regexp.MustCompile(`^[0-9a-z-]{1,64}$`)
	typeName     = regexp.MustCompile(`^[a-z0-9-]+\.[a-z0-9-]+$`)
)

// maxCommitment is AWS's largest hourly commitment, the CRD's bound.
const maxCommitment = 5000.0

// CommitmentExport is what the AWS CLI printed, file by file: the name is for errors.
type CommitmentExport struct {
	SavingsPlans      *NamedFile
	Rates             []NamedFile
	ReservedInstances *NamedFile
}

// NamedFile is a file's name and content.
type NamedFile struct {
	Name string
	Data []byte
}

// ReadCommitments turns the AWS CLI's JSON into the CommitmentFacts of region, checking
// every field it keeps: an error names the file, the entry and the field. It keeps
// Savings Plans that are active or queued (Compute plans, and EC2 Instance plans of the
// region), their rates in the region for Linux/UNIX on shared tenancy, and active
// Linux/UNIX Reserved Instances of default tenancy. Families and instance types must be
// ones the catalog knows.
func ReadCommitments(in CommitmentExport, region string, cat *catalog.Catalog, now time.Time) (*CommitmentFacts, error) {
	out := &CommitmentFacts{ExportedAt: now.UTC(), Region: region}
	if in.SavingsPlans != nil {
		plans, err := readSavingsPlans(*in.SavingsPlans, region, cat)
		if err != nil {
			return nil, err
		}
		out.SavingsPlans = plans
	}
	byID := map[string]*SavingsPlanFacts{}
	for i := range out.SavingsPlans {
		byID[out.SavingsPlans[i].ID] = &out.SavingsPlans[i]
	}
	for _, f := range in.Rates {
		if err := readRates(f, region, cat, byID); err != nil {
			return nil, err
		}
	}
	if in.ReservedInstances != nil {
		ris, err := readReservedInstances(*in.ReservedInstances, cat)
		if err != nil {
			return nil, err
		}
		out.ReservedInstances = ris
	}
	return out, nil
}

// awsTime reads a time as the AWS CLI prints it (RFC 3339, milliseconds or not).
func awsTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an RFC 3339 time", s)
	}
	return &t, nil
}

// usd reads a non-negative US dollar figure given as a string, as the AWS CLI prints it.
func usd(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%q is not a number", s)
	case v < 0:
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
}

func readSavingsPlans(f NamedFile, region string, cat *catalog.Catalog) ([]SavingsPlanFacts, error) {
	var doc struct {
		SavingsPlans *[]struct {
			ID         string `json:"savingsPlanId"`
			Type       string `json:"savingsPlanType"`
			Commitment string `json:"commitment"`
			Currency   string `json:"currency"`
			Family     string `json:"ec2InstanceFamily"`
			Region     string `json:"region"`
			State      string `json:"state"`
			Start      string `json:"start"`
			End        string `json:"end"`
		} `json:"savingsPlans"`
	}
	if err := json.Unmarshal(f.Data, &doc); err != nil || doc.SavingsPlans == nil {
		return nil, fmt.Errorf("%s: not the JSON of aws savingsplans describe-savings-plans (no savingsPlans list)%s", f.Name, errSuffix(err))
	}
	var out []SavingsPlanFacts
	for i, p := range *doc.SavingsPlans {
		at := fmt.Sprintf("%s: savingsPlans[%d]", f.Name, i)
		if !commitmentID.MatchString(p.ID) {
			return nil, fmt.Errorf("%s.savingsPlanId %q: lowercase letters, digits and dashes, 1 to 64", at, p.ID)
		}
		at += " (" + p.ID + ")"
		if p.State != "active" && p.State != "queued" {
			continue // retired, payment-failed, queued-deleted...: nothing to count on
		}
		switch p.Type {
		case "Compute":
		case "EC2Instance":
			if p.Region != region {
				continue // an EC2 Instance plan applies in its own region only
			}
			if _, ok := cat.Arch(p.Family); !ok || strings.Contains(p.Family, ".") {
				return nil, fmt.Errorf("%s.ec2InstanceFamily %q is not an instance family Poolsmith's catalog knows", at, p.Family)
			}
		default:
			continue // SageMaker and other plans cover no EC2 instance
		}
		if p.Currency != "" && p.Currency != "USD" {
			return nil, fmt.Errorf("%s.currency %q: only USD plans can be priced", at, p.Currency)
		}
		v, err := usd(p.Commitment)
		if err == nil && (v == 0 || v > maxCommitment) {
			err = fmt.Errorf("%q is not more than 0 and at most %g US dollars per hour", p.Commitment, maxCommitment)
		}
		if err != nil {
			return nil, fmt.Errorf("%s.commitment %v", at, err)
		}
		start, err := awsTime(p.Start)
		if err != nil {
			return nil, fmt.Errorf("%s.start %v", at, err)
		}
		end, err := awsTime(p.End)
		if err != nil {
			return nil, fmt.Errorf("%s.end %v", at, err)
		}
		if start != nil && end != nil && !end.After(*start) {
			return nil, fmt.Errorf("%s.end %s is not after start %s", at, p.End, p.Start)
		}
		plan := SavingsPlanFacts{ID: p.ID, Type: p.Type, Commitment: p.Commitment, State: p.State, Start: start, End: end}
		if p.Type == "EC2Instance" {
			plan.Family, plan.Region = p.Family, p.Region
		}
		out = append(out, plan)
	}
	return out, nil
}

func readRates(f NamedFile, region string, cat *catalog.Catalog, plans map[string]*SavingsPlanFacts) error {
	var doc struct {
		ID      string `json:"savingsPlanId"`
		Results *[]struct {
			Rate       string `json:"rate"`
			Currency   string `json:"currency"`
			Unit       string `json:"unit"`
			Properties []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"properties"`
		} `json:"searchResults"`
	}
	if err := json.Unmarshal(f.Data, &doc); err != nil || doc.Results == nil {
		return fmt.Errorf("%s: not the JSON of aws savingsplans describe-savings-plan-rates (no searchResults list)%s", f.Name, errSuffix(err))
	}
	plan, ok := plans[doc.ID]
	if !ok {
		return fmt.Errorf("%s: savingsPlanId %q is not an active or queued plan of --savings-plans that applies in %s", f.Name, doc.ID, region)
	}
	for i, r := range *doc.Results {
		at := fmt.Sprintf("%s: searchResults[%d]", f.Name, i)
		props := map[string]string{}
		for _, p := range r.Properties {
			props[p.Name] = p.Value
		}
		if props["region"] != region || props["productDescription"] != "Linux/UNIX" || (props["tenancy"] != "" && props["tenancy"] != "shared") ||
			(r.Unit != "" && r.Unit != "Hrs") {
			continue
		}
		t := props["instanceType"]
		if _, ok := cat.Types[t]; !ok {
			if !typeName.MatchString(t) {
				return fmt.Errorf("%s.properties instanceType %q is not an instance type", at, t)
			}
			continue // a type newer than the catalog prices nothing Poolsmith renders
		}
		if r.Currency != "" && r.Currency != "USD" {
			return fmt.Errorf("%s.currency %q: only USD rates can be used", at, r.Currency)
		}
		if _, err := usd(r.Rate); err != nil {
			return fmt.Errorf("%s.rate %v (%s)", at, err, t)
		}
		if plan.Rates == nil {
			plan.Rates = map[string]string{}
		}
		plan.Rates[t] = r.Rate
	}
	return nil
}

func readReservedInstances(f NamedFile, cat *catalog.Catalog) ([]ReservedInstFacts, error) {
	var doc struct {
		ReservedInstances *[]struct {
			ID               string  `json:"ReservedInstancesId"`
			InstanceType     string  `json:"InstanceType"`
			InstanceCount    int32   `json:"InstanceCount"`
			Scope            string  `json:"Scope"`
			AvailabilityZone string  `json:"AvailabilityZone"`
			State            string  `json:"State"`
			Product          string  `json:"ProductDescription"`
			Tenancy          string  `json:"InstanceTenancy"`
			Currency         string  `json:"CurrencyCode"`
			FixedPrice       float64 `json:"FixedPrice"`
			UsagePrice       float64 `json:"UsagePrice"`
			Duration         int64   `json:"Duration"`
			Recurring        []struct {
				Amount    float64 `json:"Amount"`
				Frequency string  `json:"Frequency"`
			} `json:"RecurringCharges"`
			Start string `json:"Start"`
			End   string `json:"End"`
		} `json:"ReservedInstances"`
	}
	if err := json.Unmarshal(f.Data, &doc); err != nil || doc.ReservedInstances == nil {
		return nil, fmt.Errorf("%s: not the JSON of aws ec2 describe-reserved-instances (no ReservedInstances list)%s", f.Name, errSuffix(err))
	}
	var out []ReservedInstFacts
	for i, r := range *doc.ReservedInstances {
		at := fmt.Sprintf("%s: ReservedInstances[%d]", f.Name, i)
		if !commitmentID.MatchString(r.ID) {
			return nil, fmt.Errorf("%s.ReservedInstancesId %q: lowercase letters, digits and dashes, 1 to 64", at, r.ID)
		}
		at += " (" + r.ID + ")"
		if r.State != "active" || !strings.HasPrefix(r.Product, "Linux/UNIX") || (r.Tenancy != "" && r.Tenancy != "default") {
			continue // Poolsmith's NodePools launch Linux on shared hardware
		}
		if _, ok := cat.Types[r.InstanceType]; !ok {
			return nil, fmt.Errorf("%s.InstanceType %q is not an instance type Poolsmith's catalog knows", at, r.InstanceType)
		}
		if r.InstanceCount < 1 {
			return nil, fmt.Errorf("%s.InstanceCount %d: at least 1", at, r.InstanceCount)
		}
		if r.Currency != "" && r.Currency != "USD" {
			return nil, fmt.Errorf("%s.CurrencyCode %q: only USD can be priced", at, r.Currency)
		}
		if r.Duration <= 0 {
			return nil, fmt.Errorf("%s.Duration %d: the term in seconds, more than 0", at, r.Duration)
		}
		if r.FixedPrice < 0 || r.UsagePrice < 0 {
			return nil, fmt.Errorf("%s: FixedPrice %g and UsagePrice %g may not be negative", at, r.FixedPrice, r.UsagePrice)
		}
		hourly := r.FixedPrice/(float64(r.Duration)/3600) + r.UsagePrice
		for j, c := range r.Recurring {
			if c.Amount < 0 {
				return nil, fmt.Errorf("%s.RecurringCharges[%d].Amount %g is negative", at, j, c.Amount)
			}
			if c.Frequency == "Hourly" {
				hourly += c.Amount
			}
		}
		ri := ReservedInstFacts{ID: r.ID, InstanceType: r.InstanceType, Count: r.InstanceCount, Scope: "Region",
			EffectiveHourly: strconv.FormatFloat(math.Round(hourly*1e6)/1e6, 'f', -1, 64)}
		switch r.Scope {
		case "", "Region":
		case "Availability Zone", "AvailabilityZone":
			if r.AvailabilityZone == "" {
				return nil, fmt.Errorf("%s.AvailabilityZone is missing for a zonal Reserved Instance", at)
			}
			ri.Scope, ri.Zone = "AvailabilityZone", r.AvailabilityZone
		default:
			return nil, fmt.Errorf("%s.Scope %q is neither Region nor Availability Zone", at, r.Scope)
		}
		var err error
		if ri.Start, err = awsTime(r.Start); err != nil {
			return nil, fmt.Errorf("%s.Start %v", at, err)
		}
		if ri.End, err = awsTime(r.End); err != nil {
			return nil, fmt.Errorf("%s.End %v", at, err)
		}
		out = append(out, ri)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// ParseCommitmentFacts reads a commitments.json document (what ReadCommitments wrote) and
// checks every field Poolsmith prices with, as strictly as the Baseline's API does: an
// error names the entry and the field. A hand-edited or truncated export is refused whole
// rather than half read.
func ParseCommitmentFacts(data []byte, cat *catalog.Catalog) (*CommitmentFacts, error) {
	var doc CommitmentFacts
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not Poolsmith's commitments document: %w", CommitmentsKey, err)
	}
	if doc.ExportedAt.IsZero() {
		return nil, fmt.Errorf("%s: exportedAt is missing", CommitmentsKey)
	}
	seen := map[string]bool{}
	for i, p := range doc.SavingsPlans {
		at, err := checkID(fmt.Sprintf("%s: savingsPlans[%d]", CommitmentsKey, i), p.ID, seen)
		if err != nil {
			return nil, err
		}
		switch p.Type {
		case "Compute":
			if p.Family != "" {
				return nil, fmt.Errorf("%s.family %q: a Compute plan has none", at, p.Family)
			}
		case "EC2Instance":
			if _, ok := cat.Arch(p.Family); !ok || strings.Contains(p.Family, ".") {
				return nil, fmt.Errorf("%s.family %q is not an instance family Poolsmith's catalog knows", at, p.Family)
			}
		default:
			return nil, fmt.Errorf("%s.type %q is neither Compute nor EC2Instance", at, p.Type)
		}
		if v, err := usd(p.Commitment); err != nil || v == 0 || v > maxCommitment {
			return nil, fmt.Errorf("%s.commitment %q is not more than 0 and at most %g US dollars per hour", at, p.Commitment, maxCommitment)
		}
		if p.Start != nil && p.End != nil && !p.End.After(*p.Start) {
			return nil, fmt.Errorf("%s.end is not after start", at)
		}
		for t, r := range p.Rates {
			if !typeName.MatchString(t) {
				return nil, fmt.Errorf("%s.rates %q is not an instance type", at, t)
			}
			if v, err := usd(r); err != nil || v == 0 || v > maxCommitment {
				return nil, fmt.Errorf("%s.rates[%s] %q is not more than 0 and at most %g US dollars per hour", at, t, r, maxCommitment)
			}
		}
	}
	for i, r := range doc.ReservedInstances {
		at, err := checkID(fmt.Sprintf("%s: reservedInstances[%d]", CommitmentsKey, i), r.ID, seen)
		if err != nil {
			return nil, err
		}
		if _, ok := cat.Types[r.InstanceType]; !ok {
			return nil, fmt.Errorf("%s.instanceType %q is not an instance type Poolsmith's catalog knows", at, r.InstanceType)
		}
		if r.Count < 1 || r.Count > 100000 {
			return nil, fmt.Errorf("%s.count %d: from 1 to 100000", at, r.Count)
		}
		switch r.Scope {
		case "Region":
		case "AvailabilityZone":
			if r.Zone == "" {
				return nil, fmt.Errorf("%s.zone is missing for a zonal Reserved Instance", at)
			}
		default:
			return nil, fmt.Errorf("%s.scope %q is neither Region nor AvailabilityZone", at, r.Scope)
		}
		if v, err := usd(r.EffectiveHourly); err != nil || v > maxCommitment {
			return nil, fmt.Errorf("%s.effectiveHourly %q is not from 0 to %g US dollars per hour", at, r.EffectiveHourly, maxCommitment)
		}
		if r.Start != nil && r.End != nil && !r.End.After(*r.Start) {
			return nil, fmt.Errorf("%s.end is not after start", at)
		}
	}
	return &doc, nil
}

// CommitmentsFromConfigMap reads the signals ConfigMap's commitments.json: nil, nil when
// the key is absent (no export).
func CommitmentsFromConfigMap(cm *corev1.ConfigMap, cat *catalog.Catalog) (*CommitmentFacts, error) {
	raw, ok := cm.Data[CommitmentsKey]
	if !ok {
		return nil, nil
	}
	facts, err := ParseCommitmentFacts([]byte(raw), cat)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return facts, nil
}

// CommitmentsFromFile reads commitments.json from a file holding the signals ConfigMap
// (YAML or JSON; nil, nil without the key) or the bare document.
func CommitmentsFromFile(data []byte, source string, cat *catalog.Catalog) (*CommitmentFacts, error) {
	cm, err := configMapIn(data, source)
	if err != nil {
		return nil, err
	}
	if cm != nil {
		facts, err := CommitmentsFromConfigMap(cm, cat)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return facts, nil
	}
	facts, err := ParseCommitmentFacts(data, cat)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return facts, nil
}

// checkID checks an entry's id at at (a valid id, not seen before), records it in seen,
// and returns at naming the id, for the entry's other messages.
func checkID(at, id string, seen map[string]bool) (string, error) {
	if !commitmentID.MatchString(id) {
		return "", fmt.Errorf("%s.id %q: lowercase letters, digits and dashes, 1 to 64", at, id)
	}
	if seen[id] {
		return "", fmt.Errorf("%s.id %q is listed twice", at, id)
	}
	seen[id] = true
	return at + " (" + id + ")", nil
}
