// Package migrate turns Karpenter objects of every API version (v1alpha5 Provisioner and
// v1alpha1 AWSNodeTemplate, v1beta1 NodePool and EC2NodeClass, v1) into Karpenter v1
// NodePools and EC2NodeClasses, reporting every semantic difference: what changed
// meaning, what had no equivalent, and which old defaults it wrote out explicitly.
package migrate

import "fmt"

// Severities of findings.
const (
	// Error: the object cannot be migrated as it is; nothing is written.
	Error = "error"
	// Warning: behaviour changes, or a field was dropped.
	Warning = "warning"
	// Info: an old default or meaning was written out explicitly; behaviour is kept.
	Info = "info"
)

// Finding is one semantic difference.
type Finding struct {
	Severity string `json:"severity"`
	// Source names the input object: file, document, kind and name.
	Source  string `json:"source"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s\t%s\t%s\t%s", f.Severity, f.Source, f.Field, f.Message)
}

// Report lists every finding, in input order.
type Report []Finding

// HasErrors says whether any finding is an error.
func (r Report) HasErrors() bool {
	for _, f := range r {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// Losses are the findings that mean behaviour changes or something was dropped.
func (r Report) Losses() Report {
	var out Report
	for _, f := range r {
		if f.Severity != Info {
			out = append(out, f)
		}
	}
	return out
}

type reporter struct {
	report Report
	source string
}

func (r *reporter) add(severity, field, format string, args ...any) {
	r.report = append(r.report, Finding{Severity: severity, Source: r.source, Field: field, Message: fmt.Sprintf(format, args...)})
}
