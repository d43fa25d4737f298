package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkRunner runs wrk with a single thread: the servers run in this process on the same machine, and one thread of
// load generation leaves the rest of the CPU (one core of two on the reference machine) to the server under test,
// the same share for every target.
type wrkRunner struct {
	path        string
	connections int
}

// wrkResult is what the table needs from one wrk run.
type wrkResult struct {
	requests int
	rps      float64
	p50, p99 time.Duration
	// errorStatus counts responses that wrk counts as "Non-2xx or 3xx": status 400 and above.
	errorStatus int
	// socketErrors is wrk's "connect 0, read 1, write 0, timeout 0", or "" when all are zero.
	socketErrors string
}

// measure runs wrk against sc for d and records the result and any failure on sc.
func (w wrkRunner) measure(ctx context.Context, sc *scenario, d time.Duration) error {
	args := []string{"-t1", "-c" + strconv.Itoa(w.connections), "-d" + wrkDuration(d), "--latency"}
	for _, h := range sc.headers {
		args = append(args, "-H", h)
	}
	if sc.script != "" {
		args = append(args, "-s", sc.script)
	}
	args = append(args, sc.url)
	out, err := exec.CommandContext(ctx, w.path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: wrk: %w\n%s", sc.name, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", sc.name, err, out)
	}
	if r.errorStatus > 0 {
		sc.failures = append(sc.failures, fmt.Sprintf("%d of %d responses had an error status", r.errorStatus, r.requests))
	}
	if r.socketErrors != "" {
		sc.failures = append(sc.failures, "socket errors: "+r.socketErrors)
	}
	sc.runs = append(sc.runs, r)
	return nil
}

// wrkDuration formats d for wrk -d, which takes a number and one unit: whole seconds.
func wrkDuration(d time.Duration) string {
	return strconv.Itoa(int(d.Round(time.Second).Seconds())) + "s"
}

var (
	wrkRequests     = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRPS          = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)\s*$`)
	wrkP50          = regexp.MustCompile(`(?m)^\s+50%\s+(\S+)\s*$`)
	wrkP99          = regexp.MustCompile(`(?m)^\s+99%\s+(\S+)\s*$`)
	wrkErrorStatus  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)\s*$`)
	wrkSocketErrors = regexp.MustCompile(`(?m)^\s*Socket errors:\s+(.+?)\s*$`)
)

// parseWrk reads the report of `wrk --latency`. wrk prints the error lines only when their counts are not zero.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var errs [4]error
	r.requests, errs[0] = field(out, wrkRequests, strconv.Atoi)
	r.rps, errs[1] = field(out, wrkRPS, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	// wrk's latency units (us, ms, s, m, h) are all units time.ParseDuration knows.
	r.p50, errs[2] = field(out, wrkP50, time.ParseDuration)
	r.p99, errs[3] = field(out, wrkP99, time.ParseDuration)
	if err := errors.Join(errs[:]...); err != nil {
		return r, err
	}
	if r.requests == 0 {
		return r, errors.New("wrk completed no request")
	}
	if wrkErrorStatus.MatchString(out) {
		var err error
		if r.errorStatus, err = field(out, wrkErrorStatus, strconv.Atoi); err != nil {
			return r, err
		}
	}
	if m := wrkSocketErrors.FindStringSubmatch(out); m != nil {
		r.socketErrors = m[1]
	}
	return r, nil
}

// field parses the first submatch of re in out.
func field[T any](out string, re *regexp.Regexp, parse func(string) (T, error)) (T, error) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		var zero T
		return zero, fmt.Errorf("no match for %s in the wrk report", re)
	}
	return parse(m[1])
}

// String formats the run for the progress lines, with its failures in capitals.
func (r wrkResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%10.0f req/s  p50 %s  p99 %s", r.rps, formatLatency(r.p50), formatLatency(r.p99))
	if r.errorStatus > 0 {
		fmt.Fprintf(&b, "  %d ERROR STATUSES", r.errorStatus)
	}
	if r.socketErrors != "" {
		b.WriteString("  SOCKET ERRORS " + r.socketErrors)
	}
	return b.String()
}
