package argocd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsmith/poolsmith/internal/harness/argocd"
)

const script = "../../../config/argocd/health.lua"

func class(generation float64, deleting bool, conditions ...map[string]any) map[string]any {
	meta := map[string]any{"name": "general", "generation": generation}
	if deleting {
		meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
	}
	obj := map[string]any{"metadata": meta}
	if conditions != nil {
		cs := make([]any, len(conditions))
		for i, c := range conditions {
			cs[i] = c
		}
		obj["status"] = map[string]any{"conditions": cs}
	}
	return obj
}

func cond(typ, status, reason, message string, generation float64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": generation}
}

// The six ordinary states and deletion, as Argo CD would show them.
func TestHealth(t *testing.T) {
	deleting := "deleting 2 NodePools (general-spot-arm64, general-on-demand-arm64) and 0 NodeOverlays; the EC2NodeClass follows"
	for name, tc := range map[string]struct {
		obj  map[string]any
		want argocd.Health
	}{
		"not reconciled yet": {class(1, false), argocd.Health{Status: "Progressing", Message: "Waiting for Poolsmith to reconcile"}},
		"a new generation not reconciled": {class(2, false, cond("Synced", "True", "Applied", "", 1), cond("Ready", "True", "AllReady", "", 1)),
			argocd.Health{Status: "Progressing", Message: "Waiting for Poolsmith to reconcile generation 2"}},
		"awaiting Karpenter": {class(1, false, cond("Synced", "True", "Applied", "", 1), cond("Ready", "Unknown", "AwaitingKarpenter", "NodePool/general-spot-arm64", 1)),
			argocd.Health{Status: "Progressing", Message: "Ready=Unknown (AwaitingKarpenter): NodePool/general-spot-arm64"}},
		"healthy": {class(1, false, cond("Synced", "True", "Applied", "", 1), cond("Ready", "True", "AllReady", "all ready", 1)),
			argocd.Health{Status: "Healthy", Message: "Ready=True (AllReady): all ready"}},
		"not synced": {class(1, false, cond("Synced", "False", "InvalidSpec", "spec.weighting.ceiling: too low", 1), cond("Ready", "False", "NotSynced", "", 1)),
			argocd.Health{Status: "Degraded", Message: "Synced=False (InvalidSpec): spec.weighting.ceiling: too low"}},
		"a child not ready": {class(1, false, cond("Synced", "True", "Applied", "", 1), cond("Ready", "False", "NodePoolNotReady", "NodePool general-spot-arm64: broken", 1)),
			argocd.Health{Status: "Degraded", Message: "Ready=False (NodePoolNotReady): NodePool general-spot-arm64: broken"}},
		"deleting its children": {class(1, true, cond("Synced", "False", "Deleting", deleting, 1), cond("Ready", "True", "AllReady", "", 1)),
			argocd.Health{Status: "Progressing", Message: "Synced=False (Deleting): " + deleting, DeletionMessage: "Synced=False (Deleting): " + deleting}},
		"deleting, not yet seen by Poolsmith": {class(1, true, cond("Synced", "True", "Applied", "", 1), cond("Ready", "True", "AllReady", "", 1)),
			argocd.Health{Status: "Progressing", Message: "Waiting for Poolsmith to delete the class's NodePools and EC2NodeClass",
				DeletionMessage: "Waiting for Poolsmith to delete the class's NodePools and EC2NodeClass"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := argocd.Evaluate(script, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Argo CD opens only base, table and package: a script using string, math or os fails.
func TestOnlyArgoCDsLibrariesAreOpen(t *testing.T) {
	dir := t.TempDir()
	for lib, src := range map[string]string{
		"string": `return {status = string.format("%s", "Healthy")}`,
		"math":   `return {status = tostring(math.floor(1))}`,
		"os":     `return {status = os.getenv("HOME")}`,
		"io":     `return {status = io.read()}`,
	} {
		path := filepath.Join(dir, lib+".lua")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := argocd.Evaluate(path, map[string]any{}); err == nil || !strings.Contains(err.Error(), "nil") {
			t.Errorf("a script calling %s.*: got %v, want an error (Argo CD does not open %s)", lib, err, lib)
		}
	}
	path := filepath.Join(dir, "table.lua")
	if err := os.WriteFile(path, []byte(`local t = {} table.insert(t, "Healthy") return {status = t[1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, err := argocd.Evaluate(path, map[string]any{}); err != nil || h.Status != "Healthy" {
		t.Errorf("table.insert: got %+v, %v; Argo CD opens table", h, err)
	}
}
