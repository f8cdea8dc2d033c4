package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The CPU each process of a phase used (user and system, from /proc/<pid>/stat), so a
// ratio can be read as what it is made of: the API server's and etcd's work for the
// requests sent, against the manager's own computation. On a machine whose cores are all
// busy during a phase, the manager's time cannot fall below what the API server and etcd
// need for its requests, whatever the manager computes.

// cpuRoles are the processes accounted, in print order.
var cpuRoles = []string{"kube-apiserver", "etcd", "manager", "bench"}

// cpuUse is the CPU time used by each role.
type cpuUse map[string]time.Duration

// userHZ is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go runs on.
const userHZ = 100

// procCPU is the user and system time process pid has used; 0 when it is gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: fields count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / userHZ
}

// cpuNow reads the CPU used so far by the control plane (the kube-apiserver and etcd this
// process started), the manager (pid, 0 when none runs) and this process (the bare client
// and the benchmark's watch).
func cpuNow(manager int) cpuUse {
	u := cpuUse{"bench": procCPU(os.Getpid())}
	if manager != 0 {
		u["manager"] = procCPU(manager)
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := strconv.Itoa(os.Getpid())
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		comm := s[open+1 : close]
		if f := strings.Fields(s[close+1:]); len(f) > 1 && f[1] == self && (comm == "kube-apiserver" || comm == "etcd") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			u[comm] += procCPU(pid)
		}
	}
	return u
}

// since is the CPU used between then and u.
func (u cpuUse) since(then cpuUse) cpuUse {
	out := cpuUse{}
	for k, v := range u {
		out[k] = v - then[k]
	}
	return out
}

func (u cpuUse) server() time.Duration { return u["kube-apiserver"] + u["etcd"] }

func (u cpuUse) total() time.Duration {
	var t time.Duration
	for _, v := range u {
		t += v
	}
	return t
}

// printCPU is the CPU table of one comparison: each phase's core-seconds by process,
// and what the API server and etcd alone needed for the operator's requests against the
// bare client's.
func (f *figures) printCPU() {
	fmt.Printf("\n%-44s", fmt.Sprintf("CPU, core-seconds (%d cores)", runtime.NumCPU()))
	for _, r := range cpuRoles {
		fmt.Printf(" %14s", r)
	}
	fmt.Printf(" %8s %8s\n", "all", "wall")
	row := func(name string, u cpuUse, wall time.Duration) {
		fmt.Printf("%-44s", name)
		for _, r := range cpuRoles {
			if _, ok := u[r]; !ok {
				fmt.Printf(" %14s", "-")
				continue
			}
			fmt.Printf(" %14.2f", u[r].Seconds())
		}
		fmt.Printf(" %8.2f %8.2f\n", u.total().Seconds(), wall.Seconds())
	}
	row("converge, bare client", f.bareConvergeCPU, f.bareConverge)
	row("converge, operator", f.opConvergeCPU, f.opConverge)
	row("fan-out, bare client", f.bareFanoutCPU, f.bareFanout)
	row("fan-out, operator", f.opFanoutCPU, f.opFanout)
	converge, fanout := f.serverRatios()
	fmt.Printf("%-44s %12.2f   (converge)\n", "API server + etcd CPU, operator / bare client", converge)
	fmt.Printf("%-44s %12.2f   (fan-out)\n", "", fanout)
}

// serverRatios are the API server's and etcd's CPU for the operator's requests over the
// bare client's, on converge and on the fan-out.
func (f *figures) serverRatios() (converge, fanout float64) {
	return f.opConvergeCPU.server().Seconds() / f.bareConvergeCPU.server().Seconds(),
		f.opFanoutCPU.server().Seconds() / f.bareFanoutCPU.server().Seconds()
}

// settle waits until the control plane and the manager (pid, 0 when none runs) use less
// than a tenth of a core over half a second, at most 30 s, so that a phase does not share
// the machine with the API server's start-up work (building the CRDs' OpenAPI, the
// informers' first lists): that work landed in whichever phase came first and moved the
// bare client's converge by a factor of two between runs.
func settle(ctx context.Context, manager int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c0 := cpuNow(manager)
		time.Sleep(500 * time.Millisecond)
		u := cpuNow(manager).since(c0)
		if u.server()+u["manager"] < 50*time.Millisecond {
			return
		}
	}
	fmt.Println("bench-scale: the control plane did not settle within 30 s; measuring anyway")
}
