package headroom

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// horizon is how far ahead a window must open to count as opening at all: past it the
// cron parser's own search ends (five years) and Feb 29 has come round at least once.
const horizon = 8 * 365 * 24 * time.Hour

// unionSearch bounds how far ahead the end of overlapping open windows is looked for: a
// schedule open longer than this is reported open until the bound, and looked at again then.
const unionSearch = 8 * 24 * time.Hour

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Window is one parsed spec.headroom.schedule entry: open from each start for duration.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
	zone     string
}

// Schedule is a parsed spec.headroom.schedule; empty means always open.
type Schedule []Window

// ParseSchedule parses and checks every window. Errors name the field as
// spec.headroom.schedule[i].<field>, the same text in the manager and the CLI.
func ParseSchedule(ws []v1alpha1.HeadroomWindow, now time.Time) (Schedule, error) {
	out := make(Schedule, 0, len(ws))
	for i, w := range ws {
		field := fmt.Sprintf("spec.headroom.schedule[%d]", i)
		zone := w.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("%s.timeZone: %q is not an IANA time zone", field, w.TimeZone)
		}
		sched, err := parser.Parse(w.Start)
		if err != nil {
			return nil, fmt.Errorf("%s.start: %q: %v", field, w.Start, err)
		}
		spec := sched.(*cron.SpecSchedule)
		spec.Location = loc
		if d := w.Duration.Duration; d < time.Minute || d > 168*time.Hour {
			return nil, fmt.Errorf("%s.duration: %s is not within 1m..168h", field, d)
		}
		if next := spec.Next(now); next.IsZero() || next.Sub(now) > horizon {
			return nil, fmt.Errorf("%s.start: %q never opens", field, w.Start)
		}
		out = append(out, Window{schedule: spec, duration: w.Duration.Duration, zone: zone})
	}
	return out, nil
}

// startedWithin is the start of w's latest opening that is still open at t, if any:
// a start s with t-duration < s <= t.
func (w Window) startedWithin(t time.Time) (time.Time, bool) {
	s := w.schedule.Next(t.Add(-w.duration))
	return s, !s.IsZero() && !s.After(t)
}

// State is the schedule's state at a moment.
type State struct {
	// Open: headroom is held.
	Open bool
	// Next is when Open next changes; zero when it never does (no schedule) or not within
	// the search bound (then Bounded is true and the caller looks again at Next).
	Next time.Time
	// Bounded: the schedule stays open past the search bound; Next is the bound.
	Bounded bool
	// Zone is the time zone of the window that decides Next, for messages.
	Zone string
}

// At is the schedule's state at now: open when some window started within its duration
// before now; Next is the end of the union of the open windows, or the earliest start.
func (s Schedule) At(now time.Time) State {
	if len(s) == 0 {
		return State{Open: true}
	}
	end, zone, open := time.Time{}, "", false
	for _, w := range s {
		if st, ok := w.startedWithin(now); ok {
			open = true
			if e := st.Add(w.duration); e.After(end) {
				end, zone = e, w.zone
			}
		}
	}
	if !open {
		var first time.Time
		for _, w := range s {
			if n := w.schedule.Next(now); !n.IsZero() && (first.IsZero() || n.Before(first)) {
				first, zone = n, w.zone
			}
		}
		return State{Next: first, Zone: zone}
	}
	// Extend the end while another window is open at that instant (overlapping or adjacent).
	for end.Sub(now) <= unionSearch {
		extended := false
		for _, w := range s {
			if st, ok := w.startedWithin(end); ok {
				if e := st.Add(w.duration); e.After(end) {
					end, zone, extended = e, w.zone, true
				}
			}
		}
		if !extended {
			return State{Open: true, Next: end, Zone: zone}
		}
	}
	return State{Open: true, Next: now.Add(unionSearch), Bounded: true, Zone: zone}
}

// OpensWithin reports whether some window opens within d after now (lint's
// headroom-schedule-closed check uses 8 days).
func (s Schedule) OpensWithin(now time.Time, d time.Duration) bool {
	if len(s) == 0 {
		return true
	}
	for _, w := range s {
		if _, ok := w.startedWithin(now); ok {
			return true
		}
		if n := w.schedule.Next(now); !n.IsZero() && n.Sub(now) <= d {
			return true
		}
	}
	return false
}

// Describe says the state in words for status.headroom.window, e.g.
// "open until 2026-12-02 18:00 Europe/Paris".
func (st State) Describe() string {
	switch {
	case st.Next.IsZero() && st.Open:
		return "always open"
	case st.Next.IsZero():
		return "never opens"
	}
	loc, err := time.LoadLocation(st.Zone)
	if err != nil {
		loc = time.UTC
	}
	at := st.Next.In(loc).Format("2006-01-02 15:04") + " " + st.Zone
	switch {
	case st.Bounded:
		return "open past " + at
	case st.Open:
		return "open until " + at
	}
	return "closed until " + at
}
