package headroom_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/headroom"
)

func win(start, dur, tz string) v1alpha1.HeadroomWindow {
	d, err := time.ParseDuration(dur)
	if err != nil {
		panic(err)
	}
	return v1alpha1.HeadroomWindow{Start: start, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestScheduleAt(t *testing.T) {
	office := win("0 8 * * 1-5", "10h", "Europe/Paris") // 08:00-18:00 Paris, weekdays
	for _, tc := range []struct {
		name    string
		windows []v1alpha1.HeadroomWindow
		now     string
		open    bool
		next    string // RFC 3339, "" for none
	}{
		{"no schedule is always open", nil, "2026-12-02T03:00:00Z", true, ""},
		// 2026-12-02 is a Wednesday; Paris is UTC+1 in winter.
		{"inside office hours", []v1alpha1.HeadroomWindow{office}, "2026-12-02T10:00:00Z", true, "2026-12-02T17:00:00Z"},
		{"before office hours", []v1alpha1.HeadroomWindow{office}, "2026-12-02T06:59:00Z", false, "2026-12-02T07:00:00Z"},
		{"at the opening instant", []v1alpha1.HeadroomWindow{office}, "2026-12-02T07:00:00Z", true, "2026-12-02T17:00:00Z"},
		{"at the closing instant", []v1alpha1.HeadroomWindow{office}, "2026-12-02T17:00:00Z", false, "2026-12-03T07:00:00Z"},
		{"Friday evening waits for Monday", []v1alpha1.HeadroomWindow{office}, "2026-12-04T18:00:00Z", false, "2026-12-07T07:00:00Z"},
		// Summer: Paris is UTC+2.
		{"summer time shifts the opening in UTC", []v1alpha1.HeadroomWindow{office}, "2026-07-01T06:30:00Z", true, "2026-07-01T16:00:00Z"},
		// 2026-03-29 02:00 Paris does not exist (clocks go to 03:00): a 02:30 start does not
		// fire that day.
		{"a start in the skipped DST hour does not fire", []v1alpha1.HeadroomWindow{win("30 2 * * *", "1h", "Europe/Paris")}, "2026-03-29T00:45:00Z", false, "2026-03-30T00:30:00Z"},
		{"overlapping windows close at the union's end", []v1alpha1.HeadroomWindow{
			win("0 8 * * *", "4h", "UTC"), win("0 11 * * *", "4h", "UTC")}, "2026-12-02T09:00:00Z", true, "2026-12-02T15:00:00Z"},
		{"adjacent windows join", []v1alpha1.HeadroomWindow{
			win("0 8 * * *", "2h", "UTC"), win("0 10 * * *", "2h", "UTC")}, "2026-12-02T09:00:00Z", true, "2026-12-02T12:00:00Z"},
		{"the earliest of closed windows opens next", []v1alpha1.HeadroomWindow{
			win("0 22 * * *", "1h", "UTC"), win("0 20 * * *", "1h", "UTC")}, "2026-12-02T12:00:00Z", false, "2026-12-02T20:00:00Z"},
		{"Feb 29 only", []v1alpha1.HeadroomWindow{win("0 0 29 2 *", "24h", "UTC")}, "2026-12-02T00:00:00Z", false, "2028-02-29T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.now)
			s, err := headroom.ParseSchedule(tc.windows, now)
			if err != nil {
				t.Fatal(err)
			}
			st := s.At(now)
			if st.Open != tc.open {
				t.Errorf("open = %v, want %v", st.Open, tc.open)
			}
			want := time.Time{}
			if tc.next != "" {
				want = at(tc.next)
			}
			if !st.Next.Equal(want) {
				t.Errorf("next = %s, want %s", st.Next.UTC(), want.UTC())
			}
		})
	}
}

func TestScheduleAlwaysOverlappingIsBounded(t *testing.T) {
	now := at("2026-12-02T00:00:30Z")
	s, err := headroom.ParseSchedule([]v1alpha1.HeadroomWindow{win("* * * * *", "1m", "")}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := s.At(now)
	if !st.Open || !st.Bounded || !strings.HasPrefix(st.Describe(), "open past ") {
		t.Errorf("every minute for a minute never closes: %+v %q", st, st.Describe())
	}
}

func TestParseScheduleNamesTheField(t *testing.T) {
	now := at("2026-12-02T00:00:00Z")
	for _, tc := range []struct {
		w    v1alpha1.HeadroomWindow
		want string
	}{
		{win("0 9 * *", "1h", ""), "spec.headroom.schedule[1].start"},
		{win("0 25 * * *", "1h", ""), "spec.headroom.schedule[1].start"},
		{win("0 9 31 2 *", "1h", ""), `spec.headroom.schedule[1].start: "0 9 31 2 *" never opens`},
		{win("0 9 * * *", "1h", "Mars/Olympus"), `spec.headroom.schedule[1].timeZone: "Mars/Olympus" is not an IANA time zone`},
		{win("0 9 * * *", "200h", ""), "spec.headroom.schedule[1].duration"},
	} {
		_, err := headroom.ParseSchedule([]v1alpha1.HeadroomWindow{win("0 8 * * *", "1h", ""), tc.w}, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.w, err, tc.want)
		}
	}
}

func TestOpensWithin(t *testing.T) {
	now := at("2026-12-02T00:00:00Z")
	leap, _ := headroom.ParseSchedule([]v1alpha1.HeadroomWindow{win("0 0 29 2 *", "1h", "")}, now)
	daily, _ := headroom.ParseSchedule([]v1alpha1.HeadroomWindow{win("0 9 * * *", "1h", "")}, now)
	if leap.OpensWithin(now, 8*24*time.Hour) {
		t.Error("a Feb 29 window opens within 8 days of December")
	}
	if !daily.OpensWithin(now, 8*24*time.Hour) {
		t.Error("a daily window does not open within 8 days")
	}
}

func cpu(n string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
}

// TestSizeHysteresis walks the design's example: 20 %, a 1-CPU unit.
func TestSizeHysteresis(t *testing.T) {
	t0 := at("2026-12-02T10:00:00Z")
	in := headroom.Input{Percentage: 20, Shape: cpu("1"), Open: true, Now: t0}
	step := func(usage string, after time.Duration) headroom.Result {
		in.Usage, in.Now = cpu(usage), t0.Add(after)
		r := headroom.Size(in)
		in.Previous, in.PendingSince = r.Desired, r.PendingSince
		return r
	}
	for _, s := range []struct {
		usage   string
		after   time.Duration
		want    int32
		pending bool
	}{
		{"47", 0, 10, false},                // 9.4 -> 10
		{"42", time.Minute, 10, false},      // ceil(8.4/0.8) = 11: held
		{"38", 2 * time.Minute, 10, false},  // ceil(7.6/0.8) = 10: held
		{"36", 3 * time.Minute, 10, true},   // ceil(7.2/0.8) = 9 < 10: pending
		{"36", 12 * time.Minute, 10, true},  // 9 minutes pending
		{"36", 13 * time.Minute, 8, false},  // 10 minutes: ceil(7.2) = 8
		{"48", 14 * time.Minute, 10, false}, // grows at once: ceil(9.6) = 10
		{"52", 15 * time.Minute, 11, false}, // ceil(10.4) = 11
		{"36", 16 * time.Minute, 11, true},  // pending again
		{"50", 17 * time.Minute, 11, false}, // x = 10, ceil(12.5) >= 11: held, timer reset
	} {
		r := step(s.usage, s.after)
		if r.Desired != s.want || (r.PendingSince != nil) != s.pending {
			t.Fatalf("at %s CPU after %s: desired %d pending %v, want %d pending %v", s.usage, s.after, r.Desired, r.PendingSince != nil, s.want, s.pending)
		}
	}
}

func TestSize(t *testing.T) {
	unit := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	for _, tc := range []struct {
		name   string
		in     headroom.Input
		want   int32
		reason string
	}{
		{"replicas alone", headroom.Input{Replicas: 2, Open: true}, 2, ""},
		{"closed window is zero", headroom.Input{Replicas: 2}, 0, v1alpha1.HeadroomReasonClosed},
		{"percentage of an idle class is zero, not one", headroom.Input{Percentage: 50, Open: true}, 0, ""},
		{"max of replicas and percentage", headroom.Input{Replicas: 2, Percentage: 10, Usage: cpu("50"), Open: true}, 5, ""},
		{"the larger resource ratio counts", headroom.Input{Percentage: 100, Open: true,
			Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("10Gi")}}, 5, ""},
		{"limits cap like Karpenter's helpers", headroom.Input{Replicas: 10, Limits: cpu("3500m"), Open: true}, 3, v1alpha1.HeadroomReasonCappedByLimits},
		{"limits naming another resource do not cap", headroom.Input{Replicas: 10, Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, Open: true}, 10, ""},
		{"class room caps", headroom.Input{Replicas: 10, Limits: cpu("8"), ClassRoom: cpu("4"), Open: true}, 4, v1alpha1.HeadroomReasonCappedByClassLimits},
		{"a full class holds none", headroom.Input{Replicas: 10, ClassRoom: cpu("0"), Open: true}, 0, v1alpha1.HeadroomReasonCappedByClassLimits},
		{"a spec change shrinks at once", headroom.Input{Replicas: 1, Percentage: 10, Usage: cpu("5"), Previous: 7, Fresh: true, Open: true}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Shape = unit
			r := headroom.Size(tc.in)
			if r.Desired != tc.want || r.Reason != tc.reason {
				t.Errorf("got %d %q, want %d %q", r.Desired, r.Reason, tc.want, tc.reason)
			}
		})
	}
}

func TestTypicalPod(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	pick := func(names ...string) []*catalog.InstanceType {
		var out []*catalog.InstanceType
		for _, n := range names {
			ty, ok := cat.Types[n]
			if !ok {
				t.Fatalf("catalog has no %s", n)
			}
			out = append(out, ty)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		types     []string
		gpu       bool
		from      string
		cpu, mem  string
		gpus      int64
		unitsFrom float64
	}{
		// m7g.large: 2 vCPU, 8 GiB. Allocatable 1930m and 8192-1465-100 = 6627 MiB;
		// half is 965m -> 950m and 3313.5 MiB -> 3264Mi.
		{"General's smallest type", []string{"m7g.xlarge", "m7g.large", "c7g.2xlarge"}, false, "m7g.large", "950m", "3264Mi", 0, 2},
		// g5.xlarge: 4 vCPU, 16 GiB, 1 GPU: allocatable 3920m, 16384-1465-100 = 14819 MiB.
		{"GPU: one GPU and half its share", []string{"g5.2xlarge", "g5.xlarge", "m7g.large"}, true, "g5.xlarge", "1950m", "7360Mi", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			types := pick(tc.types...)
			shape, from, ok := headroom.TypicalPod(types, tc.gpu)
			if !ok || from != tc.from {
				t.Fatalf("from %q ok %v, want %q", from, ok, tc.from)
			}
			if c := shape[corev1.ResourceCPU]; c.Cmp(resource.MustParse(tc.cpu)) != 0 {
				t.Errorf("cpu %s, want %s", c.String(), tc.cpu)
			}
			if m := shape[corev1.ResourceMemory]; m.Cmp(resource.MustParse(tc.mem)) != 0 {
				t.Errorf("memory %s, want %s", m.String(), tc.mem)
			}
			if g := shape[headroom.ResourceGPU]; g.Value() != tc.gpus {
				t.Errorf("gpu %s, want %d", g.String(), tc.gpus)
			}
			if u := headroom.UnitsOf(cat.Types[tc.from], shape); u != tc.unitsFrom {
				t.Errorf("%s holds %v units of its typical pod, want %v", tc.from, u, tc.unitsFrom)
			}
		})
	}
	if _, _, ok := headroom.TypicalPod(pick("m7g.large"), true); ok {
		t.Error("a GPU typical pod from a type without GPUs")
	}
}
