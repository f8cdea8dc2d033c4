// Command crdfamilies writes the instance catalog's families into the Baseline CRD's
// commitment rules: `make manifests` runs it after controller-gen and crdbounds, before
// chartgen copies the CRDs into the charts.
//
// Why: a Savings Plan's family, the families of its discount and a Reserved Instance's
// instance type name a family, and a misspelt one (m9z) would price nothing without a
// word. The API server refuses it when its rule lists the families, but a marker cannot
// name a Go value, so the list is written here from internal/catalog, the catalog the
// renderer prices with. api/v1alpha1's
// TestCommitmentFamiliesAreTheCatalogs proves the CRD carries them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

func main() {
	file := flag.String("file", "config/crd/bases/poolsmith.dev_baselines.yaml", "the generated Baseline CRD")
	flag.Parse()
	if err := write(*file); err != nil {
		log.Fatalf("crdfamilies: %s: %v", *file, err)
	}
}

func write(file string) error {
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	versions, _ := dig(doc, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("no versions")
	}
	for _, v := range versions {
		for _, r := range familyRules(cat) {
			path := append([]string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "commitments", "properties"}, r.Path...)
			node, ok := dig(v, path...).(map[string]any)
			if !ok {
				return fmt.Errorf("no schema at %v", r.Path)
			}
			rule := map[string]any{"rule": r.Rule, "messageExpression": r.MessageExpression}
			// Replace the rule a previous run wrote (make manifests regenerates the file
			// first, but the command alone must not add it twice).
			var kept []any
			existing, _ := node["x-kubernetes-validations"].([]any)
			for _, e := range existing {
				if m, _ := e.(map[string]any); m["messageExpression"] != r.MessageExpression {
					kept = append(kept, e)
				}
			}
			node["x-kubernetes-validations"] = append(kept, rule)
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	// controller-gen starts each file with a document separator.
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}

// dig follows keys through nested maps.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// familyRule is one rule and the schema node it goes on, under spec.commitments.
type familyRule struct {
	Path                    []string
	Rule, MessageExpression string
}

// familyRules are the three places a commitment names a family, each checked against the
// catalog's families (a CEL list literal).
func familyRules(cat *catalog.Catalog) []familyRule {
	set := map[string]bool{}
	for _, t := range cat.Types {
		if t.Family != "" {
			set[t.Family] = true
		}
	}
	families := slices.Sorted(maps.Keys(set))
	list, _ := json.Marshal(families) // a JSON list of strings is a CEL list literal
	known := string(list)
	return []familyRule{
		{
			Path:              []string{"savingsPlans", "items", "properties", "family"},
			Rule:              "self in " + known,
			MessageExpression: `"family: " + self + " is not an instance family Poolsmith's catalog knows, e.g. m7g"`,
		},
		{
			Path:              []string{"savingsPlans", "items", "properties", "discount", "properties", "families", "items", "properties", "family"},
			Rule:              "self in " + known,
			MessageExpression: `"family: " + self + " is not an instance family Poolsmith's catalog knows, e.g. m7g"`,
		},
		{
			Path:              []string{"reservedInstances", "items", "properties", "instanceType"},
			Rule:              "self.find('^[^.]+') in " + known,
			MessageExpression: `"instanceType: " + self + " is not of an instance family Poolsmith's catalog knows, e.g. m7g.large"`,
		},
	}
}
