package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/guardrail"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// input is the Baselines and WorkloadClasses read from -f paths.
type input struct {
	baselines map[string]*v1alpha1.Baseline
	classes   []*v1alpha1.WorkloadClass
	// where names each object's file and document, by KIND/NAME.
	where map[string]string
	// opts are what every class is rendered with.
	opts render.Options
	// others are the objects of the extra kinds a command asked for (workloads).
	others []manifest.Object
	// usage is, by class, what its own pods request (simulate's first run): what a
	// percentage-sized headroom is of. A class without one counts none.
	usage map[string]corev1.ResourceList
}

// MaxClasses is the most WorkloadClasses one command reads (a cluster's worth many
// times over); with manifest.MaxInputBytes it bounds the work of an offline command.
const MaxClasses = 5000

// inputError is invalid input: every message names the file, the object and the field.
type inputError []string

func (e inputError) Error() string { return strings.Join(e, "\n") }

// loadInput reads and strictly decodes Poolsmith objects. Objects of the extra kinds are
// kept in others; any other kind is skipped with a warning on stderr. A Baseline's
// commitments resolve with export (the signals' commitments.json); with keepUnresolved an
// entry without facts is left to the render, which leaves it out as the manager does (lint
// reports it, diff shows what the manager writes), else it is refused.
func loadInput(paths []string, stdin io.Reader, stderr io.Writer, extra map[string]bool, export commitment.Export, keepUnresolved bool) (*input, error) {
	if len(paths) == 0 {
		return nil, usageError{fmt.Errorf("no input: give -f PATH (a file, a directory or - for stdin)")}
	}
	objs, err := manifest.Load(paths, stdin)
	if err != nil {
		return nil, inputError{err.Error()}
	}
	v, err := validate.Default()
	if err != nil {
		return nil, err
	}
	in := &input{baselines: map[string]*v1alpha1.Baseline{}, where: map[string]string{}}
	var errs inputError
	for _, o := range objs {
		if extra[o.GetKind()] {
			in.others = append(in.others, o)
			continue
		}
		if o.GroupVersionKind().GroupVersion() != v1alpha1.GroupVersion {
			fmt.Fprintf(stderr, "warning: %s: ignoring %s, not a poolsmith.dev/v1alpha1 object\n", o.Where(), o.GetAPIVersion())
			continue
		}
		key := o.GetKind() + "/" + o.GetName()
		if _, dup := in.where[key]; dup {
			errs = append(errs, fmt.Sprintf("%s: duplicate %s, also in %s", o.Where(), key, in.where[key]))
			continue
		}
		in.where[key] = o.Where()
		// Refuse what admission would: Poolsmith's CRD schema and CEL rules, in-process.
		if v.Known(o.GroupVersionKind()) {
			if err := v.Create(o.Object); err != nil {
				for _, cause := range validate.Causes(err) {
					errs = append(errs, fmt.Sprintf("%s: %s", o.Where(), cause))
				}
				continue
			}
		}
		switch o.GetKind() {
		case "Baseline":
			b := &v1alpha1.Baseline{}
			if err := o.Into(b); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			// What admission cannot judge (CEL has no clock) and the manager would leave out:
			// an expired commitment, or one without the facts to price anything.
			_, problems := commitment.Resolve(b.Spec.Commitments, export, time.Now())
			refused := false
			for _, p := range problems {
				if keepUnresolved && p.Reason != commitment.ReasonExpired {
					continue
				}
				errs = append(errs, fmt.Sprintf("%s: %s", o.Where(), p.Message))
				refused = true
			}
			if refused {
				continue
			}
			in.baselines[b.Name] = b
		case "WorkloadClass":
			wc := &v1alpha1.WorkloadClass{}
			if err := o.Into(wc); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			in.classes = append(in.classes, wc)
		default:
			fmt.Fprintf(stderr, "warning: %s: ignoring unknown kind %s\n", o.Where(), o.GetKind())
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	switch {
	case len(in.classes) == 0 && len(in.baselines) == 0:
		return nil, inputError{"no Baseline or WorkloadClass found in the input"}
	case len(in.classes) == 0:
		return nil, inputError{"no WorkloadClass found in the input, only Baselines: nothing to render"}
	case len(in.classes) > MaxClasses:
		return nil, inputError{fmt.Sprintf("the input has %d WorkloadClasses; at most %d are read at once", len(in.classes), MaxClasses)}
	}
	sort.Slice(in.classes, func(i, j int) bool { return in.classes[i].Name < in.classes[j].Name })
	return in, nil
}

// renderEach renders every class, keeping each class's error. Its inputs are gathered as
// the controller gathers them, from the input's Baselines and the flags' options.
func (in *input) renderEach() []lint.Class {
	out := make([]lint.Class, 0, len(in.classes))
	source := observe.Source{Baselines: in.baselines, Options: in.opts}
	for _, wc := range in.classes {
		inputs, err := source.Assemble(context.Background(), wc) // reads nothing: no Reader
		inputs.Options.Headroom.Usage = in.usage[wc.Name]
		c := lint.Class{Class: wc, Baseline: inputs.Baseline, Err: err}
		if c.Err == nil && c.Baseline == nil {
			c.Err = fmt.Errorf("spec.baselineRef: Baseline %q is not in the input", wc.BaselineName())
		}
		if c.Err == nil {
			// The guardrails as the API server judges them (the same policy, in-process).
			c.Err = guardrail.Judge(inputs.Baseline, wc)
		}
		if c.Err == nil {
			if c.Result, c.Err = inputs.Render(); c.Err == nil {
				c.Err = refusedByKarpenter(c.Result)
			}
		}
		out = append(out, c)
	}
	return out
}

// refusedByKarpenter validates every rendered object against Karpenter's CRDs, as the
// controller does before its first write, so the CLI never prints what the cluster refuses.
func refusedByKarpenter(res *render.Result) error {
	v, err := validate.Default()
	if err != nil {
		return err
	}
	docs, err := res.Objects()
	if err != nil {
		return err
	}
	var errs render.Errors
	for _, doc := range docs {
		if err := v.Create(doc); err != nil {
			u := unstructured.Unstructured{Object: doc}
			for _, cause := range validate.Causes(err) {
				errs = append(errs, &render.Error{Reason: v1alpha1.ReasonInvalidSpec, Field: u.GetKind() + "/" + u.GetName(),
					Message: "Karpenter's CRD refuses the rendered object: " + cause})
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// renderAll renders every class; it fails with every class's errors, each naming its file.
func (in *input) renderAll() ([]*render.Result, error) {
	var out []*render.Result
	var errs inputError
	for _, c := range in.renderEach() {
		where := in.where["WorkloadClass/"+c.Class.Name]
		var rerrs render.Errors
		switch {
		case errors.As(c.Err, &rerrs):
			for _, e := range rerrs {
				errs = append(errs, fmt.Sprintf("%s: %s (%s)", where, e.Error(), e.Reason))
			}
		case c.Err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", where, c.Err))
		default:
			out = append(out, c.Result)
		}
	}
	// Two classes rendering one name would fight over one object in the cluster.
	for _, f := range lint.NameCollisions(out) {
		errs = append(errs, fmt.Sprintf("%s: %s (%s)", f.Object, f.Message, f.Check))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// namespaces are the Namespaces among the extra kinds, in input order.
func (in *input) namespaces() []*corev1.Namespace {
	var out []*corev1.Namespace
	for _, o := range in.others {
		ns := &corev1.Namespace{}
		if o.GetKind() == "Namespace" && o.Into(ns) == nil {
			out = append(out, ns)
		}
	}
	return out
}
