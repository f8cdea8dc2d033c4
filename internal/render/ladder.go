package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// MaxRungs is the most NodePools one class may render.
const MaxRungs = 20

// DefaultCeiling is the highest weight of a class that sets no weighting.ceiling.
const DefaultCeiling int32 = 100

// maxNameLength is the longest rung name; longer names are shortened with a hash.
const maxNameLength = 63

// SliceKind says what a rung is pinned to beyond capacity type and architecture.
type SliceKind string

const (
	SliceNone   SliceKind = ""
	SliceFamily SliceKind = "family"
	SliceType   SliceKind = "type"
)

// Plural names the slice kind in messages.
func (k SliceKind) Plural() string {
	if k == SliceFamily {
		return "families"
	}
	return string(k) + "s"
}

// Rung is one NodePool of a class's ladder.
type Rung struct {
	Name         string
	Weight       int32
	CapacityType v1alpha1.CapacityType
	Arch         v1alpha1.Architecture
	SliceKind    SliceKind
	// Slice is the family or instance type the rung is pinned to.
	Slice string
	// Fallback is true when the rung's capacity type is not the class's first one. It
	// follows the class's order, not the weights, so that new prices or signals never
	// change a rung's expireAfter (which would make Karpenter replace its nodes).
	Fallback bool
	// WeightReason says in one line why the rung has its weight.
	WeightReason string
	// PriceSources name where the prices that set the rung's cost came from, with how
	// many types each priced, e.g. "spot: advisor 2026-11-30 (58), catalog 2025-05-28 (2)";
	// empty when no price ranked the rung.
	PriceSources string
	// Commitment is the id of the commitment whose price ranked the rung, if any.
	Commitment string
}

// ladder returns the rungs in preference order: capacity types outermost, then
// architectures, then each architecture's slices.
func ladder(class string, capacityTypes []v1alpha1.CapacityType, archs []v1alpha1.Architecture, kind SliceKind, slices map[v1alpha1.Architecture][]string) []Rung {
	var rungs []Rung
	for i, ct := range capacityTypes {
		for _, arch := range archs {
			archSlices := slices[arch]
			if kind == SliceNone {
				archSlices = []string{""}
			}
			for _, s := range archSlices {
				rungs = append(rungs, Rung{
					Name:         RungName(class, ct, arch, s),
					CapacityType: ct,
					Arch:         arch,
					SliceKind:    kind,
					Slice:        s,
					Fallback:     i > 0,
				})
			}
		}
	}
	return rungs
}

// RungName is <class>-<capacity>-<arch>[-<slice, dots as dashes>]. A name over 63
// characters keeps its first 54 and appends "-" and the first 8 hex digits of the SHA-256
// of the full name, so it stays unique and stable (see ShortenName).
func RungName(class string, ct v1alpha1.CapacityType, arch v1alpha1.Architecture, slice string) string {
	name := fmt.Sprintf("%s-%s-%s", class, ct, arch)
	if slice != "" {
		name += "-" + strings.ReplaceAll(slice, ".", "-")
	}
	return ShortenName(name)
}

// ShortenName applies the 63-character hash rule. When the kept 54 characters end in a
// '.' followed by nothing but '-', the appended "-<hash>" would start a DNS label with '-'
// ("a.-1b6d841f" is no DNS subdomain), so those trailing '.' and '-' are dropped. No other
// name changes, so no valid rung is renamed; names of 63 characters or fewer are kept.
func ShortenName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := name[:54]
	if dot := strings.LastIndex(prefix, "."); dot >= 0 && strings.Trim(prefix[dot+1:], "-") == "" {
		prefix = strings.TrimRight(prefix, ".-")
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:8]
}

// ladder builds the rungs and their weights.
func (r *renderer) ladder(t *template) []Rung {
	if len(t.archs) == 0 || len(t.capacityTypes) == 0 {
		return nil
	}
	rungs := ladder(r.class.Name, t.capacityTypes, t.archs, t.sliceKind, t.slices)
	if len(rungs) == 0 {
		return nil // resolveSlices has said why
	}
	if len(rungs) > MaxRungs {
		r.invalid("spec", fmt.Sprintf("renders %d rungs (%d capacity types x %d architectures and their %s); at most %d are allowed",
			len(rungs), len(t.capacityTypes), len(t.archs), t.sliceKind.Plural(), MaxRungs))
		return nil
	}
	ceiling := DefaultCeiling
	if w := r.class.Spec.Weighting; w != nil && w.Ceiling != nil {
		ceiling = *w.Ceiling
	}
	if err := r.weigh(t, rungs, ceiling); err != nil {
		r.invalid("spec.weighting.ceiling", err.Error())
		return nil
	}
	return rungs
}
