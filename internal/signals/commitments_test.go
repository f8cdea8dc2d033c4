package signals_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/signals"
)

var exportedAt = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func file(t *testing.T, name string) *signals.NamedFile {
	t.Helper()
	data, err := os.ReadFile("testdata/commitments/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return &signals.NamedFile{Name: name, Data: data}
}

func readCommitments(t *testing.T, in signals.CommitmentExport) (*signals.CommitmentFacts, error) {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	return signals.ReadCommitments(in, "us-east-1", cat, exportedAt)
}

// The AWS CLI's three outputs, as its documentation shows them, become one document:
// the active plans that apply in the region (the m7g EC2 Instance plan with its Linux
// shared-tenancy rates in us-east-1, the Compute plan), the active Linux Reserved
// Instances with their amortized hourly price; the rest is left out.
func TestReadCommitmentsFromTheAWSCLIsJSON(t *testing.T) {
	got, err := readCommitments(t, signals.CommitmentExport{
		SavingsPlans: file(t, "sp.json"), Rates: []signals.NamedFile{*file(t, "rates-sp-0a1b2c3d.json")}, ReservedInstances: file(t, "ri.json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "exportedAt": "2026-12-02T12:00:00Z",
  "region": "us-east-1",
  "savingsPlans": [
    {
      "id": "sp-0a1b2c3d",
      "type": "EC2Instance",
      "commitment": "3.0",
      "family": "m7g",
      "region": "us-east-1",
      "state": "active",
      "start": "2026-06-01T00:00:00Z",
      "end": "2027-06-01T00:00:00Z",
      "rates": {
        "m7g.large": "0.056304",
        "m7g.xlarge": "0.112608"
      }
    },
    {
      "id": "sp-1b2c3d4e",
      "type": "Compute",
      "commitment": "10.5",
      "state": "active",
      "start": "2026-01-01T00:00:00Z",
      "end": "2029-01-01T00:00:00Z"
    }
  ],
  "reservedInstances": [
    {
      "id": "b847fa93-e282-4f55-b59a-1342fexample",
      "instanceType": "m7g.large",
      "count": 10,
      "scope": "Region",
      "effectiveHourly": "0.0646",
      "start": "2026-08-15T21:34:35.086Z",
      "end": "2027-08-14T21:34:34Z"
    },
    {
      "id": "c1d2e3f4-0000-4a4a-8b8b-abcdefexample",
      "instanceType": "c7g.xlarge",
      "count": 2,
      "scope": "AvailabilityZone",
      "zone": "us-east-1a",
      "effectiveHourly": "0.064247",
      "start": "2026-08-15T21:34:35.086Z",
      "end": "2027-08-14T21:34:34Z"
    }
  ]
}`
	if string(data) != want {
		t.Errorf("got\n%s\nwant\n%s", data, want)
	}
}

// Each bad field is refused with the file, the entry (and its id) and the field named.
func TestReadCommitmentsNamesTheFileEntryAndField(t *testing.T) {
	sp := func(entry string) *signals.NamedFile {
		return &signals.NamedFile{Name: "sp.json", Data: []byte(`{"savingsPlans": [` + entry + `]}`)}
	}
	ri := func(entry string) *signals.NamedFile {
		return &signals.NamedFile{Name: "ri.json", Data: []byte(`{"ReservedInstances": [` + entry + `]}`)}
	}
	const okRI = `"ReservedInstancesId": "r-1", "ProductDescription": "Linux/UNIX", "State": "active", "Duration": 31536000, "InstanceType": "m7g.large", "InstanceCount": 1`
	for _, tc := range []struct {
		in   signals.CommitmentExport
		want string
	}{
		{signals.CommitmentExport{SavingsPlans: &signals.NamedFile{Name: "sp.json", Data: []byte(`{"ReservedInstances": []}`)}}, "sp.json: not the JSON of aws savingsplans describe-savings-plans"},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "SP_1", "state": "active", "savingsPlanType": "Compute", "commitment": "1"}`)}, `sp.json: savingsPlans[0].savingsPlanId "SP_1": lowercase letters`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "-1"}`)}, `sp.json: savingsPlans[0] (sp-1).commitment "-1" is negative`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "0"}`)}, `sp.json: savingsPlans[0] (sp-1).commitment "0" is not more than 0 and at most 5000`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "lots"}`)}, `sp.json: savingsPlans[0] (sp-1).commitment "lots" is not a number`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "EC2Instance", "region": "us-east-1", "ec2InstanceFamily": "m9z", "commitment": "1"}`)}, `sp.json: savingsPlans[0] (sp-1).ec2InstanceFamily "m9z" is not an instance family`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "1", "start": "2027-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}`)}, `sp.json: savingsPlans[0] (sp-1).end 2026-01-01T00:00:00Z is not after start`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "1", "end": "next year"}`)}, `sp.json: savingsPlans[0] (sp-1).end "next year" is not an RFC 3339 time`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "1"}`),
			Rates: []signals.NamedFile{{Name: "rates.json", Data: []byte(`{"savingsPlanId": "sp-9", "searchResults": []}`)}}}, `rates.json: savingsPlanId "sp-9" is not an active or queued plan of --savings-plans`},
		{signals.CommitmentExport{SavingsPlans: sp(`{"savingsPlanId": "sp-1", "state": "active", "savingsPlanType": "Compute", "commitment": "1"}`),
			Rates: []signals.NamedFile{{Name: "rates.json", Data: []byte(`{"savingsPlanId": "sp-1", "searchResults": [{"rate": "-0.1", "properties": [{"name": "region", "value": "us-east-1"}, {"name": "instanceType", "value": "m7g.large"}, {"name": "productDescription", "value": "Linux/UNIX"}]}]}`)}}},
			`rates.json: searchResults[0].rate "-0.1" is negative (m7g.large)`},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "InstanceCount": 0}`)}, "ri.json: ReservedInstances[0] (r-1).InstanceCount 0: at least 1"},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "InstanceType": "m9z.large"}`)}, `ri.json: ReservedInstances[0] (r-1).InstanceType "m9z.large" is not an instance type`},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "Duration": 0}`)}, "ri.json: ReservedInstances[0] (r-1).Duration 0: the term in seconds"},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "FixedPrice": -5}`)}, "ri.json: ReservedInstances[0] (r-1): FixedPrice -5 and UsagePrice 0 may not be negative"},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "Scope": "Availability Zone"}`)}, "ri.json: ReservedInstances[0] (r-1).AvailabilityZone is missing for a zonal Reserved Instance"},
		{signals.CommitmentExport{ReservedInstances: ri(`{` + okRI + `, "Scope": "Galaxy"}`)}, `ri.json: ReservedInstances[0] (r-1).Scope "Galaxy" is neither Region nor Availability Zone`},
	} {
		_, err := readCommitments(t, tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("error %v, want it to start %q", err, tc.want)
		}
	}
}

// What signals commitments writes reads back whole; an export edited by hand or cut short
// is refused naming the entry and the field, so nothing is priced from half of it.
func TestParseCommitmentFacts(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	facts, err := readCommitments(t, signals.CommitmentExport{
		SavingsPlans: file(t, "sp.json"), Rates: []signals.NamedFile{*file(t, "rates-sp-0a1b2c3d.json")}, ReservedInstances: file(t, "ri.json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(facts)
	if err != nil {
		t.Fatal(err)
	}
	back, err := signals.ParseCommitmentFacts(data, cat)
	if err != nil {
		t.Fatalf("reading back what signals commitments wrote: %v", err)
	}
	if again, _ := json.Marshal(back); string(again) != string(data) {
		t.Errorf("read back\n%s\nwant\n%s", again, data)
	}
	doc := string(data)
	for _, tc := range []struct{ name, doc, want string }{
		{"truncated", doc[:len(doc)/2], "commitments.json: not Poolsmith's commitments document"},
		{"no exportedAt", strings.Replace(doc, `"exportedAt":"2026-12-02T12:00:00Z",`, "", 1), "commitments.json: exportedAt is missing"},
		{"a negative commitment", strings.Replace(doc, `"commitment":"3.0"`, `"commitment":"-3"`, 1), `commitments.json: savingsPlans[0] (sp-0a1b2c3d).commitment "-3" is not more than 0`},
		{"an unknown family", strings.Replace(doc, `"family":"m7g"`, `"family":"m9z"`, 1), `savingsPlans[0] (sp-0a1b2c3d).family "m9z" is not an instance family`},
		{"a rate of zero", strings.Replace(doc, `"m7g.xlarge":"0.112608"`, `"m7g.xlarge":"0"`, 1), `savingsPlans[0] (sp-0a1b2c3d).rates[m7g.xlarge] "0"`},
		{"an unknown field", strings.Replace(doc, `"region":"us-east-1",`, `"region":"us-east-1","discount":"31%",`, 1), `unknown field "discount"`},
	} {
		if _, err := signals.ParseCommitmentFacts([]byte(tc.doc), cat); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkParseCommitmentFacts reads an export with a Compute plan rated for every type
// the catalog prices in us-east-1 (docs/commitments.md quotes its size and time).
func BenchmarkParseCommitmentFacts(b *testing.B) {
	cat, err := catalog.Load()
	if err != nil {
		b.Fatal(err)
	}
	rates := map[string]string{}
	for name, p := range cat.Prices["us-east-1"] {
		rates[name] = strconv.FormatFloat(p.OnDemand*0.72, 'f', 6, 64)
	}
	end := exportedAt.Add(365 * 24 * time.Hour)
	data, err := json.Marshal(signals.CommitmentFacts{ExportedAt: exportedAt, Region: "us-east-1",
		SavingsPlans: []signals.SavingsPlanFacts{{ID: "sp-compute", Type: "Compute", Commitment: "100", State: "active", End: &end, Rates: rates}}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := signals.ParseCommitmentFacts(data, cat); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data)), "bytes")
	b.ReportMetric(float64(len(rates)), "rates")
}
