package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/webhook"
)

func TestDefaultSchedule(t *testing.T) {
	// The example schedule of the Standard Webhooks specification, which receivers written against it expect.
	want := []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}
	if !slices.Equal(webhook.DefaultSchedule, want) {
		t.Errorf("DefaultSchedule = %v, want %v", webhook.DefaultSchedule, want)
	}
}

func TestParseSchedule(t *testing.T) {
	fifty := strings.TrimSuffix(strings.Repeat("1m,", 50), ",")
	tests := []struct {
		in      string
		want    []time.Duration
		wantErr string
	}{
		{in: "0s,5s,5m,30m,2h,5h,10h,14h,20h,24h", want: webhook.DefaultSchedule},
		{in: " 0s , 1m30s ,\t2h ", want: []time.Duration{0, 90 * time.Second, 2 * time.Hour}},
		{in: "0", want: []time.Duration{0}},
		{in: "1h", want: []time.Duration{time.Hour}},
		{in: "10s,10s,10s", want: []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second}},
		{in: "500ms,1.5s", want: []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond}},
		{in: fifty, want: slices.Repeat([]time.Duration{time.Minute}, 50)},
		{in: fifty + ",1m", wantErr: "51 entries, at most 50"},
		{in: "", wantErr: "entry 1"},
		{in: "   ", wantErr: "entry 1"},
		{in: "0s,,5s", wantErr: "entry 2"},
		{in: "0s,5s,", wantErr: "entry 3"},
		{in: "0s,5", wantErr: "entry 2"},
		{in: "1d", wantErr: "entry 1"},
		{in: "0s,-5s", wantErr: "entry 2 (-5s) is negative"},
		{in: "0s,5m,5s", wantErr: "entry 3 (5s) is shorter than the one before (5m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := webhook.ParseSchedule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSchedule() = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("ParseSchedule() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// dialErr wraps err the way net/http reports a failed dial.
func dialErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://example.com/hook", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
}

func TestClassify(t *testing.T) {
	delivered := webhook.Outcome{Result: webhook.Delivered}
	failed := func(class string) webhook.Outcome { return webhook.Outcome{Result: webhook.Failed, Class: class} }
	tests := []struct {
		name   string
		status int
		err    error
		want   webhook.Outcome
	}{
		{"200", 200, nil, delivered},
		{"201", 201, nil, delivered},
		{"204", 204, nil, delivered},
		{"299", 299, nil, delivered},
		{"2xx then an error reading the body: no duplicate", 200, io.ErrUnexpectedEOF, delivered},
		{"101", 101, nil, failed("http_1xx")},
		{"300", 300, nil, failed("http_3xx")},
		{"301 is not followed", 301, nil, failed("http_3xx")},
		{"302", 302, nil, failed("http_3xx")},
		{"304", 304, nil, failed("http_3xx")},
		{"308", 308, nil, failed("http_3xx")},
		{"400", 400, nil, failed("http_4xx")},
		{"401", 401, nil, failed("http_4xx")},
		{"404 stays retryable", 404, nil, failed("http_4xx")},
		{"410 disables the endpoint", 410, nil, webhook.Outcome{Result: webhook.Gone, Class: "http_410"}},
		{"429", 429, nil, failed("http_429")},
		{"500", 500, nil, failed("http_5xx")},
		{"502", 502, nil, failed("http_5xx")},
		{"503 with an error reading the body", 503, io.EOF, failed("http_5xx")},
		{"599", 599, nil, failed("http_5xx")},
		{"600", 600, nil, failed("http_invalid")},
		{"negative", -1, nil, failed("http_invalid")},

		{"blocked at dial time", 0, dialErr(fmt.Errorf("%w: 10.0.0.8 is a private address", webhook.ErrBlocked)), failed("blocked")},
		{"shutting down", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: context.Canceled}, failed("canceled")},
		{"no such host", 0, dialErr(&net.DNSError{Err: "no such host", Name: "nowhere.example", IsNotFound: true}), failed("dns")},
		{"resolver timeout is DNS", 0, dialErr(&net.DNSError{Err: "i/o timeout", Name: "slow.example", IsTimeout: true}), failed("dns")},
		{"context deadline", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: context.DeadlineExceeded}, failed("timeout")},
		{"read deadline", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, failed("timeout")},
		{"refused", 0, dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), failed("connection_refused")},
		{"reset", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}, failed("connection_closed")},
		{"broken pipe", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}}, failed("connection_closed")},
		{"closed before answering", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: io.EOF}, failed("connection_closed")},
		{"host unreachable", 0, dialErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), failed("unreachable")},
		{"network unreachable", 0, dialErr(os.NewSyscallError("connect", syscall.ENETUNREACH)), failed("unreachable")},
		{"untrusted certificate", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, failed("tls")},
		{"not TLS", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, failed("tls")},
		{"HTTP behind an https URL", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: http.ErrSchemeMismatch}, failed("tls")},
		{"handshake alert", 0, &url.Error{Op: "Post", URL: "https://example.com", Err: &net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}}, failed("tls")},
		{"anything else", 0, errors.New("http: ContentLength=10 with Body length 0"), failed("network")},
		{"no status and no error", 0, nil, failed("network")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := webhook.Classify(tt.status, tt.err); got != tt.want {
				t.Errorf("Classify(%d, %v) = %+v, want %+v", tt.status, tt.err, got, tt.want)
			}
		})
	}
}

// TestClassifyRealFailures checks the classes against the errors net/http really returns, not just their
// documented shapes.
func TestClassifyRealFailures(t *testing.T) {
	post := func(t *testing.T, c *http.Client, ctx context.Context, url string) error {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("POST %s answered %s, want an error", url, resp.Status)
		}
		return err
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(plain.Close)
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(untrusted.Close)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server only notices the client hanging up once the body is read; cap the wait so Close returns.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hangUp.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	noDNS := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS server in this test")
		},
	}}).DialContext}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name   string
		client *http.Client
		ctx    context.Context
		url    string
		want   string
	}{
		{"connection refused", http.DefaultClient, context.Background(), refused, "connection_refused"},
		{"client timeout", &http.Client{Timeout: 50 * time.Millisecond}, context.Background(), slow.URL, "timeout"},
		{"hang-up", http.DefaultClient, context.Background(), hangUp.URL, "connection_closed"},
		{"untrusted certificate", http.DefaultClient, context.Background(), untrusted.URL, "tls"},
		{"https to an http server", http.DefaultClient, context.Background(), strings.Replace(plain.URL, "http:", "https:", 1), "tls"},
		{"resolver failure", noDNS, context.Background(), "http://receiver.example:8080/hook", "dns"},
		{"canceled", http.DefaultClient, canceled, plain.URL, "canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := post(t, tt.client, tt.ctx, tt.url)
			want := webhook.Outcome{Result: webhook.Failed, Class: tt.want}
			if got := webhook.Classify(0, err); got != want {
				t.Errorf("Classify(0, %v) = %+v, want %+v", err, got, want)
			}
		})
	}
}

// fixed returns an rnd that always draws r: 0 gives the shortest jittered wait (×0.8), 0.5 the exact step.
func fixed(r float64) func() float64 { return func() float64 { return r } }

func TestNextAttempt(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	httpDate := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	failed := func(class string) webhook.Outcome { return webhook.Outcome{Result: webhook.Failed, Class: class} }
	serverError, timeout, tooMany := failed("http_5xx"), failed("timeout"), failed("http_429")
	def := webhook.DefaultSchedule

	tests := []struct {
		name       string
		schedule   []time.Duration
		throttled  time.Duration // ThrottledWait; 0 means the default
		attempt    int
		outcome    webhook.Outcome
		retryAfter string
		rnd        float64
		want       time.Duration // from now; -1: no next attempt
	}{
		{"after the 1st attempt: schedule[1]", def, 0, 1, serverError, "", 0.5, 5 * time.Second},
		{"after the 2nd attempt: schedule[2]", def, 0, 2, serverError, "", 0.5, 5 * time.Minute},
		{"after the 9th attempt: the last step", def, 0, 9, serverError, "", 0.5, 24 * time.Hour},
		{"after the 10th attempt: exhausted", def, 0, 10, serverError, "", 0.5, -1},
		{"beyond the schedule", def, 0, 11, serverError, "", 0.5, -1},
		{"attempt 0 counts as the 1st", def, 0, 0, serverError, "", 0.5, 5 * time.Second},
		{"one-step schedule: no retry", []time.Duration{0}, 0, 1, serverError, "", 0.5, -1},

		{"jitter: least draw is -20 %", def, 0, 2, serverError, "", 0, 4 * time.Minute},
		{"jitter: draw 0.75 is +10 %", def, 0, 2, serverError, "", 0.75, 5*time.Minute + 30*time.Second},
		{"jitter: a zero step stays zero", []time.Duration{0, 0, time.Hour}, 0, 1, serverError, "", 0, 0},

		{"delivered: nothing next", def, 0, 1, webhook.Outcome{Result: webhook.Delivered}, "", 0.5, -1},
		{"gone: nothing next", def, 0, 1, webhook.Outcome{Result: webhook.Gone, Class: "http_410"}, "3600", 0.5, -1},

		{"timeout: at least 60 s", def, 0, 1, timeout, "", 0.999, time.Minute},
		{"timeout: a longer step is kept", def, 0, 2, timeout, "", 0.5, 5 * time.Minute},
		{"429: at least 60 s", def, 0, 1, tooMany, "", 0.5, time.Minute},
		{"429: Retry-After shorter than the floor", def, 0, 1, tooMany, "30", 0.5, time.Minute},
		{"429: Retry-After longer than the floor", def, 0, 1, tooMany, "90", 0.5, 90 * time.Second},
		{"timeout: a configured floor", []time.Duration{0, 0}, 100 * time.Millisecond, 1, timeout, "", 0.5, 100 * time.Millisecond},
		{"429: a configured floor", []time.Duration{0, 0}, 100 * time.Millisecond, 1, tooMany, "", 0.5, 100 * time.Millisecond},
		{"429: Retry-After above a configured floor", []time.Duration{0, 0}, 100 * time.Millisecond, 1, tooMany, "2", 0.5, 2 * time.Second},
		{"timeout: a configured floor under a longer step", def, 100 * time.Millisecond, 1, timeout, "", 0, 4 * time.Second},
		{"refused: no floor", def, 0, 1, failed("connection_refused"), "", 0.5, 5 * time.Second},

		{"Retry-After seconds lengthen the wait", def, 0, 1, serverError, "120", 0.5, 2 * time.Minute},
		{"Retry-After with spaces", def, 0, 1, serverError, " 120 ", 0.5, 2 * time.Minute},
		{"Retry-After never shortens the step", def, 0, 2, serverError, "1", 0.5, 5 * time.Minute},
		{"Retry-After 0", def, 0, 1, serverError, "0", 0.5, 5 * time.Second},
		{"Retry-After beyond 24 h is clamped", def, 0, 1, serverError, "172800", 0.5, 24 * time.Hour},
		{"Retry-After of max int64 seconds is clamped", def, 0, 1, serverError, "9223372036854775807", 0.5, 24 * time.Hour},
		{"Retry-After beyond uint64 is ignored", def, 0, 1, serverError, "99999999999999999999", 0.5, 5 * time.Second},
		{"Retry-After date", def, 0, 1, serverError, httpDate(3 * time.Minute), 0.5, 3 * time.Minute},
		{"Retry-After date in RFC 850 form", def, 0, 1, serverError, now.Add(3 * time.Minute).Format(time.RFC850), 0.5, 3 * time.Minute},
		{"Retry-After date in asctime form", def, 0, 1, serverError, now.Add(3 * time.Minute).Format(time.ANSIC), 0.5, 3 * time.Minute},
		{"Retry-After date in the past", def, 0, 1, serverError, httpDate(-time.Hour), 0.5, 5 * time.Second},
		{"Retry-After date in 3 days is clamped", def, 0, 1, serverError, httpDate(72 * time.Hour), 0.5, 24 * time.Hour},
		{"Retry-After shorter than the last step", def, 0, 9, serverError, "3600", 0.5, 24 * time.Hour},
		{"a step beyond 24 h is kept", []time.Duration{0, 48 * time.Hour}, 0, 1, serverError, "3600", 0.5, 48 * time.Hour},
		{"Retry-After negative: ignored", def, 0, 1, serverError, "-5", 0.5, 5 * time.Second},
		{"Retry-After fraction: ignored", def, 0, 1, serverError, "1.5", 0.5, 5 * time.Second},
		{"Retry-After words: ignored", def, 0, 1, serverError, "soon", 0.5, 5 * time.Second},
		{"Retry-After signed: ignored", def, 0, 1, serverError, "+60", 0.5, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := webhook.RetryPolicy{Schedule: tt.schedule, ThrottledWait: tt.throttled}
			if p.ThrottledWait == 0 {
				p.ThrottledWait = webhook.DefaultThrottledWait
			}
			at, ok := p.NextAttempt(tt.attempt, now, tt.outcome, tt.retryAfter, fixed(tt.rnd))
			if tt.want < 0 {
				if ok {
					t.Fatalf("NextAttempt() = %v, true; want no next attempt", at)
				}
				return
			}
			if !ok || !at.Equal(now.Add(tt.want)) {
				t.Fatalf("NextAttempt() = now+%v, %v; want now+%v, true", at.Sub(now), ok, tt.want)
			}
		})
	}
}

// TestNextAttemptJitterBounds draws many waits and checks each stays within ±20 % of its step.
func TestNextAttemptJitterBounds(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(1, 2)).Float64
	failed := webhook.Outcome{Result: webhook.Failed, Class: "http_5xx"}
	p := webhook.RetryPolicy{Schedule: webhook.DefaultSchedule, ThrottledWait: webhook.DefaultThrottledWait}
	for attempt := 1; attempt < len(webhook.DefaultSchedule); attempt++ {
		step := webhook.DefaultSchedule[attempt]
		lo, hi := now.Add(step*8/10), now.Add(step*12/10)
		for range 1000 {
			at, ok := p.NextAttempt(attempt, now, failed, "", rnd)
			if !ok || at.Before(lo) || !at.Before(hi) {
				t.Fatalf("NextAttempt(attempt %d) = now+%v, %v; want within [%v, %v)", attempt, at.Sub(now), ok, step*8/10, step*12/10)
			}
		}
	}
}
