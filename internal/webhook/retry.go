package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultSchedule is the retry schedule of the Standard Webhooks specification's example. A schedule holds the delay of
// each attempt of a delivery: schedule[0] counted from the event (0: at once), schedule[n] counted from attempt n (see
// NextAttempt). Here that is ten attempts over a little more than three days, quick at first for blips, then spaced out
// for real outages. Operators replace it with SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE (see ParseSchedule).
var DefaultSchedule = []time.Duration{
	0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
}

// maxScheduleLen bounds a custom schedule so a typo cannot keep deliveries (and their rows) alive for months.
const maxScheduleLen = 50

// DefaultThrottledWait is the least wait after a timeout or a 429: the receiver is overloaded, and an
// early retry (the 5 s step of the schedule) would only add to its load. Operators change it with
// SWITCHBOARD_WEBHOOK_THROTTLED_WAIT (tests shorten it).
const DefaultThrottledWait = 60 * time.Second

const (
	// jitter spreads retries by ±20 % so that the deliveries of an outage do not all come back at the same instant.
	jitter = 0.2
	// maxRetryAfter bounds how far a receiver's Retry-After can push a retry, so that a wrong or hostile header
	// cannot park deliveries for ever.
	maxRetryAfter = 24 * time.Hour
)

// ParseSchedule parses a retry schedule such as "0s,5s,5m,30m,2h": comma-separated Go durations, spaces allowed.
// Returns an error if an entry is not a duration, is negative or is shorter than the entry before it, or if there
// are not 1 to 50 entries.
func ParseSchedule(s string) ([]time.Duration, error) {
	fields := strings.Split(s, ",")
	if len(fields) > maxScheduleLen {
		return nil, fmt.Errorf("webhook: retry schedule has %d entries, at most %d allowed", len(fields), maxScheduleLen)
	}
	schedule := make([]time.Duration, len(fields))
	for i, field := range fields {
		d, err := time.ParseDuration(strings.TrimSpace(field))
		switch {
		case err != nil:
			return nil, fmt.Errorf("webhook: retry schedule entry %d: %w", i+1, err)
		case d < 0:
			return nil, fmt.Errorf("webhook: retry schedule entry %d (%s) is negative", i+1, d)
		case i > 0 && d < schedule[i-1]:
			return nil, fmt.Errorf("webhook: retry schedule entry %d (%s) is shorter than the one before (%s)", i+1, d, schedule[i-1])
		}
		schedule[i] = d
	}
	return schedule, nil
}

// Result is what one attempt means for its delivery.
type Result int

const (
	// Delivered: the receiver answered 2xx.
	Delivered Result = iota + 1
	// Failed: the attempt failed and the delivery is retried while the schedule lasts.
	Failed
	// Gone: the receiver answered 410 Gone, which Standard Webhooks defines as "stop sending": the endpoint is
	// disabled and the delivery is not retried.
	Gone
)

// Failure classes of an Outcome, as the delivery log and metrics show them. Other HTTP statuses are classed by
// their hundred: "http_1xx", "http_3xx", "http_4xx", "http_5xx" (and "http_invalid" outside 100–599).
const (
	ClassTimeout           = "timeout"
	ClassConnectionRefused = "connection_refused"
	// ClassConnectionClosed: the receiver reset or closed the connection before answering.
	ClassConnectionClosed = "connection_closed"
	ClassUnreachable      = "unreachable"
	ClassDNS              = "dns"
	ClassTLS              = "tls"
	// ClassBlocked: the destination is not allowed (SSRF protection); see ErrBlocked.
	ClassBlocked = "blocked"
	// ClassCanceled: the attempt was abandoned by Switchboard itself (shutdown), not failed by the receiver.
	ClassCanceled = "canceled"
	// ClassNetwork is any other transport failure.
	ClassNetwork     = "network"
	ClassRateLimited = "http_429"
	ClassGone        = "http_410"
	classInvalid     = "http_invalid"
)

// ErrBlocked is wrapped by the errors of the SSRF guard (at registration and at dial time), so that Classify can
// tell a refused destination from an unreachable one.
var ErrBlocked = errors.New("webhook: destination not allowed")

// Outcome classifies one delivery attempt.
type Outcome struct {
	Result Result
	// Class names the failure (Class… constants, "http_4xx" and the like); empty when delivered.
	Class string
}

// Classify returns the outcome of an attempt from the response status (0 when there was no response) and the
// error of the request. A status wins over err: once the receiver has answered, an error while reading the rest of
// its response must not cause a duplicate delivery. Redirects are failures (class "http_3xx"), since following
// them would bypass the destination checks; 404 is an ordinary failure, since a receiver being deployed often
// answers 404 for a while. A status of 0 with a nil err is classed as ClassNetwork.
func Classify(status int, err error) Outcome {
	switch {
	case status >= 200 && status <= 299:
		return Outcome{Result: Delivered}
	case status == http.StatusGone:
		return Outcome{Result: Gone, Class: ClassGone}
	case status == http.StatusTooManyRequests:
		return Outcome{Result: Failed, Class: ClassRateLimited}
	case status >= 100 && status <= 599:
		return Outcome{Result: Failed, Class: fmt.Sprintf("http_%dxx", status/100)}
	case status != 0:
		return Outcome{Result: Failed, Class: classInvalid}
	}
	return Outcome{Result: Failed, Class: errorClass(err)}
}

func errorClass(err error) string {
	switch {
	case errors.Is(err, ErrBlocked):
		return ClassBlocked
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	}
	// Before the timeout test: a resolver timeout is a DNS problem, not a slow receiver.
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return ClassDNS
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ClassTimeout
	}
	switch {
	case isTLSError(err):
		return ClassTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassConnectionClosed
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ClassUnreachable
	}
	return ClassNetwork
}

func isTLSError(err error) bool {
	if errors.Is(err, http.ErrSchemeMismatch) { // an http:// server behind an https:// URL
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	// crypto/tls reports the alerts it receives or sends (handshake failure, protocol version…) as these two
	// operations, with an unexported error type.
	op, ok := errors.AsType[*net.OpError](err)
	return ok && (op.Op == "remote error" || op.Op == "local error")
}

// RetryPolicy decides when a failed delivery is attempted again.
type RetryPolicy struct {
	// Schedule holds the delay of each attempt (see DefaultSchedule); its length is the number of attempts.
	Schedule []time.Duration
	// ThrottledWait is the least wait after a timeout or a 429 (DefaultThrottledWait in production).
	ThrottledWait time.Duration
}

// NextAttempt returns when to make the next attempt of a delivery after attempt number attempt (1-based: the
// attempts made so far in the current schedule, this one included) ended with outcome, or ok=false when there is
// none: the delivery was delivered, the endpoint is gone, or the schedule is exhausted.
//
// The wait is Schedule[attempt] spread by ±20 % with rnd (math/rand/v2.Float64 in production; tests pass a fixed
// value), at least ThrottledWait after a timeout or a 429. A Retry-After value from the response (delay-seconds or an
// HTTP-date; "" when absent, ignored when malformed) can lengthen the wait up to 24 h from now but never shorten
// it: the schedule is the least a receiver gets between attempts, so a "Retry-After: 0" cannot turn retries into
// a tight loop that burns the whole schedule in seconds, and 24 h — the longest default step — bounds how long
// one header can hold a delivery back. A schedule step longer than 24 h is kept as it is.
func (p RetryPolicy) NextAttempt(attempt int, now time.Time, outcome Outcome, retryAfter string, rnd func() float64) (at time.Time, ok bool) {
	attempt = max(attempt, 1) // at least the attempt that produced outcome was made
	if outcome.Result != Failed || attempt >= len(p.Schedule) {
		return time.Time{}, false
	}
	delay := time.Duration(float64(p.Schedule[attempt]) * (1 - jitter + 2*jitter*rnd()))
	if outcome.Class == ClassTimeout || outcome.Class == ClassRateLimited {
		delay = max(delay, p.ThrottledWait)
	}
	if asked, ok := parseRetryAfter(retryAfter, now); ok {
		delay = max(delay, min(asked, maxRetryAfter))
	}
	return now.Add(delay), true
}

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3) as a wait from now; a date in the past gives a
// negative wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		// Compared in seconds: a huge value would overflow a Duration.
		return time.Duration(min(secs, uint64(maxRetryAfter/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now), true
	}
	return 0, false
}
