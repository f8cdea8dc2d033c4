package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/plan"
)

// fanOutQuiet is how long after the last class a Baseline edit reached its one event is
// sent: the classes of a Baseline are planned a few at a time, so the edit reaches them
// over seconds, without a pause of this length until the last.
const fanOutQuiet = 2 * time.Second

// fanOutNames is how many class names and changed fields a fan-out event lists.
const fanOutNames = 5

// baselineSeen is the Baseline generation a class's last applied pass rendered from.
type baselineSeen struct {
	uid        types.UID
	generation int64
}

// fanOutEvents gathers the child updates a Baseline edit makes across its classes into
// one event on the Baseline, in place of an Applied or Drift event on every class: a
// Baseline edit that reached 500 classes sent 500 events, a third of the fan-out's
// requests. Each class's status.driftNotice still names its children that drift.
type fanOutEvents struct {
	mu      sync.Mutex
	pending map[types.UID]*fanOut
}

// fanOut is one Baseline generation's updates so far.
type fanOut struct {
	baseline *v1alpha1.Baseline
	classes  map[string]bool
	// fields are "KIND PATH" of every changed or removed field.
	fields              map[string]bool
	willDrift, mayDrift map[string]bool
	timer               *time.Timer
}

// add records that the edit of baseline updated a child of class, and (re)starts the
// quiet period after which the event is sent. An update of an older generation's fan-out
// still waiting sends that one first.
func (f *fanOutEvents) add(rec events.EventRecorder, baseline *v1alpha1.Baseline, class string, s plan.Step) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		f.pending = map[types.UID]*fanOut{}
	}
	fo := f.pending[baseline.UID]
	if fo != nil && fo.baseline.Generation != baseline.Generation {
		if fo.timer.Stop() {
			go fo.send(rec)
		}
		fo = nil
	}
	if fo == nil {
		fo = &fanOut{baseline: baseline, classes: map[string]bool{}, fields: map[string]bool{},
			willDrift: map[string]bool{}, mayDrift: map[string]bool{}}
		f.pending[baseline.UID] = fo
		fo.timer = time.AfterFunc(fanOutQuiet, func() {
			f.mu.Lock()
			if f.pending[baseline.UID] == fo {
				delete(f.pending, baseline.UID)
			}
			f.mu.Unlock()
			fo.send(rec)
		})
	} else {
		fo.timer.Reset(fanOutQuiet)
	}
	fo.classes[class] = true
	for _, c := range s.Changes {
		fo.fields[s.Kind+" "+c.Path] = true
	}
	for _, c := range s.Removed {
		fo.fields[s.Kind+" -"+c.Path] = true
	}
	switch s.Drift {
	case diff.WillDrift:
		fo.willDrift[class] = true
	case diff.MayDrift:
		fo.mayDrift[class] = true
	}
}

// send records the fan-out's one event on the Baseline: Drift when nodes of any class
// drift, Applied otherwise.
func (fo *fanOut) send(rec events.EventRecorder) {
	if rec == nil {
		return
	}
	reason, note := fo.note()
	rec.Eventf(fo.baseline, nil, "Normal", reason, "Apply", "%s", note)
}

func (fo *fanOut) note() (reason, note string) {
	note = fmt.Sprintf("generation %d updated the children of %d classes (%s): %s", fo.baseline.Generation,
		len(fo.classes), firstOf(slices.Sorted(maps.Keys(fo.classes)), "more"), firstOf(slices.Sorted(maps.Keys(fo.fields)), "more fields"))
	reason = "Applied"
	if n := len(fo.willDrift); n > 0 {
		reason = "Drift"
		note += fmt.Sprintf("; Karpenter will replace the nodes of %d of them", n)
	}
	if n := len(fo.mayDrift); n > 0 {
		reason = "Drift"
		note += fmt.Sprintf("; the nodes of %d of them drift if their selectors now resolve differently", n)
	}
	if reason == "Drift" {
		note += " (each class's status.driftNotice names its children)"
	}
	if len(note) > noteLimit {
		note = note[:noteLimit-3] + "..."
	}
	return reason, note
}

// noteLimit is the longest note the API server accepts on an events.k8s.io Event.
const noteLimit = 1024

// firstOf lists the first fanOutNames of names and how many more there are.
func firstOf(names []string, more string) string {
	if len(names) <= fanOutNames {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d %s", strings.Join(names[:fanOutNames], ", "), len(names)-fanOutNames, more)
}
