package plan

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memo remembers the children a plan found unchanged, so that planning the same render
// over the same live object again (a Baseline edit that changes one child of every class,
// a resync) does not normalize, default and compare both sides again: that is most of a
// pass's CPU and garbage. An entry holds only when both the render (its JSON, and the
// class it is owned by) and the live object (UID and resourceVersion) are the same, so a
// plan with a memo is the plan without one. Safe for concurrent use.
type Memo struct{ entries sync.Map }

type memoKey struct{ class, kind, name string }

type memoEntry struct {
	want    [sha256.Size]byte
	liveUID types.UID
	liveRV  string
}

// wantSum is what identifies a rendered child with its owner.
func wantSum(class client.Object, want client.Object) ([sha256.Size]byte, bool) {
	b, err := json.Marshal(want)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	h := sha256.New()
	h.Write([]byte(class.GetName() + "\x00" + string(class.GetUID()) + "\x00"))
	h.Write(b)
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, true
}

// unchanged reports whether live was found to match the same render before.
func (m *Memo) unchanged(key memoKey, sum [sha256.Size]byte, live client.Object) bool {
	v, ok := m.entries.Load(key)
	return ok && v.(memoEntry) == memoEntry{want: sum, liveUID: live.GetUID(), liveRV: live.GetResourceVersion()}
}

func (m *Memo) remember(key memoKey, sum [sha256.Size]byte, live client.Object) {
	m.entries.Store(key, memoEntry{want: sum, liveUID: live.GetUID(), liveRV: live.GetResourceVersion()})
}

// Forget drops what the memo holds for a class (when it is deleted).
func (m *Memo) Forget(class string) {
	m.entries.Range(func(k, _ any) bool {
		if k.(memoKey).class == class {
			m.entries.Delete(k)
		}
		return true
	})
}
