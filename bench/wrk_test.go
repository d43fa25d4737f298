package main

import (
	"strings"
	"testing"
	"time"
)

// A report of wrk 4.1.0 with --latency; failing runs add the two error lines before Requests/sec.
const wrkReport = `Running 5s test @ http://127.0.0.1:40125/api/v1/models
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.74ms    1.52ms  31.46ms   93.16%
    Req/Sec    18.53k     1.10k   20.38k    72.00%
  Latency Distribution
     50%    1.50ms
     75%    1.89ms
     90%    2.55ms
     99%    7.59ms
  92195 requests in 5.00s, 140.02MB read
Requests/sec:  18434.69
Transfer/sec:     28.00MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkReport)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{requests: 92195, rps: 18434.69, p50: 1500 * time.Microsecond, p99: 7590 * time.Microsecond}
	if r != want {
		t.Errorf("parseWrk = %+v, want %+v", r, want)
	}
}

func TestParseWrkErrors(t *testing.T) {
	out := strings.Replace(wrkReport, "Requests/sec:", "  Socket errors: connect 0, read 3, write 0, timeout 12\n"+
		"  Non-2xx or 3xx responses: 92195\nRequests/sec:", 1)
	out = strings.Replace(out, "    7.59ms", "  850.00us", 1)
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.errorStatus != 92195 || r.socketErrors != "connect 0, read 3, write 0, timeout 12" || r.p99 != 850*time.Microsecond {
		t.Errorf("parseWrk = %+v, want 92195 error statuses, the socket errors and p99 850µs", r)
	}
}

func TestParseWrkIncomplete(t *testing.T) {
	for name, out := range map[string]string{
		"empty":       "",
		"no p99":      strings.Replace(wrkReport, "     99%    7.59ms\n", "", 1),
		"no requests": strings.Replace(wrkReport, "92195 requests", "0 requests", 1),
	} {
		if r, err := parseWrk(out); err == nil {
			t.Errorf("%s: parseWrk = %+v, want an error", name, r)
		}
	}
}

func TestMedian(t *testing.T) {
	rps := func(r wrkResult) float64 { return r.rps }
	if got := median([]wrkResult{{rps: 3}, {rps: 1}, {rps: 2}}, rps); got != 2 {
		t.Errorf("median of 3, 1, 2 = %v, want 2", got)
	}
	if got := median([]wrkResult{{rps: 4}, {rps: 1}}, rps); got != 2.5 {
		t.Errorf("median of 4, 1 = %v, want 2.5", got)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{ms(hundred...), 0.50, 50 * time.Millisecond},
		{ms(hundred...), 0.99, 99 * time.Millisecond},
		{ms(1, 2, 3), 0.99, 3 * time.Millisecond},
		{ms(1, 2, 3), 0.50, 2 * time.Millisecond},
		{ms(7), 0.50, 7 * time.Millisecond},
		{nil, 0.99, 0},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%d samples, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
		}
	}
}
