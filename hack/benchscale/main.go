// Command benchscale is what `make bench-scale` runs: on one control plane (kube-apiserver
// and etcd from hack/envtest.sh, with Poolsmith's and Karpenter's CRDs) and in one run, it
// measures the manager (bin/poolsmith, a separate process) against a bare client that
// creates and patches exactly the objects the manager writes, at the same QPS and
// concurrency, and prints six figures for each comparison (-modes): at the manager's
// default client QPS, where both sides wait on client-go's rate limiter, and unthrottled
// (QPS 1000, burst 2000, 8 workers on both sides), the physical limit. Each comparison
// starts a control plane of its own:
//
//	converge   N classes created -> every class Synced and every child present, vs the bare
//	           client creating the same children (the render, owner references included)
//	requests   per class during that converge, from the API server's apiserver_request_total,
//	           by verb and resource (the benchmark's own class creates subtracted)
//	fan-out    a Baseline tag edit -> the tag on every EC2NodeClass, vs patching each directly
//	no-op      writes while the manager restarts over the synced cluster
//	memory     the manager's peak RSS (VmHWM), with unrelated Nodes and Pods in the cluster,
//	           and its live heap after converge (once its queue is empty, after a forced
//	           collection)
//	CPU        the core-seconds the API server, etcd, the manager and this process used in
//	           each phase, and the API server's and etcd's share for the operator's
//	           requests against the bare client's (cpu.go); every phase starts once the
//	           control plane has settled
//
// It is a benchmark that prints figures, not a test: nothing here fails on a slow machine.
// Every class renders an AccessRule; every fourth restricts access.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/scheme"
	"github.com/poolsmith/poolsmith/internal/validate"
)

var (
	n           = flag.Int("n", 100, "WorkloadClasses")
	noise       = flag.Int("noise", 0, "unrelated Nodes and Pods (each) in the cluster while the manager runs; 0 means 10 per class")
	modes       = flag.String("modes", "default,unthrottled", "the comparisons to run, comma-separated: default (-qps, -burst, -concurrency) and unthrottled (QPS 1000, burst 2000, 8 workers)")
	qps         = flag.Float64("qps", 50, "the default comparison's client QPS, of both the manager (--kube-api-qps) and the bare client")
	burst       = flag.Int("burst", 100, "the default comparison's client burst, of both (--kube-api-burst)")
	concurrency = flag.Int("concurrency", 4, "the default comparison's --max-concurrent-reconciles of the manager and workers of the bare client")
	poolsmith   = flag.String("poolsmith", "bin/poolsmith", "the manager binary")
	managerEnv  = flag.String("manager-env", "GOGC=50 GOMEMLIMIT=256MiB", "environment for the manager, space-separated; the default is what the chart sets (gogc, and GOMEMLIMIT from the default memory limit)")
	baselineF   = flag.String("baseline", "config/samples/poolsmith_v1alpha1_baseline.yaml", "the Baseline")
	classF      = flag.String("class", "config/samples/poolsmith_v1alpha1_workloadclass_general.yaml", "the WorkloadClass every class copies; names get -0000...")
	heapProfile = flag.String("heap-profile", "", "write the manager's heap profile (after the fan-out) to this file; the comparison's name is appended")
	cpuProfile  = flag.String("cpu-profile", "", "write the manager's CPU profiles of the converge's and the fan-out's first 5 seconds to this file, with .<comparison>.converge and .<comparison>.fanout appended")
	apiProfile  = flag.String("apiserver-profile", "", "write the API server's CPU profiles of the operator's converge and fan-out (their first 5 seconds) to this file, with .<comparison>.converge and .<comparison>.fanout appended")
	timeout     = flag.Duration("timeout", 15*time.Minute, "bound for each phase")
)

var (
	gvrClass     = schema.GroupVersionResource{Group: "poolsmith.dev", Version: "v1alpha1", Resource: "workloadclasses"}
	gvrNodeClass = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

func main() {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; the figures are the output
	if *noise == 0 {
		*noise = 10 * *n
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// mode is one comparison: the client QPS, burst and workers of both sides.
type mode struct {
	name, label string
	qps         float64
	burst       int
	concurrency int
}

func (m mode) String() string {
	return fmt.Sprintf("%s (QPS %g, burst %d, %d workers)", m.label, m.qps, m.burst, m.concurrency)
}

func selectedModes() ([]mode, error) {
	var out []mode
	for _, name := range strings.Split(*modes, ",") {
		switch strings.TrimSpace(name) {
		case "default":
			out = append(out, mode{name: "default", label: "default QPS", qps: *qps, burst: *burst, concurrency: *concurrency})
		case "unthrottled":
			out = append(out, mode{name: "unthrottled", label: "unthrottled", qps: 1000, burst: 2000, concurrency: 8})
		default:
			return nil, fmt.Errorf("-modes: unknown comparison %q (default, unthrottled)", name)
		}
	}
	return out, nil
}

// figures are one comparison's measurements.
type figures struct {
	mode                                mode
	bareConverge, bareFanout            time.Duration
	opConverge, opFanout                time.Duration
	convergeLoad, fanoutLoad            string
	bareReqs, opReqs, fanReqs, restart  counts
	peak, restartPeak, anon, file, heap int64
	children, nodeClasses, classes      int
	// The CPU each process used during the phase (cpu.go).
	bareConvergeCPU, bareFanoutCPU, opConvergeCPU, opFanoutCPU cpuUse
}

func run(ctx context.Context) error {
	ms, err := selectedModes()
	if err != nil {
		return err
	}
	baseline, classes, err := inputs()
	if err != nil {
		return err
	}
	children, perKind, err := renderChildren(baseline, classes)
	if err != nil {
		return err
	}
	fmt.Printf("%d classes render to %d children (%s); %d unrelated Nodes and Pods; load %s\n",
		len(classes), len(children), perKind, *noise, load())
	var all []*figures
	for _, m := range ms {
		fmt.Printf("\n== %s\n", m)
		f, err := measure(ctx, m, baseline, classes, children)
		if err != nil {
			return fmt.Errorf("%s: %w", m.label, err)
		}
		f.print()
		all = append(all, f)
	}
	if len(all) > 1 {
		summary(all)
	}
	return nil
}

// measure runs one comparison on a control plane of its own.
func measure(ctx context.Context, md mode, baseline *unstructured.Unstructured, classes, children []*unstructured.Unstructured) (*figures, error) {
	f := &figures{mode: md, children: len(children), classes: len(classes)}
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	admin := rest.CopyConfig(env.Config)
	admin.QPS, admin.Burst = 5000, 10000
	c, err := client.New(admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	cs := kubernetes.NewForConfigOrDie(admin)

	// The bare client: the same children, the same QPS and concurrency.
	bareCfg := rest.CopyConfig(env.Config)
	bareCfg.QPS, bareCfg.Burst = float32(md.qps), md.burst
	bare, err := client.New(bareCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	m0, err := requests(ctx, cs)
	if err != nil {
		return nil, err
	}
	settle(ctx, 0)
	c0, t0 := cpuNow(0), time.Now()
	if err := parallel(children, md.concurrency, func(u *unstructured.Unstructured) error { return bare.Create(ctx, u.DeepCopy()) }); err != nil {
		return nil, fmt.Errorf("bare create: %w", err)
	}
	f.bareConverge, f.bareConvergeCPU = time.Since(t0), cpuNow(0).since(c0)
	m1, _ := requests(ctx, cs)
	f.bareReqs = m1.sub(m0)
	var nodeClasses []*unstructured.Unstructured
	for _, u := range children {
		if u.GetKind() == plan.KindNodeClass {
			nodeClasses = append(nodeClasses, u)
		}
	}
	f.nodeClasses = len(nodeClasses)
	settle(ctx, 0)
	c0, t0 = cpuNow(0), time.Now()
	if err := parallel(nodeClasses, md.concurrency, func(u *unstructured.Unstructured) error {
		return bare.Patch(ctx, u.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tags":{"bench-probe":"bare"}}}`)))
	}); err != nil {
		return nil, fmt.Errorf("bare patch: %w", err)
	}
	f.bareFanout, f.bareFanoutCPU = time.Since(t0), cpuNow(0).since(c0)
	if err := parallel(children, 16, func(u *unstructured.Unstructured) error { return client.IgnoreNotFound(c.Delete(ctx, u.DeepCopy())) }); err != nil {
		return nil, fmt.Errorf("deleting the bare client's objects: %w", err)
	}
	fmt.Printf("bare client: converge %s, fan-out %s; load %s\n", f.bareConverge.Round(time.Millisecond), f.bareFanout.Round(time.Millisecond), load())

	if err := noiseObjects(ctx, cs); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, baseline.DeepCopy()); err != nil {
		return nil, fmt.Errorf("creating the Baseline: %w", err)
	}
	watch, err := startWatch(ctx, admin)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return nil, err
	}
	defer os.Remove(kubeconfig)

	// The operator: converge.
	mgr, err := startManager(ctx, kubeconfig, md)
	if err != nil {
		return nil, err
	}
	defer mgr.stop()
	var profiled sync.WaitGroup
	cpu := func(phase string) {
		if *cpuProfile == "" && *apiProfile == "" {
			return
		}
		if *cpuProfile != "" {
			profiled.Go(func() {
				if err := mgr.profile("profile?seconds=5", *cpuProfile+"."+md.name+"."+phase); err != nil {
					fmt.Fprintln(os.Stderr, "bench-scale: CPU profile:", err)
				}
			})
		}
		if *apiProfile != "" {
			profiled.Go(func() {
				raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "5").DoRaw(ctx)
				if err == nil {
					err = os.WriteFile(*apiProfile+"."+md.name+"."+phase, raw, 0o644)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench-scale: API server CPU profile:", err)
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
	}
	settle(ctx, mgr.pid())
	cpu("converge")
	m0, _ = requests(ctx, cs)
	c0, t0 = cpuNow(mgr.pid()), time.Now()
	if err := parallel(classes, 16, func(u *unstructured.Unstructured) error { return c.Create(ctx, u.DeepCopy()) }); err != nil {
		return nil, fmt.Errorf("creating the classes: %w", err)
	}
	if err := poll(ctx, "every class Synced with its children", func() (bool, string) {
		s, nc := watch.synced()
		return s == len(classes) && nc >= len(classes), fmt.Sprintf("%d of %d Synced, %d EC2NodeClasses", s, len(classes), nc)
	}); err != nil {
		return nil, fmt.Errorf("%w; manager log: %s", err, mgr.tail())
	}
	f.opConverge, f.opConvergeCPU = time.Since(t0), cpuNow(mgr.pid()).since(c0)
	f.convergeLoad = load()
	time.Sleep(3 * time.Second) // trailing writes (status, events) count too
	m1, _ = requests(ctx, cs)
	f.opReqs = m1.sub(m0)
	f.opReqs.add("POST workloadclasses", -float64(len(classes))) // the benchmark's own creates
	// The live heap once the manager is idle: passes still in flight hold garbage-to-be.
	if err := poll(ctx, "the manager idle after converge", func() (bool, string) {
		_, depth := mgr.reconciled()
		return depth == 0, fmt.Sprintf("queue %.0f", depth)
	}); err != nil {
		return nil, err
	}
	if f.heap, err = mgr.liveHeap(); err != nil {
		return nil, err
	}

	// Fan-out.
	profiled.Wait()
	settle(ctx, mgr.pid())
	cpu("fanout")
	m0, _ = requests(ctx, cs)
	c0, t0 = cpuNow(mgr.pid()), time.Now()
	probe := []byte(`{"spec":{"nodeClass":{"tags":{"bench-probe":"fanout"}}}}`)
	if err := c.Patch(ctx, baseline.DeepCopy(), client.RawPatch(types.MergePatchType, probe)); err != nil {
		return nil, fmt.Errorf("editing the Baseline: %w", err)
	}
	if err := poll(ctx, "the Baseline's tag on every EC2NodeClass", func() (bool, string) {
		k := watch.tagged("bench-probe", "fanout")
		return k >= len(classes), fmt.Sprintf("%d of %d", k, len(classes))
	}); err != nil {
		return nil, err
	}
	f.opFanout, f.opFanoutCPU = time.Since(t0), cpuNow(mgr.pid()).since(c0)
	f.fanoutLoad = load()
	time.Sleep(3 * time.Second)
	m1, _ = requests(ctx, cs)
	f.fanReqs = m1.sub(m0)
	f.fanReqs.add("PATCH baselines", -1)
	profiled.Wait()
	if *heapProfile != "" {
		if err := mgr.heapProfile(*heapProfile + "." + md.name); err != nil {
			return nil, err
		}
	}
	f.peak = mgr.peakRSS()
	f.anon, f.file = mgr.rss()
	mgr.stop()

	// A no-op restart over the synced cluster.
	m0, _ = requests(ctx, cs)
	mgr, err = startManager(ctx, kubeconfig, md)
	if err != nil {
		return nil, err
	}
	defer mgr.stop()
	if err := poll(ctx, "the restarted manager reconciling every class", func() (bool, string) {
		done, depth := mgr.reconciled()
		return done >= float64(len(classes)) && depth == 0, fmt.Sprintf("%.0f reconciles, queue %.0f", done, depth)
	}); err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second)
	m1, _ = requests(ctx, cs)
	f.restart = m1.sub(m0)
	f.restartPeak = mgr.peakRSS()
	mgr.stop()
	return f, nil
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

// print is one comparison's table.
func (f *figures) print() {
	n := float64(f.classes)
	perClass := float64(f.children) / n
	fmt.Printf("\n%-44s %12s %12s %7s   %s\n", "measure ("+f.mode.label+")", "operator", "bare client", "ratio", "goal")
	fmt.Printf("%-44s %12s %12s %7.2f   <= 1.3x (load %s)\n", fmt.Sprintf("converge %d classes", f.classes),
		f.opConverge.Round(time.Millisecond), f.bareConverge.Round(time.Millisecond), ratio(f.opConverge, f.bareConverge), f.convergeLoad)
	// Three decimals: one Baseline status write among 200 classes is 0.005 a class.
	fmt.Printf("%-44s %12.3f %12.3f %7.2f   <= children + 2 = %.1f\n", "API requests per class, converge",
		f.opReqs.total(false)/n, f.bareReqs.total(false)/n, f.opReqs.total(false)/f.bareReqs.total(false), perClass+2)
	fmt.Printf("%-44s %12.2f\n", "  of them events (events.k8s.io)", f.opReqs.get("POST events")/n+f.opReqs.get("PATCH events")/n)
	for _, k := range f.opReqs.keys() {
		fmt.Printf("    %-40s %12.3f\n", k, f.opReqs[k]/n)
	}
	fmt.Printf("%-44s %12s %12s %7.2f   <= 2x (load %s)\n", fmt.Sprintf("Baseline fan-out to %d EC2NodeClasses", f.nodeClasses),
		f.opFanout.Round(time.Millisecond), f.bareFanout.Round(time.Millisecond), ratio(f.opFanout, f.bareFanout), f.fanoutLoad)
	fmt.Printf("%-44s %12.3f %12.3f\n", "API requests per class, fan-out", f.fanReqs.total(false)/n, 1.0)
	for _, k := range f.fanReqs.keys() {
		fmt.Printf("    %-40s %12.3f\n", k, f.fanReqs[k]/n)
	}
	fmt.Printf("%-44s %12.0f %25s   0\n", "writes during a no-op restart", f.restart.total(true), "")
	fmt.Printf("%-44s %12.0f\n", "  requests (reads included)", f.restart.total(false))
	fmt.Printf("%-44s %8.1f MiB %25s   (%d unrelated Nodes and Pods; restart: %.1f MiB)\n", "manager peak RSS",
		float64(f.peak)/1024, "", *noise, float64(f.restartPeak)/1024)
	fmt.Printf("%-44s %8.1f MiB\n", "  live heap after converge", float64(f.heap)/(1<<20))
	fmt.Printf("%-44s %8.1f MiB anonymous, %.1f MiB file-backed (the binary)\n", "  RSS after the fan-out", float64(f.anon)/1024, float64(f.file)/1024)
	f.printCPU()
}

// summary puts the comparisons side by side, each labelled.
func summary(all []*figures) {
	fmt.Printf("\n%-36s", "summary")
	for _, f := range all {
		fmt.Printf(" %24s", f.mode.label)
	}
	fmt.Println()
	row := func(name string, cell func(f *figures) string) {
		fmt.Printf("%-36s", name)
		for _, f := range all {
			fmt.Printf(" %24s", cell(f))
		}
		fmt.Println()
	}
	row("QPS / burst / workers", func(f *figures) string {
		return fmt.Sprintf("%g / %d / %d", f.mode.qps, f.mode.burst, f.mode.concurrency)
	})
	row("converge ratio (<= 1.3x)", func(f *figures) string {
		return fmt.Sprintf("%.2fx [%s]", ratio(f.opConverge, f.bareConverge), strings.Fields(f.convergeLoad)[0])
	})
	row("Baseline fan-out ratio (<= 2x)", func(f *figures) string {
		return fmt.Sprintf("%.2fx [%s]", ratio(f.opFanout, f.bareFanout), strings.Fields(f.fanoutLoad)[0])
	})
	row("API server+etcd CPU ratio, converge", func(f *figures) string {
		converge, _ := f.serverRatios()
		return fmt.Sprintf("%.2fx", converge)
	})
	row("API server+etcd CPU ratio, fan-out", func(f *figures) string {
		_, fanout := f.serverRatios()
		return fmt.Sprintf("%.2fx", fanout)
	})
	row("requests per class (<= children+2)", func(f *figures) string {
		return fmt.Sprintf("%.3f (<= %.1f)", f.opReqs.total(false)/float64(f.classes), float64(f.children)/float64(f.classes)+2)
	})
	row("peak RSS", func(f *figures) string { return fmt.Sprintf("%.1f MiB", float64(f.peak)/1024) })
	row("live heap after converge", func(f *figures) string { return fmt.Sprintf("%.1f MiB", float64(f.heap)/(1<<20)) })
}

// inputs are the Baseline and the classes: copies of the sample, every fourth restricted
// to one namespace (with the taint of its own an access rule needs).
func inputs() (*unstructured.Unstructured, []*unstructured.Unstructured, error) {
	bl, err := readObject(*baselineF)
	if err != nil {
		return nil, nil, err
	}
	tpl, err := readObject(*classF)
	if err != nil {
		return nil, nil, err
	}
	classes := make([]*unstructured.Unstructured, *n)
	for i := range classes {
		u := tpl.DeepCopy()
		u.SetName(fmt.Sprintf("%s-%04d", tpl.GetName(), i))
		if i%4 == 3 {
			if err := unstructured.SetNestedStringSlice(u.Object, []string{fmt.Sprintf("team-%d", i)}, "spec", "access", "namespaces"); err != nil {
				return nil, nil, err
			}
			taint := map[string]any{"key": "example.com/dedicated", "value": u.GetName(), "effect": "NoSchedule"}
			if err := unstructured.SetNestedSlice(u.Object, []any{taint}, "spec", "taints"); err != nil {
				return nil, nil, err
			}
		}
		classes[i] = u
	}
	return bl, classes, nil
}

// renderChildren plans every class over an empty cluster: the creates are the objects the
// manager writes, owner references included.
func renderChildren(bl *unstructured.Unstructured, classes []*unstructured.Unstructured) ([]*unstructured.Unstructured, string, error) {
	baseline := &v1alpha1.Baseline{}
	if err := convert(bl, baseline); err != nil {
		return nil, "", err
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, "", err
	}
	crds, err := validate.Default()
	if err != nil {
		return nil, "", err
	}
	var out []*unstructured.Unstructured
	kinds := map[string]int{}
	for _, u := range classes {
		wc := &v1alpha1.WorkloadClass{}
		if err := convert(u, wc); err != nil {
			return nil, "", err
		}
		wc.UID = uuid.NewUUID()
		res, err := render.Render(baseline, wc, render.Options{Catalog: cat})
		if err != nil {
			return nil, "", fmt.Errorf("rendering %s: %w", wc.Name, err)
		}
		p, err := plan.Compute(plan.Input{Class: wc, Result: res, Live: plan.Children{}, Unverified: true}, crds)
		if err != nil {
			return nil, "", err
		}
		for _, s := range p.Writes() {
			out = append(out, &unstructured.Unstructured{Object: s.Object})
			kinds[s.Kind]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	return out, strings.Join(parts, ", "), nil
}

func convert(u *unstructured.Unstructured, into any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}

func readObject(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// noiseObjects are Nodes and Pods the manager must neither cache nor read.
func noiseObjects(ctx context.Context, cs *kubernetes.Clientset) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "noise"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	idx := make([]int, *noise)
	for i := range idx {
		idx[i] = i
	}
	return parallel(idx, 16, func(i int) error {
		name := fmt.Sprintf("noise-%05d", i)
		labels := map[string]string{"karpenter.sh/nodepool": "other", "team": "noise"}
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().Pods("noise").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		return err
	})
}

func parallel[T any](items []T, workers int, f func(T) error) error {
	ch := make(chan T)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range ch {
				if err := f(it); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return errors.Join(errs...)
}

func poll(ctx context.Context, what string, done func() (bool, string)) error {
	deadline := time.Now().Add(*timeout)
	state := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, state = done(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: not done in %s (%s)", what, *timeout, state)
}

func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// watch follows classes and EC2NodeClasses through informers, so waiting sends the API
// server no requests that would count against the manager.
type watch struct {
	classes, nodeClasses toolscache.Store
}

func startWatch(ctx context.Context, cfg *rest.Config) (*watch, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	wc, nc := f.ForResource(gvrClass).Informer(), f.ForResource(gvrNodeClass).Informer()
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), wc.HasSynced, nc.HasSynced) {
		return nil, fmt.Errorf("informers did not sync")
	}
	return &watch{classes: wc.GetStore(), nodeClasses: nc.GetStore()}, nil
}

// synced counts the classes Synced=True at their generation, and the EC2NodeClasses.
func (w *watch) synced() (int, int) {
	k := 0
	for _, o := range w.classes.List() {
		u := o.(*unstructured.Unstructured)
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == v1alpha1.ConditionSynced && m["status"] == string(metav1.ConditionTrue) && m["observedGeneration"] == u.GetGeneration() {
				k++
			}
		}
	}
	return k, len(w.nodeClasses.List())
}

func (w *watch) tagged(key, value string) int {
	k := 0
	for _, o := range w.nodeClasses.List() {
		if v, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "spec", "tags", key); v == value {
			k++
		}
	}
	return k
}

// counts are API requests by "VERB resource[/subresource]".
type counts map[string]float64

// manageable are the resources the manager reads or writes: the API server's own
// housekeeping (leases, endpoints) stays out of the figures.
var manageable = map[string]bool{
	"workloadclasses": true, "baselines": true, "nodepools": true, "ec2nodeclasses": true, "nodeoverlays": true,
	"accessrules": true,
	"events":      true, "configmaps": true, "namespaces": true, "nodes": true, "pods": true, "nodeclaims": true,
}

var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// requests reads the API server's request counters.
func requests(ctx context.Context, cs *kubernetes.Clientset) (counts, error) {
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := counts{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		g := requestLine.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		l := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(g[1], -1) {
			l[p[1]] = p[2]
		}
		if !manageable[l["resource"]] || l["verb"] == "WATCH" || l["verb"] == "CONNECT" {
			continue
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v, _ := strconv.ParseFloat(g[2], 64)
		out[key] += v
	}
	return out, sc.Err()
}

func (c counts) sub(before counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (c counts) add(k string, v float64) {
	c[k] += v
	if c[k] == 0 {
		delete(c, k)
	}
}

func (c counts) get(k string) float64 { return c[k] }

func (c counts) keys() []string { return slices.Sorted(maps.Keys(c)) }

func (c counts) total(writesOnly bool) float64 {
	t := 0.0
	for k, v := range c {
		verb, _, _ := strings.Cut(k, " ")
		if writesOnly && !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}, verb) {
			continue
		}
		t += v
	}
	return t
}

// manager is the poolsmith manager process.
type manager struct {
	cmd            *exec.Cmd
	metrics, pprof string
	mu             sync.Mutex
	log            bytes.Buffer
	done           chan struct{}
	stopped        sync.Once
	peak           int64
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startManager(ctx context.Context, kubeconfig string, md mode) (*manager, error) {
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	probes, err := freePort()
	if err != nil {
		return nil, err
	}
	pprof, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &manager{metrics: metrics, pprof: pprof, done: make(chan struct{})}
	m.cmd = exec.Command(*poolsmith, "manager", "--kubeconfig="+kubeconfig, "--leader-elect=false",
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+probes, "--pprof-bind-address="+pprof,
		fmt.Sprintf("--kube-api-qps=%g", md.qps), fmt.Sprintf("--kube-api-burst=%d", md.burst),
		fmt.Sprintf("--max-concurrent-reconciles=%d", md.concurrency), "--zap-log-level=error")
	m.cmd.Env = append(os.Environ(), strings.Fields(*managerEnv)...)
	m.cmd.Stdout, m.cmd.Stderr = m, m
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", *poolsmith, err)
	}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				m.mu.Lock()
				m.peak = max(m.peak, vmHWM(m.cmd.Process.Pid))
				m.mu.Unlock()
			}
		}
	}()
	err = poll(ctx, "the manager ready", func() (bool, string) {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("%w; log: %s", err, m.tail())
	}
	return m, nil
}

func (m *manager) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log.Write(p)
}

func (m *manager) tail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.log.String()
	return s[max(0, len(s)-2000):]
}

func (m *manager) pid() int { return m.cmd.Process.Pid }

func (m *manager) peakRSS() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.peak, vmHWM(m.cmd.Process.Pid))
}

func (m *manager) stop() {
	m.stopped.Do(func() {
		close(m.done)
		_ = m.cmd.Process.Signal(os.Interrupt)
		ch := make(chan error, 1)
		go func() { ch <- m.cmd.Wait() }()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			_ = m.cmd.Process.Kill()
			<-ch
		}
	})
}

// profile writes the manager's /debug/pprof/<which> to path.
func (m *manager) profile(which, path string) error {
	resp, err := http.Get("http://" + m.pprof + "/debug/pprof/" + which)
	if err != nil {
		return fmt.Errorf("%s: %w", which, err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func (m *manager) heapProfile(path string) error {
	if err := m.profile("heap?gc=1", path); err != nil {
		return err
	}
	// The text form ends with the runtime's MemStats: heap in use, released, stacks.
	text, err := http.Get("http://" + m.pprof + "/debug/pprof/heap?debug=1")
	if err != nil {
		return err
	}
	defer text.Body.Close()
	b, err := io.ReadAll(text.Body)
	if err != nil {
		return err
	}
	if i := bytes.Index(b, []byte("# runtime.MemStats")); i >= 0 {
		b = b[i:]
	}
	return os.WriteFile(path+".memstats", b, 0o644)
}

// liveHeap is the manager's heap in use after a forced collection, in bytes (the
// runtime's MemStats at the end of the heap profile's text form).
func (m *manager) liveHeap() (int64, error) {
	resp, err := http.Get("http://" + m.pprof + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, fmt.Errorf("reading the manager's heap: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the manager's heap profile")
}

var metricSample = regexp.MustCompile(`^(\w+)\{([^}]*)\} ([0-9.e+]+)$`)

// reconciled reads the manager's own metrics: WorkloadClass reconciles done, and the
// depth of its queue.
func (m *manager) reconciled() (float64, float64) {
	resp, err := http.Get("http://" + m.metrics + "/metrics")
	if err != nil {
		return 0, -1
	}
	defer resp.Body.Close()
	var done, depth float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		g := metricSample.FindStringSubmatch(sc.Text())
		if g == nil || !strings.Contains(g[2], `"workloadclass"`) {
			continue
		}
		v, _ := strconv.ParseFloat(g[3], 64)
		switch g[1] {
		case "controller_runtime_reconcile_total":
			done += v
		case "workqueue_depth":
			depth += v
		}
	}
	return done, depth
}

// rss is the manager's resident memory now, anonymous (heap, stacks) and file-backed, in KiB.
func (m *manager) rss() (int64, int64) {
	return status(m.cmd.Process.Pid, "RssAnon:"), status(m.cmd.Process.Pid, "RssFile:")
}

// vmHWM is a process's peak resident memory in KiB.
func vmHWM(pid int) int64 { return status(pid, "VmHWM:") }

func status(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

func writeKubeconfig(env *testenv.Env) (string, error) {
	u, err := env.ControlPlane.AddUser(envtest.User{Name: "poolsmith-bench", Groups: []string{"system:masters"}}, &rest.Config{})
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "bench-scale-kubeconfig")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(kc)
	return f.Name(), err
}
