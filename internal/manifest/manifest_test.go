package manifest_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

// loadWithin fails the test instead of hanging when Load blocks.
func loadWithin(t *testing.T, paths []string, stdin io.Reader) ([]manifest.Object, error) {
	t.Helper()
	type result struct {
		objs []manifest.Object
		err  error
	}
	done := make(chan result, 1)
	go func() {
		objs, err := manifest.Load(paths, stdin)
		done <- result{objs, err}
	}()
	select {
	case r := <-done:
		return r.objs, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("Load(%v) blocked", paths)
		return nil, nil
	}
}

func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}

func TestLoadRefusesFIFOsAndDevicesInsteadOfBlocking(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{fifo(t, dir, "pipe.yaml"), "/dev/zero"} {
		_, err := loadWithin(t, []string{path}, nil)
		if err == nil || !strings.Contains(err.Error(), path+" is not a regular file") {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestLoadRefusesSpecialFilesInDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo(t, dir, "b.yaml")
	_, err := loadWithin(t, []string{dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "directory "+dir) || !strings.Contains(err.Error(), "b.yaml is not a regular file") {
		t.Errorf("got %v", err)
	}
	// A symlink to a regular file is read like the file.
	link := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "a.yaml"), filepath.Join(link, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if objs, err := loadWithin(t, []string{link}, nil); err != nil || len(objs) != 1 {
		t.Errorf("symlink: %d objects, %v", len(objs), err)
	}
}

// endless is a YAML comment that never ends, like `-f - < /dev/zero` in effect.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
		if i%80 == 79 {
			p[i] = '\n'
		}
	}
	return len(p), nil
}

func TestLoadRefusesInputOverMaxInputBytes(t *testing.T) {
	_, err := loadWithin(t, []string{"-"}, endless{})
	if !errors.Is(err, manifest.ErrInputTooLarge) && (err == nil || !strings.Contains(err.Error(), "larger than 32 MiB")) {
		t.Fatalf("got %v", err)
	}
	// The limit is on all the input together, not per file.
	dir := t.TempDir()
	big := []byte("# " + strings.Repeat("x", manifest.MaxInputBytes/2) + "\n")
	for _, name := range []string{"a.yaml", "b.yaml", "c.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), big, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := loadWithin(t, []string{dir}, nil); err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Errorf("three half-limit files: %v", err)
	}
	// Exactly at the limit is fine.
	exact := append([]byte("# "), make([]byte, manifest.MaxInputBytes-3)...)
	for i := 2; i < len(exact); i++ {
		exact[i] = 'x'
	}
	exact = append(exact, '\n')
	if _, err := loadWithin(t, []string{"-"}, strings.NewReader(string(exact))); err != nil {
		t.Errorf("input of exactly MaxInputBytes: %v", err)
	}
}

func TestIntoNamesTheFieldOfABadDuration(t *testing.T) {
	objs, err := manifest.Decode("in.yaml", strings.NewReader(
		"apiVersion: poolsmith.dev/v1alpha1\nkind: WorkloadClass\nmetadata: {name: web}\nspec:\n  expireAfter: 1d\n  disruption: {budgets: [{nodes: '1', duration: forever}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = objs[0].Into(&v1alpha1.WorkloadClass{})
	for _, want := range []string{
		`in.yaml (document 1, WorkloadClass web): spec.`, `spec.expireAfter: "1d" is not a duration`, "(a day is 24h, a week 168h), or Never",
		`spec.disruption.budgets[0].duration: "forever" is not a duration`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
