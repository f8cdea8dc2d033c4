package validate

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// maxVerdicts bounds the verdicts a Validator remembers: enough for every write of a few
// hundred classes; when full, the memory starts over.
const maxVerdicts = 4096

// verdicts remembers what Create and Update answered, by the SHA-256 of the operation and
// the exact JSON judged: the object's, and for an update the live object's too (transition
// rules and ratcheting read it). The verdict is a function of those bytes alone: every
// check starts by decoding them, the CRD schemas of a Validator never change after New (a
// new CRD set is a new Validator, with memory of its own), and the feature gates are the
// process's. So a remembered verdict is the one judging again would give, and an object
// that differs in one byte, or meets a different live object, is judged afresh. It spares
// the checks that do not depend on anything new: a plan retried after a lost write race,
// a refused class planned again on every event until it is fixed.
type verdicts struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]error
	// judged counts the checks actually run (tests).
	judged atomic.Int64
}

func verdictKey(op string, obj, old []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(op))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(obj)))
	h.Write(n[:])
	h.Write(obj)
	h.Write(old)
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// judge returns the remembered verdict for key, or runs check and remembers its answer.
func (v *verdicts) judge(key [sha256.Size]byte, check func() error) error {
	v.mu.Lock()
	err, ok := v.m[key]
	v.mu.Unlock()
	if ok {
		return err
	}
	v.judged.Add(1)
	err = check()
	v.mu.Lock()
	if v.m == nil || len(v.m) >= maxVerdicts {
		v.m = make(map[[sha256.Size]byte]error, 64)
	}
	v.m[key] = err
	v.mu.Unlock()
	return err
}
