package receivertest_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/internal/receivertest"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil { // Error, not Fatal: concurrent callers run off the test's goroutine
		t.Error(err)
		return 0, ""
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(got)
}

func TestReceiverRecordsAndAnswers(t *testing.T) {
	rc := receivertest.New(t, nil)
	if code, body := post(t, rc.URL+"/hook", "one"); code != http.StatusOK || body != "ok" {
		t.Errorf("default answer %d %q", code, body)
	}
	rc.SetStatus(http.StatusServiceUnavailable)
	rc.SetBody(`{"ok":false}`)
	if code, body := post(t, rc.URL+"/other", "two"); code != http.StatusServiceUnavailable || body != `{"ok":false}` {
		t.Errorf("set answer %d %q", code, body)
	}
	got := rc.Requests()
	if len(got) != 2 || rc.Count() != 2 {
		t.Fatalf("recorded %d requests, counted %d", len(got), rc.Count())
	}
	if got[0].Method != http.MethodPost || got[0].Path != "/hook" || string(got[0].Body) != "one" ||
		got[0].Header.Get("Content-Type") != "text/plain" || got[0].At.IsZero() || got[1].At.Before(got[0].At) ||
		got[1].Path != "/other" || string(got[1].Body) != "two" {
		t.Errorf("recorded %+v", got)
	}
	if n := rc.Conns(); n < 1 || n > 2 {
		t.Errorf("%d connections for two requests", n)
	}
}

func TestReceiverHandlerAnswersTheNthRequest(t *testing.T) {
	rc := receivertest.New(t, receivertest.Statuses(http.StatusGone, http.StatusTeapot))
	for i, want := range []int{http.StatusGone, http.StatusTeapot, http.StatusOK} {
		if code, body := post(t, rc.URL, "x"); code != want || body != "receiver says hi" {
			t.Errorf("request %d: %d %q, want %d", i, code, body, want)
		}
	}
}

// A connection that sends no request still counts.
func TestReceiverCountsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := receivertest.Serve(t, ln, nil)
	if rc.Listener.Addr().String() != ln.Addr().String() {
		t.Fatalf("serves on %s, not the given %s", rc.Listener.Addr(), ln.Addr())
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// A request on another connection proves the server accepted the first one too (it accepts in order).
	post(t, rc.URL, "x")
	_ = c.Close()
	if rc.Conns() < 2 || rc.Count() != 1 {
		t.Errorf("%d connections, %d requests", rc.Conns(), rc.Count())
	}
}

// Run with -race: requests arrive while the test reads and changes the receiver.
func TestReceiverConcurrentUse(t *testing.T) {
	rc := receivertest.New(t, nil)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, rc.URL, strings.Repeat("b", i))
			rc.SetStatus(http.StatusOK)
			_ = rc.Requests()
			_ = rc.Conns()
		}()
	}
	wg.Wait()
	if rc.Count() != n {
		t.Errorf("counted %d of %d requests", rc.Count(), n)
	}
	seen := map[int]bool{}
	for _, r := range rc.Requests() {
		seen[len(r.Body)] = true
	}
	if len(seen) != n {
		t.Errorf("recorded %d distinct bodies of %d", len(seen), n)
	}
}
