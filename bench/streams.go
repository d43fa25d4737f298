package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
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
// once and in order, and the heap and stacks each open stream adds and the CPU time each event costs per client, in
// the server's process and in the clients' (streamclients.go), apart.
const (
	streamClients     = 1000
	streamRate        = 1000
	streamSampleEvery = 20
	streamEmitters    = 8
)

// streamP99Goal is the goal for event → client at streamRate.
const streamP99Goal = 100 * time.Millisecond

type streamResult struct {
	rate     float64
	p50, p99 time.Duration
	// serverMem and clientMem are the heap and stacks each open stream adds to the server's process and to the
	// clients'.
	serverMem, clientMem uint64
	complete, total      int
	// serverCPU is the server process's CPU time (the emitters and in-process SQLite included) per event per
	// client, clientCPU the client process's, from the first event emitted until every client read the last.
	serverCPU, clientCPU time.Duration
}

func (r streamResult) String() string {
	return fmt.Sprintf("%d clients  %.0f events/s emitted  commit→client p50 %s  p99 %s  %d/%d clients got every event in order  %.1f KiB/stream (server) + %.1f KiB (client)  CPU per event per client %s (server) + %s (client)",
		r.total, r.rate, formatLatency(r.p50), formatLatency(r.p99), r.complete, r.total, float64(r.serverMem)/1024,
		float64(r.clientMem)/1024, r.serverCPU, r.clientCPU)
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
	fmt.Fprintf(out, "\n| event streams (%d SSE clients, one server process) | events/s | commit→client p50 | p99 | complete | "+
		"memory/stream: server | client | CPU per event per client: server | client | goal (p99) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n", streamClients)
	for _, r := range rows {
		goal := fmt.Sprintf("≤ %s", streamP99Goal)
		if r.res.p99 > streamP99Goal {
			goal += " (missed)"
		}
		if r.res.complete != r.res.total {
			failed++
			goal += " — FAILED: a client missed or repeated events"
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %s | %d/%d | %.1f KiB | %.1f KiB | %.2f µs | %.2f µs | %s |\n", r.name, r.res.rate,
			formatLatency(r.res.p50), formatLatency(r.res.p99), r.res.complete, r.res.total, float64(r.res.serverMem)/1024,
			float64(r.res.clientMem)/1024, float64(r.res.serverCPU)/float64(time.Microsecond),
			float64(r.res.clientCPU)/float64(time.Microsecond), goal)
	}
	return failed, nil
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
	exe, err := os.Executable()
	if err != nil {
		return streamResult{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), streamClientsEnv+"=http://"+ln.Addr().String()+"/api/v1/events/stream", streamKeyEnv+"="+key)
	cmd.Stderr = os.Stderr
	toClients, err := cmd.StdinPipe()
	if err != nil {
		return streamResult{}, err
	}
	fromClients, err := cmd.StdoutPipe()
	if err != nil {
		return streamResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return streamResult{}, err
	}
	defer func() { _ = toClients.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }() // it wrote its reports, or never will
	reports := bufio.NewReader(fromClients)
	var clientMem uint64
	if line, err := reports.ReadString('\n'); err != nil {
		return streamResult{}, fmt.Errorf("the stream clients did not start: %w", err)
	} else if _, err := fmt.Sscanf(line, "ready %d", &clientMem); err != nil {
		return streamResult{}, fmt.Errorf("the stream clients said %q", line)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	serverMem := (after.HeapInuse + after.StackInuse - before.HeapInuse - before.StackInuse) / streamClients

	// Events come from streamEmitters goroutines, as from concurrent requests, together at streamRate: each commits
	// on its tick the events its share of the rate has due by then in one transaction, as the product's group commit
	// does with concurrent writes (one event per transaction when it keeps up, several when a tick came late — with
	// a thousand streams on two cores, eight goroutines committing one event per transaction fell far short of the
	// rate). The clients must see the events in commit order, read back from the log afterwards.
	var mu sync.Mutex
	committed := map[string]time.Time{}
	var emitters errgroup.Group
	cpuStart := readCPU("")
	clientCPUStart, _ := processCPU(cmd.Process.Pid)
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
	items := time.Duration(max(len(committed)*streamClients, 1))
	serverCPU, _ := cpuStart.perItem(readCPU(""), int(items))
	clientCPUEnd, _ := processCPU(cmd.Process.Pid)
	clientCPU := (clientCPUEnd - clientCPUStart) / items
	_ = toClients.Close()
	var clients []streamClientReport
	if err := json.NewDecoder(reports).Decode(&clients); err != nil {
		return streamResult{}, fmt.Errorf("the stream clients' reports: %w", err)
	}
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

	res := streamResult{rate: float64(len(order)) / elapsed.Seconds(), serverMem: serverMem, clientMem: clientMem,
		total: streamClients, serverCPU: serverCPU, clientCPU: clientCPU}
	want := idHashStart
	for _, id := range order {
		want = want.add([]byte(id))
	}
	var lat []time.Duration
	for i, c := range clients {
		if c.N == len(order) && c.Hash == uint64(want) && (i%streamSampleEvery != 0 || slices.Equal(c.IDs, order)) {
			res.complete++
		}
		for j, at := range c.At {
			if j >= len(c.IDs) {
				break
			}
			if t, ok := committed[c.IDs[j]]; ok {
				lat = append(lat, max(time.Unix(0, at).Sub(t), 0))
			}
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res, nil
}
