package observe

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// Pricing gives the catalog classes are priced with and the verdict on the signals
// behind it; *signals.Provider reads them from the signals ConfigMap.
type Pricing interface {
	Catalog(ctx context.Context, c client.Reader) (*catalog.Catalog, signals.Freshness, error)
}

// Source is where a class's inputs come from: the manager's cache, or the CLI's input
// files and client.
type Source struct {
	// Baselines are taken first, by name: the CLI's input files.
	Baselines map[string]*v1alpha1.Baseline
	// Reader reads the Baselines not given, and Pricing's ConfigMap; nil reads nothing.
	// It decodes as the manager's cache does (internal/decode): a Baseline that does not
	// decode whole comes back with decode.Error set, not as an error.
	Reader client.Reader
	// Pricing, when set, prices the catalog from the spot signals; without it
	// Options.Catalog is used as given (the CLI's --signals file, or the one diff read).
	Pricing Pricing
	// Exports, when set, reads the signals ConfigMap's commitments.json into
	// Options.Commitments.Export for a Baseline that declares commitments; without it the
	// export is as Options say (the CLI's --signals or --commitments-file).
	Exports Exports
	// Options are the rest of what the cluster knows: region, usage, capabilities.
	Options render.Options
	// Usage, when set, reads the class's live requests for a headroom sized by percentage
	// (Options.Headroom.Usage); a class without one reads none.
	Usage *Usage
	// Tracking, when set, tracks the class's commitments as the manager does (coverage
	// from its NodeClaims, states from its status); without it commitments are as Options
	// say (offline in the CLI, ranking nothing in rebalance).
	Tracking *Tracking
}

// Inputs are a class's render inputs and the verdict on the signals that priced them.
type Inputs struct {
	render.Inputs
	// Freshness is Pricing's verdict (SignalsCurrent); zero without Pricing.
	Freshness signals.Freshness
	// Coverage is what Tracking found of the class's commitments; nil without Tracking or
	// when the Baseline declares none.
	Coverage *Coverage
}

// SizedByPercentage tells whether the headroom's size, taken as one group from the class,
// else the Baseline (as render resolves it), has a percentage.
func SizedByPercentage(wc *v1alpha1.WorkloadClass, b *v1alpha1.Baseline) bool {
	for _, h := range []*v1alpha1.Headroom{wc.Spec.Headroom, b.Spec.Headroom} {
		if h != nil && (h.Replicas != nil || h.Percentage != nil) {
			return h.Percentage != nil
		}
	}
	return false
}

// Assemble gathers everything wc is rendered from, the one way the WorkloadClass and
// rebalance reconcilers and the CLI do: its Baseline (given, else read; nil when
// neither has it), then, for a Baseline that decodes, the priced catalog. What a missing
// or undecodable Baseline means is the caller's to say (a condition, a line of diff, no
// move). A headroom sized by percentage also gets the class's live requests (Usage).
func (s Source) Assemble(ctx context.Context, wc *v1alpha1.WorkloadClass) (Inputs, error) {
	in := Inputs{Inputs: render.Inputs{Class: wc, Options: s.Options}}
	name := wc.BaselineName()
	if b, ok := s.Baselines[name]; ok {
		in.Baseline = b
	} else if s.Reader != nil {
		b := &v1alpha1.Baseline{}
		switch err := s.Reader.Get(ctx, client.ObjectKey{Name: name}, b); {
		case err == nil:
			in.Baseline = b
		case !apierrors.IsNotFound(err):
			return in, fmt.Errorf("getting Baseline %s: %w", name, err)
		}
	}
	if in.Baseline == nil || decode.Error(in.Baseline) != "" {
		return in, nil
	}
	if s.Usage != nil && SizedByPercentage(wc, in.Baseline) {
		usage, err := s.Usage.Requested(ctx, wc.Name)
		if err != nil {
			return in, err
		}
		in.Options.Headroom.Usage = usage
	}
	if s.Pricing != nil {
		cat, fresh, err := s.Pricing.Catalog(ctx, s.Reader)
		if err != nil {
			return in, err
		}
		in.Options.Catalog, in.Freshness = cat, fresh
	}
	// The commitments' facts a Baseline leaves out come from the signals ConfigMap's
	// commitments.json, read where the spot signals are.
	if s.Exports != nil && in.Baseline.Spec.Commitments != nil && s.Reader != nil {
		export, err := ReadExport(ctx, s.Exports, s.Reader)
		if err != nil {
			return in, err
		}
		in.Options.Commitments.Export = export
	}
	if s.Tracking != nil && in.Baseline.Spec.Commitments != nil && s.Reader != nil {
		if err := s.coverage(ctx, &in, in.Options.Catalog); err != nil {
			return in, err
		}
	}
	return in, nil
}
