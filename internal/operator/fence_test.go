package operator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
