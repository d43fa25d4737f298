package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/store"
)

// The stream rows follow the workspace's events over Server-Sent Events with streamClients clients of one server
// process, on loopback, while events are emitted at streamRate per second by concurrent transactions (nothing calls the
// hub's Wake: it learns of them as of another process's, through LISTEN/NOTIFY or SQLite's commit watch). Every
// client reads every event; one in streamSampleEvery records when each arrived, and the row shows the time from the
// commit of an event's transaction to its arrival at a client (p50, p99), whether every client got every event
// once and in order, and the heap and stacks each open stream adds (both ends: the client is in the same process).
const (
	streamClients     = 1000
	streamRate        = 1000
	streamSampleEvery = 20
	streamEmitters    = 8
)

// streamP99Goal is the goal for event → client at streamRate.
const streamP99Goal = 100 * time.Millisecond

type streamResult struct {
	sent, rate      float64
	p50, p99        time.Duration
	perClient       uint64
	complete, total int
	// cpu is this process's CPU time (server and clients: both ends) per event per client, from the first event
	// emitted until every client read the last.
	cpu time.Duration
}

func (r streamResult) String() string {
	return fmt.Sprintf("%d clients  %.0f events/s emitted  commit→client p50 %s  p99 %s  %d/%d clients got every event in order  %.1f KiB/stream  CPU %s per event per client",
		r.total, r.rate, formatLatency(r.p50), formatLatency(r.p99), r.complete, r.total, float64(r.perClient)/1024, r.cpu)
}

// runStreams measures the stream rows on SQLite and PostgreSQL.
func runStreams(ctx context.Context, o options, out, log io.Writer) (int, error) {
	wanted := func(database string) bool { return o.rows.MatchString("event streams — " + database) }
	tmp, err := os.MkdirTemp("", "switchboard-bench-streams-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	type row struct {
		name string
		res  streamResult
	}
	var rows []row
	if wanted("SQLite") {
		res, err := measureStreams(ctx, "file:"+filepath.Join(tmp, "switchboard.db"), o.duration)
		if err != nil {
			return 0, fmt.Errorf("streams on SQLite: %w", err)
		}
		fmt.Fprintf(log, "event streams — SQLite  %s\n", res)
		rows = append(rows, row{"SQLite", res})
	}
	pgURL, dropPG, _ := benchPostgres(ctx, o, wanted("PostgreSQL"), log)
	defer dropPG()
	if pgURL != "" {
		res, err := measureStreams(ctx, pgURL, o.duration)
		if err != nil {
			return 0, fmt.Errorf("streams on PostgreSQL: %w", err)
		}
		fmt.Fprintf(log, "event streams — PostgreSQL  %s\n", res)
		rows = append(rows, row{"PostgreSQL", res})
	}
	if len(rows) == 0 {
		return 0, nil
	}
	failed := 0
	fmt.Fprintf(out, "\n| event streams (%d SSE clients, one process) | events/s | commit→client p50 | p99 | complete | memory/stream | CPU per event per client | goal (p99) |\n|---|---:|---:|---:|---:|---:|---:|---|\n", streamClients)
	for _, r := range rows {
		goal := fmt.Sprintf("≤ %s", streamP99Goal)
		if r.res.p99 > streamP99Goal {
			goal += " (missed)"
		}
		if r.res.complete != r.res.total {
			failed++
			goal += " — FAILED: a client missed or repeated events"
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %s | %d/%d | %.1f KiB | %.1f µs | %s |\n", r.name, r.res.rate, formatLatency(r.res.p50),
			formatLatency(r.res.p99), r.res.complete, r.res.total, float64(r.res.perClient)/1024, float64(r.res.cpu)/float64(time.Microsecond), goal)
	}
	return failed, nil
}

// streamClient is one SSE client: how many events it read and a running hash of their IDs in the order read (enough
// to tell whether it got every event once, in commit order, without keeping a thousand copies of every ID), and the
// IDs with when each arrived (sampled clients only).
type streamClient struct {
	n    int
	hash uint64
	ids  []string
	at   []time.Time
}

// idHash is FNV-1a over a sequence of event IDs, each followed by a newline.
type idHash uint64

const idHashStart idHash = 14695981039346656037

func (h idHash) add(id []byte) idHash {
	for _, b := range id {
		h = (h ^ idHash(b)) * 1099511628211
	}
	return (h ^ '\n') * 1099511628211
}

func measureStreams(ctx context.Context, dbURL string, duration time.Duration) (streamResult, error) {
	db, err := openMigrated(ctx, dbURL)
	if err != nil {
		return streamResult{}, err
	}
	defer db.Close()
	ws, err := db.Workspaces.Create(ctx, "streams")
	if err != nil {
		return streamResult{}, err
	}
	key, err := createKey(ctx, db, ws.ID, "webhooks:read")
	if err != nil {
		return streamResult{}, err
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a, err := app.New(ctx, db, app.Config{Logger: quiet})
	if err != nil {
		return streamResult{}, err
	}
	outbox, hub := a.Events, a.Streams
	srv, err := handlers.New(handlers.Config{Streams: hub, Logger: quiet, KeyRateLimit: 1 << 30,
		WorkspaceRateLimit: 1 << 30, Verifier: a.Verifier, Box: a.Box, Events: a.Events, Links: a.Links,
		Webhooks: a.Webhooks, Channels: a.Messaging, Automation: a.Automation, LLM: a.LLM, Bots: a.Bots}, db)
	if err != nil {
		return streamResult{}, err
	}
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	defer func() { stopHub(); <-hubDone }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return streamResult{}, err
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	transport := &http.Transport{MaxIdleConnsPerHost: streamClients, DisableCompression: true}
	client := &http.Client{Transport: transport}
	clients := make([]*streamClient, streamClients)
	var readers sync.WaitGroup
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	for i := range clients {
		req, _ := http.NewRequestWithContext(readCtx, http.MethodGet, "http://"+ln.Addr().String()+"/api/v1/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			return streamResult{}, err
		}
		if res.StatusCode != http.StatusOK {
			return streamResult{}, fmt.Errorf("stream answered %d", res.StatusCode)
		}
		r := bufio.NewReader(res.Body)
		if _, err := r.ReadString('\n'); err != nil { // "retry: …": the stream is registered
			return streamResult{}, err
		}
		c := &streamClient{}
		clients[i] = c
		sampled := i%streamSampleEvery == 0
		readers.Go(func() {
			defer res.Body.Close()
			// The client reads lines in place and keeps only the IDs: the row measures the server, and a client
			// that copied every data line would take CPU from it on the same two cores.
			continued, h := false, idHashStart
			for {
				line, err := r.ReadSlice('\n')
				if errors.Is(err, bufio.ErrBufferFull) {
					continued = true // the rest of a long data line follows
					continue
				}
				if err != nil {
					return
				}
				if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok && !continued {
					id = bytes.TrimSpace(id)
					c.n++
					h = h.add(id)
					c.hash = uint64(h)
					if sampled {
						c.ids = append(c.ids, string(id))
						c.at = append(c.at, time.Now())
					}
				}
				continued = false
			}
		})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perClient := (after.HeapInuse + after.StackInuse - before.HeapInuse - before.StackInuse) / streamClients

	// Events come from streamEmitters goroutines, as from concurrent requests, together at streamRate: each commits
	// on its tick the events its share of the rate has due by then in one transaction, as the product's group commit
	// does with concurrent writes (one event per transaction when it keeps up, several when a tick came late — with
	// a thousand streams on two cores, eight goroutines committing one event per transaction fell far short of the
	// rate). The clients must see the events in commit order, read back from the log afterwards.
	var mu sync.Mutex
	committed := map[string]time.Time{}
	var emitters errgroup.Group
	cpuStart := readCPU()
	start := time.Now()
	for range streamEmitters {
		emitters.Go(func() error {
			tick := time.NewTicker(time.Second * streamEmitters / streamRate)
			defer tick.Stop()
			emitted := 0
			for time.Since(start) < duration {
				<-tick.C
				due := int(time.Since(start).Seconds()*streamRate/streamEmitters) - emitted
				if due < 1 {
					continue
				}
				due = min(due, streamRate/streamEmitters/10) // at most 100 ms of the share in one transaction
				ids := make([]string, 0, due)
				err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
					ids = ids[:0]
					for range due {
						e, err := outbox.Emit(ctx, tx, ws.ID, gen.LinkCreatedEvent{Link: gen.Link{Id: "lnk_bench", Object: "link", Tags: []string{}}})
						if err != nil {
							return err
						}
						ids = append(ids, e.ID)
					}
					return nil
				})
				if err != nil {
					return err
				}
				emitted += due
				now := time.Now()
				mu.Lock()
				for _, id := range ids {
					committed[id] = now
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := emitters.Wait(); err != nil {
		return streamResult{}, err
	}
	elapsed := time.Since(start)
	time.Sleep(3 * time.Second) // the last events reach every client
	stopReading()
	readers.Wait()
	cpu, _ := cpuStart.perItem(readCPU(), max(len(committed)*streamClients, 1))
	var order []string
	for after := (store.EventPosition{}); ; {
		evs, _, err := db.Events.ReadEvents(ctx, ws.ID, after, 1000)
		if err != nil {
			return streamResult{}, err
		}
		for _, ev := range evs {
			order = append(order, ev.ID)
			after = ev.Position
		}
		if len(evs) < 1000 {
			break
		}
	}
	if len(order) != len(committed) {
		return streamResult{}, fmt.Errorf("the log holds %d events, %d were emitted", len(order), len(committed))
	}

	res := streamResult{rate: float64(len(order)) / elapsed.Seconds(), perClient: perClient, total: streamClients, cpu: cpu}
	want := idHashStart
	for _, id := range order {
		want = want.add([]byte(id))
	}
	var lat []time.Duration
	for i, c := range clients {
		if c.n == len(order) && c.hash == uint64(want) && (i%streamSampleEvery != 0 || slices.Equal(c.ids, order)) {
			res.complete++
		}
		for j, at := range c.at {
			if t, ok := committed[c.ids[j]]; ok {
				lat = append(lat, max(at.Sub(t), 0))
			}
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res, nil
}
