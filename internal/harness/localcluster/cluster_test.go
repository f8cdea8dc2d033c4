package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogDirIsCreated: DEMO_LOG_DIR=logs/run1 in a fresh clone names a directory nobody
// made yet; the cluster creates it (and its parents) instead of failing to write its logs.
func TestLogDirIsCreated(t *testing.T) {
	want := filepath.Join(t.TempDir(), "logs", "run1")
	got, err := logDir(want)
	if err != nil || got != want {
		t.Fatalf("logDir(%s) = %s, %v", want, got, err)
	}
	if info, err := os.Stat(want); err != nil || !info.IsDir() {
		t.Fatalf("%s was not created: %v", want, err)
	}
	if got, err := logDir(want); err != nil || got != want {
		t.Errorf("an existing directory: %s, %v", got, err)
	}
	tmp, err := logDir("")
	if err != nil || !strings.Contains(tmp, "poolsmith-localcluster-") {
		t.Fatalf("no directory given: %s, %v", tmp, err)
	}
	_ = os.RemoveAll(tmp)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := logDir(filepath.Join(file, "logs")); err == nil || !strings.Contains(err.Error(), "creating the log directory") {
		t.Errorf("under a file: %v", err)
	}
}
