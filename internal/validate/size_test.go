package validate_test

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxBinaryBytes bounds the binary (the manager and the CLI are one), built with
// -trimpath so the bound does not depend on where the checkout is: a plain `go build`,
// the way docs/scale-and-faults.md measures it, records each source file's full path and
// is about 144 KB larger (63,822,907 against 63,679,033 bytes in a checkout at a path as
// long as /work/main's, once the interface-method cuts of issue #23 landed). Issue #23
// asks for 64,000,000 plain, which that meets; this bound is today's trimmed size with
// 81 KB to spare and stops growth.
const maxBinaryBytes = 63_760_000

// TestBinaryUnder64MB builds the binary (with -trimpath, see maxBinaryBytes) and fails when it is over
// maxBinaryBytes, naming the packages with the most code and data, so growth is seen
// when it lands instead of at the next measurement. About 10 s with a warm build cache
// (the link).
func TestBinaryUnder64MB(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "poolsmith")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go build -trimpath -o p . && ls -l p: %d bytes", fi.Size())
	if fi.Size() <= maxBinaryBytes {
		return
	}
	t.Errorf("the binary is %d bytes, over %d (issue #23; docs/scale-and-faults.md says what was cut and how to look). The packages with the most code and data (go tool nm -size; the binary is about three times its code, with pclntab, symbols and DWARF):\n%s",
		fi.Size(), maxBinaryBytes, topPackages(t, bin, 15))
}

// topPackages sums the symbol sizes go tool nm lists by package and prints the n largest.
func topPackages(t *testing.T, bin string, n int) string {
	out, err := exec.Command("go", "tool", "nm", "-size", bin).Output()
	if err != nil {
		return fmt.Sprintf("(go tool nm: %v)", err)
	}
	sizes := map[string]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		// Skip undefined and zeroed symbols (no bytes in the file) and the linker's own
		// tables (go:func.*, go:string.*), which belong to no one package.
		if len(f) < 4 || f[2] == "U" || f[2] == "B" || f[2] == "b" || strings.HasPrefix(f[3], "go:") {
			continue
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		sizes[symbolPackage(strings.Join(f[3:], " "))] += size
	}
	pkgs := slices.SortedFunc(maps.Keys(sizes), func(a, b string) int { return cmp.Compare(sizes[b], sizes[a]) })
	var b strings.Builder
	for _, p := range pkgs[:min(n, len(pkgs))] {
		fmt.Fprintf(&b, "%12d %s\n", sizes[p], p)
	}
	return b.String()
}

// symbolPackage is the import path a symbol name starts with: up to the first dot after
// the last slash, before any type arguments.
func symbolPackage(sym string) string {
	sym = strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(sym, "type:"), "go:itab."), "*")
	if i := strings.IndexByte(sym, '['); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/') + 1
	if dot := strings.IndexByte(sym[slash:], '.'); dot >= 0 {
		return sym[:slash+dot]
	}
	return sym
}
