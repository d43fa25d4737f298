package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// scenario is one row of the table: wrk sends GET url with headers, and the row's req/s is compared with its
// baseline's, measured in the same run. Baselines (baseline == nil) are bare Echo handlers that answer the same
// bytes and nothing else; a hot path added later (redirects, webhook deliveries) is a new baseline and the
// Switchboard rows compared with it.
type scenario struct {
	name    string
	url     string
	headers []string // "Name: value", as wrk -H takes them
	// script is a wrk Lua script that chooses the path of each request (wrk -s); url is then the first path it
	// sends, for the preflight.
	script   string
	baseline *scenario
	goal     float64 // least acceptable ratio to the baseline's req/s; unused for baselines
	// minRPS, when set, is the row's goal instead: the least acceptable req/s (the ratio is still shown).
	minRPS float64
	// post is the body of a POST row (the script sends it; the preflight POSTs it with headers and postHeaders).
	// Its answers differ request by request (an event ID each), so they are not compared with the baseline's.
	post        []byte
	postHeaders []string

	body     []byte      // the response to the preflight request
	runs     []wrkResult // measured rounds
	failures []string    // non-2xx responses and socket errors of any run, warm-up included
}

// preflight sends the scenario's request once and checks that it answers 2xx and, for a row with a baseline, the
// very bytes the baseline answers: a benchmark of 401s, or of two handlers doing different work, means nothing.
// Baselines must be preflighted before the rows compared with them.
func (sc *scenario) preflight(ctx context.Context) error {
	if sc.post != nil {
		body, err := postOnce(ctx, sc.url, sc.post, append(slices.Clone(sc.headers), sc.postHeaders...))
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		sc.body = body
		return nil
	}
	body, err := fetch(ctx, sc.url, sc.headers)
	if err != nil {
		return fmt.Errorf("%s: %w", sc.name, err)
	}
	if sc.baseline != nil && !bytes.Equal(body, sc.baseline.body) {
		return fmt.Errorf("%s: the body differs from the baseline's:\n%s\nbaseline:\n%s", sc.name, body, sc.baseline.body)
	}
	sc.body = body
	return nil
}

// noRedirects answers redirects as they are: a redirect row measures the redirect, not its destination.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fetch GETs url with headers and returns the body of a 2xx or 3xx response (redirects are not followed).
func fetch(ctx context.Context, url string, headers []string) ([]byte, error) {
	return roundTrip(ctx, http.MethodGet, url, nil, headers, 399)
}

// postOnce POSTs body to url with headers and returns the body of a 2xx response.
func postOnce(ctx context.Context, url string, body []byte, headers []string) ([]byte, error) {
	return roundTrip(ctx, http.MethodPost, url, body, headers, 299)
}

// roundTrip sends one request and returns the body of a response whose status is 200 to maxStatus.
func roundTrip(ctx context.Context, method, url string, body []byte, headers []string, maxStatus int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(name, strings.TrimSpace(value))
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > maxStatus {
		return nil, fmt.Errorf("%s %s answered %s: %s", method, url, resp.Status, out)
	}
	return out, nil
}

// summary is a row's medians over its measured rounds. Each column is its own median, so one bad round moves none
// of them.
type summary struct {
	rps      float64
	p50, p99 time.Duration
	ratio    float64 // rps divided by the baseline's rps; 1 for baselines
	hasGoal  bool    // false for baselines
	goalMet  bool
}

func (sc *scenario) summary() summary {
	s := summary{
		rps: median(sc.runs, func(r wrkResult) float64 { return r.rps }),
		p50: time.Duration(median(sc.runs, func(r wrkResult) float64 { return float64(r.p50) })),
		p99: time.Duration(median(sc.runs, func(r wrkResult) float64 { return float64(r.p99) })),
	}
	s.ratio = 1
	if sc.baseline != nil {
		s.ratio = s.rps / median(sc.baseline.runs, func(r wrkResult) float64 { return r.rps })
		s.hasGoal = true
		s.goalMet = s.ratio >= sc.goal
		if sc.minRPS > 0 {
			s.goalMet = s.rps >= sc.minRPS
		}
	}
	return s
}

// median is the median of one column of a row's rounds.
func median[R any](runs []R, value func(R) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = value(r)
	}
	slices.Sort(vs)
	n := len(vs)
	if n == 0 {
		return math.NaN() // a row -rows left out (a baseline)
	}
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// printTable writes the Markdown table and a verdict per row with a goal, and returns how many rows failed.
func printTable(w io.Writer, scenarios []*scenario) (failed int) {
	fmt.Fprintln(w, "| target | req/s | p50 | p99 | ratio | goal | met |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---|")
	var verdicts []string
	for _, sc := range scenarios {
		s := sc.summary()
		goal, met := "—", "—"
		if s.hasGoal {
			goal, met = fmt.Sprintf("≥ %.2f", sc.goal), "no"
			if sc.minRPS > 0 {
				goal = fmt.Sprintf("≥ %.0f req/s", sc.minRPS)
			}
			if s.goalMet {
				met = "yes"
			}
		}
		if len(sc.failures) > 0 {
			failed++
			met = "**FAILED**"
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %.2f | %s | %s |\n",
			sc.name, s.rps, formatLatency(s.p50), formatLatency(s.p99), s.ratio, goal, met)
		switch {
		case len(sc.failures) > 0:
			verdicts = append(verdicts, fmt.Sprintf("FAILED %s: %s", sc.name, strings.Join(sc.failures, "; ")))
		case s.hasGoal && sc.minRPS > 0:
			verdict := "goal met"
			if !s.goalMet {
				verdict = "goal MISSED"
			}
			verdicts = append(verdicts, fmt.Sprintf("%s: %s at %.0f req/s, %.2f of the baseline (goal ≥ %.0f req/s)", verdict, sc.name, s.rps, s.ratio, sc.minRPS))
		case s.hasGoal && s.goalMet:
			verdicts = append(verdicts, fmt.Sprintf("goal met: %s at %.2f of the baseline (goal ≥ %.2f)", sc.name, s.ratio, sc.goal))
		case s.hasGoal:
			verdicts = append(verdicts, fmt.Sprintf("goal MISSED: %s at %.2f of the baseline (goal ≥ %.2f)", sc.name, s.ratio, sc.goal))
		}
	}
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintln(w, v)
	}
	return failed
}

// formatLatency prints latencies in milliseconds, the unit in which every row of the table is readable.
func formatLatency(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
