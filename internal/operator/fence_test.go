package operator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// A replica frozen past its renew deadline (SIGSTOP, CPU starvation) resumes with
// reconciles in flight: the fence must refuse their writes, and only writes, until the
// Lease is renewed again. test/chaos's leader-election scenario found the writes.
func TestFenceRefusesWritesOnceTheLeaseMayHavePassed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	f := &fence{valid: 200 * time.Millisecond}
	c := &http.Client{Transport: f.guard(http.DefaultTransport)}
	send := func(method string) error {
		req, err := http.NewRequest(method, srv.URL+"/apis/karpenter.sh/v1/nodepools", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := send(m); !errors.Is(err, ErrLeaseExpired) {
			t.Errorf("%s before the Lease was ever held: got %v, want ErrLeaseExpired", m, err)
		}
	}
	f.renew(time.Now())
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := send(m); err != nil {
			t.Errorf("%s right after a renewal: %v", m, err)
		}
	}
	time.Sleep(250 * time.Millisecond) // as if frozen past the renew deadline
	if err := send(http.MethodGet); err != nil {
		t.Errorf("GET past the deadline: %v (reads stay allowed)", err)
	}
	if err := send(http.MethodPatch); !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("PATCH past the deadline: got %v, want ErrLeaseExpired", err)
	}
	f.renew(time.Now().Add(-time.Hour)) // an older renewal never moves the mark back
	if f.held() {
		t.Error("an old renewal made the Lease held again")
	}
	f.renew(time.Now())
	if err := send(http.MethodPatch); err != nil {
		t.Errorf("PATCH after a new renewal: %v", err)
	}
}

// The guard checks the fence before a write enters the transport; a replica stopped
// between that check and the socket sent the write when continued (test/chaos met it).
// The write transport checks again before every byte it sends: a write that passed the
// guard while the fence was held and reaches the socket after it lapsed is not sent.
func TestFencedWritesAreCheckedAgainAtTheSocket(t *testing.T) {
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { received.Add(1) }))
	defer srv.Close()
	f := &fence{valid: 200 * time.Millisecond}
	writes, err := f.writeTransport(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f.writes = writes
	c := &http.Client{Transport: f.guard(http.DefaultTransport)}
	post := func(rt http.RoundTripper) error {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/apis/karpenter.sh/v1/nodepools", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	f.renew(time.Now())
	if err := post(c.Transport); err != nil || received.Load() != 1 {
		t.Fatalf("a write while the fence is held: %v, %d received", err, received.Load())
	}
	time.Sleep(250 * time.Millisecond)
	// As if the guard had let it through just before the process was frozen.
	if err := post(writes); !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("a write reaching the socket after the fence lapsed: got %v, want ErrLeaseExpired", err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("the server received %d requests, want 1: the write after the lapse was sent", n)
	}
	f.renew(time.Now())
	if err := post(c.Transport); err != nil || received.Load() != 2 {
		t.Errorf("a write after a new renewal: %v, %d received", err, received.Load())
	}
}
