package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// The webhook rows measure the dispatcher with its production settings (32 workers, 4 per endpoint) delivering to
// receivers on loopback that answer 200 at once:
//
//   - throughput: a backlog of webhookBacklog deliveries (one per event, spread over webhookEndpoints endpoints) is
//     queued while no dispatcher runs; then one starts, and the row shows deliveries per second until the last one
//     is recorded as succeeded;
//   - latency: events are emitted one transaction each at webhookLatencyRate per second for the round's duration
//     (half the wrk duration), and the row shows the time from the commit of each event's transaction to its
//     receiver seeing the request. Nothing calls Wake: the dispatcher learns of the events as it would of another
//     process's, through LISTEN/NOTIFY on PostgreSQL and the WAL index on SQLite.
const (
	webhookEndpoints   = 16
	webhookBacklog     = 10_000
	webhookLatencyRate = 500
	// webhookQueueBatch is how many events one transaction queues for the backlog (queuing is not measured).
	webhookQueueBatch = 200
)

// Goals of the webhook rows.
const (
	webhookRateGoal = 1000.0
	webhookP99Goal  = time.Second
)

// webhookResult is one measured round of the dispatcher.
type webhookResult struct {
	rate float64 // deliveries per second draining the backlog
	// cpuSelf and cpuDB are the CPU time per delivery of the drain: this process's (the dispatcher, and the
	// receivers that answer it, and SQLite when it is the database) and PostgreSQL's (zero for SQLite, or when the
	// server is not on this machine).
	cpuSelf, cpuDB time.Duration
	p50, p99       time.Duration
	samples        int
}

func (r webhookResult) String() string {
	cpu := fmt.Sprintf("CPU/delivery %s", formatMicros(r.cpuSelf))
	if r.cpuDB > 0 {
		cpu += fmt.Sprintf(" + PostgreSQL %s", formatMicros(r.cpuDB))
	}
	return fmt.Sprintf("%10.0f deliveries/s  %s  commit→receiver p50 %s  p99 %s (%d events)", r.rate, cpu,
		formatLatency(r.p50), formatLatency(r.p99), r.samples)
}

// formatMicros shows a CPU time per item in microseconds.
func formatMicros(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// webhookBench is the dispatcher on one database, with its endpoints and receivers.
type webhookBench struct {
	name string
	// pgDatabase is the PostgreSQL database the bench writes to, "" on SQLite (see readCPU).
	pgDatabase string
	db         *store.DB
	box        *sealbox.Box
	guard      *egress.Guard
	ws         store.Workspace
	// outbox holds one run-time event type per endpoint, so events spread evenly over the receivers.
	outbox    *events.Outbox
	receivers []*httpServer
	arrivals  *arrivals
	runs      []webhookResult
	failures  []string
}

// arrivals records when the receivers first saw each webhook-id.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]time.Time
	n    int
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	id := r.Header.Get("webhook-id")
	_, _ = io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	if _, ok := a.seen[id]; !ok {
		a.seen[id] = now
	}
	a.n++
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (a *arrivals) at(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.seen[id]
	return t, ok
}

// startWebhookBench opens and migrates the database at dbURL and registers webhookEndpoints endpoints, each with a
// receiver of its own (as real endpoints are different hosts, each gets its own connection pool).
func startWebhookBench(ctx context.Context, database, dbURL string) (_ *webhookBench, err error) {
	db, err := openMigrated(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	box, err := sealbox.New(key)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	b := &webhookBench{name: "webhook deliveries — " + database, pgDatabase: postgresDatabase(dbURL), db: db, box: box,
		guard:    egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		arrivals: &arrivals{seen: map[string]time.Time{}}}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.ws, err = db.Workspaces.Create(ctx, "webhook bench"); err != nil {
		return nil, err
	}
	types := events.Builtin()
	b.outbox = events.NewOutbox(db, types)
	for i := range webhookEndpoints {
		if err := types.Define(events.Type{WorkspaceID: b.ws.ID, Name: eventType(i), Description: "A benchmark event.",
			Schema: map[string]any{"type": "object"}, Example: map[string]any{}}); err != nil {
			return nil, err
		}
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		rc := serve(ln, b.arrivals)
		b.receivers = append(b.receivers, rc)
		secret, err := webhook.NewSecret()
		if err != nil {
			return nil, err
		}
		if _, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: b.ws.ID, URL: rc.url + "/hook",
			Events: []string{eventType(i)}, SealSecret: func(id string) string { return box.Seal([]byte(secret), []byte(id)) }}); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// eventType is the type only endpoint i subscribes to, so each event makes one delivery.
func eventType(i int) string { return "bench.endpoint_" + strconv.Itoa(i%webhookEndpoints) }

func (b *webhookBench) close() {
	for _, rc := range b.receivers {
		rc.close()
	}
	_ = b.db.Close()
}

// dispatch runs a dispatcher with the production settings until the returned function stops it and waits for it.
func (b *webhookBench) dispatch() func() {
	d := webhook.NewDispatcher(b.db, b.box, b.guard, webhook.Config{Events: b.outbox,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// emit queues events of the types first, first+1, … in one transaction and returns their IDs and when it committed.
func (b *webhookBench) emit(ctx context.Context, first, n int) ([]string, time.Time, error) {
	ids := make([]string, 0, n)
	err := b.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for i := range n {
			data := fmt.Appendf(nil, `{"n":%d,"note":"benchmark event"}`, first+i)
			ev, err := b.outbox.EmitJSON(ctx, tx, b.ws.ID, eventType(first+i), data)
			if err != nil {
				return err
			}
			ids = append(ids, ev.ID)
		}
		return nil
	})
	return ids, time.Now(), err
}

// succeeded counts the bench workspace's succeeded deliveries.
func (b *webhookBench) succeeded(ctx context.Context) (int, error) {
	n, err := b.db.Bun().NewSelect().Table("webhook_deliveries").
		Where("workspace_id = ? AND status = ?", b.ws.ID, store.DeliverySucceeded).Count(ctx)
	return int(n), err
}

// drainTimeout bounds each wait for deliveries; running past it fails the row.
const drainTimeout = 2 * time.Minute

// drain polls until no delivery is pending (every attempt recorded), asking only whether one pending delivery
// exists: one probe of the partial index of pending deliveries, where counting them (4 ms at a backlog of 10 000 on
// PostgreSQL, every 10 ms) took a third of a core from the dispatcher it measures.
func (b *webhookBench) drain(ctx context.Context) error {
	deadline := time.Now().Add(drainTimeout)
	pending := func() *bun.SelectQuery {
		return b.db.Bun().NewSelect().Table("webhook_deliveries").Where("status = ?", store.DeliveryPending)
	}
	for {
		waiting, err := pending().Exists(ctx)
		if err != nil || !waiting {
			return err
		}
		if time.Now().After(deadline) {
			n, _ := pending().Count(ctx)
			return fmt.Errorf("%d deliveries still pending after %v", n, drainTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// drained waits for the queue to drain and checks that every delivery of the round succeeded: want more than before.
func (b *webhookBench) drained(ctx context.Context, before, want int) error {
	if err := b.drain(ctx); err != nil {
		return err
	}
	n, err := b.succeeded(ctx)
	if err == nil && n-before != want {
		err = fmt.Errorf("%d of %d deliveries succeeded", n-before, want)
	}
	return err
}

// measure runs one round: the backlog, then the steady emission for d. A round that cannot complete is recorded as
// a failure of the row; err is for a broken setup.
func (b *webhookBench) measure(ctx context.Context, d time.Duration) error {
	before, err := b.succeeded(ctx)
	if err != nil {
		return err
	}
	r, ok, err := b.measureBacklog(ctx, before)
	if err != nil || !ok {
		return err
	}
	stop := b.dispatch()
	defer stop()

	committed := map[string]time.Time{}
	tick := time.NewTicker(time.Second / webhookLatencyRate)
	defer tick.Stop()
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		ids, at, err := b.emit(ctx, i, 1)
		if err != nil {
			return err
		}
		committed[ids[0]] = at
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if err := b.drained(ctx, before+webhookBacklog, len(committed)); err != nil {
		b.failures = append(b.failures, "steady emission: "+err.Error())
		return nil
	}
	latencies := make([]time.Duration, 0, len(committed))
	for id, at := range committed {
		seen, ok := b.arrivals.at(id)
		if !ok {
			b.failures = append(b.failures, "event "+id+" succeeded but its receiver never saw it")
			return nil
		}
		latencies = append(latencies, max(seen.Sub(at), 0))
	}
	slices.Sort(latencies)
	r.p50, r.p99, r.samples = percentile(latencies, 0.50), percentile(latencies, 0.99), len(latencies)
	b.runs = append(b.runs, r)
	return nil
}

// measureBacklog queues webhookBacklog deliveries while no dispatcher runs, then measures how fast one drains them
// (ok false: the round failed, recorded in b.failures); before is the count of succeeded deliveries before.
func (b *webhookBench) measureBacklog(ctx context.Context, before int) (r webhookResult, ok bool, err error) {
	for first := 0; first < webhookBacklog; first += webhookQueueBatch {
		if _, _, err := b.emit(ctx, first, min(webhookQueueBatch, webhookBacklog-first)); err != nil {
			return r, false, err
		}
	}
	cpu := readCPU(b.pgDatabase)
	stop := b.dispatch()
	defer stop()
	start := time.Now()
	if err := b.drain(ctx); err != nil {
		b.failures = append(b.failures, "backlog: "+err.Error())
		return r, false, nil
	}
	r.rate = webhookBacklog / time.Since(start).Seconds()
	r.cpuSelf, r.cpuDB = cpu.perItem(readCPU(b.pgDatabase), webhookBacklog)
	if databaseOf(b.name) != "PostgreSQL" {
		r.cpuDB = 0 // a PostgreSQL server on the machine is idle meanwhile, or busy with something else
	}
	if err := b.drained(ctx, before, webhookBacklog); err != nil {
		b.failures = append(b.failures, "backlog: "+err.Error())
		return r, false, nil
	}
	return r, true, nil
}

// percentile returns the nearest-rank percentile p of durations (0 for none).
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// printWebhookTable writes the Markdown table of the webhook rows with a verdict per row, and returns how many rows
// failed.
func printWebhookTable(w io.Writer, benches []*webhookBench) (failed int) {
	fmt.Fprintln(w, "| target | deliveries/s | CPU per delivery: this process | PostgreSQL | commit → receiver p50 | p99 | goal | met |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|---|")
	goal := fmt.Sprintf("≥ %.0f/s, p99 < %s", webhookRateGoal, webhookP99Goal)
	var verdicts []string
	for _, b := range benches {
		if len(b.failures) > 0 || len(b.runs) == 0 {
			failed++
			fmt.Fprintf(w, "| %s | — | — | — | — | — | %s | **FAILED** |\n", b.name, goal)
			verdicts = append(verdicts, fmt.Sprintf("FAILED %s: %s", b.name, strings.Join(b.failures, "; ")))
			continue
		}
		rate := median(b.runs, func(r webhookResult) float64 { return r.rate })
		dbBound = append(dbBound, dbBoundRow{name: b.name, database: databaseOf(b.name), rate: rate, unit: "deliveries/s"})
		cpuSelf := time.Duration(median(b.runs, func(r webhookResult) float64 { return float64(r.cpuSelf) }))
		cpuDB, dbCPU := time.Duration(median(b.runs, func(r webhookResult) float64 { return float64(r.cpuDB) })), "—"
		if cpuDB > 0 {
			dbCPU = formatMicros(cpuDB)
		}
		p50 := time.Duration(median(b.runs, func(r webhookResult) float64 { return float64(r.p50) }))
		p99 := time.Duration(median(b.runs, func(r webhookResult) float64 { return float64(r.p99) }))
		met := rate >= webhookRateGoal && p99 < webhookP99Goal
		verdict := "goal met"
		if !met {
			verdict = "goal MISSED"
		}
		answer := "no"
		if met {
			answer = "yes"
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", b.name, rate, formatMicros(cpuSelf), dbCPU,
			formatLatency(p50), formatLatency(p99), goal, answer)
		verdicts = append(verdicts, fmt.Sprintf("%s: %s at %.0f deliveries/s, p99 %s (goal %s)", verdict, b.name, rate,
			formatLatency(p99), goal))
	}
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintln(w, v)
	}
	return failed
}

// runWebhooks measures the dispatcher on SQLite and, unless skipped or unreachable, PostgreSQL, in alternating rounds,
// and prints the table; it returns how many rows failed.
func runWebhooks(ctx context.Context, o options, prof *profile, out, log io.Writer) (int, error) {
	tmp, err := os.MkdirTemp("", "switchboard-bench-webhooks-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	// -rows picks the databases by the rows' names; with neither picked the section is left out.
	wanted := func(database string) bool { return o.rows.MatchString("webhook deliveries — " + database) }
	if !wanted("SQLite") && !wanted("PostgreSQL") {
		return 0, nil
	}
	var benches []*webhookBench
	if wanted("SQLite") {
		sqlite, err := startWebhookBench(ctx, "SQLite", "file:"+filepath.Join(tmp, "switchboard.db"))
		if err != nil {
			return 0, fmt.Errorf("webhooks on SQLite: %w", err)
		}
		defer sqlite.close()
		benches = append(benches, sqlite)
	}
	pgURL, dropPG, skipped := benchPostgres(ctx, o, wanted("PostgreSQL"), log)
	defer dropPG()
	if pgURL != "" {
		pg, err := startWebhookBench(ctx, "PostgreSQL", pgURL)
		if err != nil {
			return 0, fmt.Errorf("webhooks on PostgreSQL: %w", err)
		}
		defer pg.close()
		benches = append(benches, pg)
	}
	if err := prof.start(); err != nil {
		return 0, err
	}
	d := max(o.duration/2, time.Second)
	for r := 1; r <= o.rounds; r++ {
		for _, b := range benches {
			failures := len(b.failures)
			if err := b.measure(ctx, d); err != nil {
				return 0, fmt.Errorf("%s: %w", b.name, err)
			}
			if len(b.failures) > failures {
				fmt.Fprintf(log, "round %d/%d  %-45s FAILED: %s\n", r, o.rounds, b.name, b.failures[len(b.failures)-1])
				continue
			}
			fmt.Fprintf(log, "round %d/%d  %-45s %s\n", r, o.rounds, b.name, b.runs[len(b.runs)-1])
		}
	}
	fmt.Fprintf(out, "\nwebhooks: %d endpoints on loopback answering 200 at once, 32 workers (4 per endpoint); deliveries/s "+
		"draining a backlog of %d, latency of events committed one per transaction at up to %d/s for %s; medians of %d "+
		"round(s)\n\n", webhookEndpoints, webhookBacklog, webhookLatencyRate, d, o.rounds)
	failed := printWebhookTable(out, benches)
	if skipped != "" {
		fmt.Fprintf(out, "\nPostgreSQL rows skipped: %s\n", skipped)
	}
	return failed, nil
}
