package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// The messaging rows measure the channel runtime with the sandbox network, pacing off, in this process:
//
//   - throughput: channelBacklog messages from one instance to channelRecipients others are queued while the sender
//     is disconnected; the row shows messages per second from its connect until the last is recorded sent;
//   - accept → sent: messages accepted one each at channelLatencyRate per second for the round's duration, from the
//     acceptance (Send returned) to the sent time in the message's status history;
//   - inbound → webhook: the recipients' message.received events, from the time the network handed the message over
//     to a signed webhook reaching a receiver on loopback (the webhook dispatcher runs beside the runtime);
//   - fairness: while one instance drains a backlog of channelFairBacklog messages, a quiet instance sends
//     channelFairRate messages a second for the round's duration: their accept → sent;
//   - scale: -channel-scale sandbox instances connected in one process (heap and goroutines per instance), then the
//     runtime restarted with a stagger of channelStagger: the time until every one is connected again and how
//     their connects spread.
const (
	channelBacklog     = 4000
	channelRecipients  = 40
	channelLatencyRate = 500
	channelStagger     = 10 * time.Second
	channelFairBacklog = 10000
	channelFairRate    = 20
)

// Goals of the messaging rows.
const (
	channelRateGoalSQLite   = 2000.0
	channelRateGoalPostgres = 1000.0
	channelSentP99Goal      = 100 * time.Millisecond
	channelInboundP99Goal   = 250 * time.Millisecond
	channelFairP99Goal      = 200 * time.Millisecond
	// channelWebhookRatioGoal is the least drain rate as a share of the webhook engine's drain measured on the same
	// database in the same round: a send is a claim, one in-process call and a recorded outcome, a delivery's shape.
	channelWebhookRatioGoal = 0.5
)

// channelResult is one measured round.
type channelResult struct {
	rate             float64
	sentP50, sentP99 time.Duration
	inP50, inP99     time.Duration
	sentN, inN       int
	// webhookRate is the webhook engine's drain of its backlog on the same database, measured right before;
	// fairP50/fairP99 the quiet instance's accept → sent while another drains channelFairBacklog, and busyRate
	// that other instance's drain meanwhile.
	webhookRate      float64
	fairP50, fairP99 time.Duration
	fairN            int
	busyRate         float64
	// cpuSelf and cpuDB are the CPU time per message of the throughput round: this process's (the service, the
	// runtime, the sandbox, the webhook dispatcher — and the database itself on SQLite) and PostgreSQL's. Receipts
	// and inbound messages still under way when the queue is empty are not in it.
	cpuSelf, cpuDB time.Duration
	// eventsPerMsg is the events written from the sender's connect until its backlog is sent, per message (the
	// receipts still on the sandbox's schedule then are not in it).
	eventsPerMsg      float64
	failures          []string
	scaleHeap         float64 // bytes of heap per connected instance
	scaleGoroutines   float64
	scaleConnect      time.Duration // time to connect channelScale instances
	restartAll        time.Duration // restart → every instance connected
	restartSpreadP10  time.Duration
	restartSpreadP90  time.Duration
	restartSpreadLast time.Duration
	// restartPeak is the most connects in one second of the restart, restartBound what the stagger allows on
	// average (the instances over the window).
	restartPeak, restartBound float64
}

// channelBench is the messaging capability over one database, with its runtime and a webhook receiver.
type channelBench struct {
	name, database string
	// pgDatabase is the PostgreSQL database the bench writes to, "" on SQLite (see readCPU).
	pgDatabase string
	db         *store.DB
	rec        *channels.Recorder
	svc        *channels.Service // over the runtime that runs now
	box        *sealbox.Box
	outbox     *events.Outbox
	ws         string
	rt         *hub.Hub
	stopRT     func()
	receiver   *httpServer
	inbound    *inboundArrivals
	goal       float64
}

func quietLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// startChannelBench opens and migrates the database, builds the messaging service with the sandbox and a runtime
// (pacing off), and registers a webhook endpoint for message.received at a receiver on loopback.
func startChannelBench(ctx context.Context, database, dbURL string, goal float64) (*channelBench, error) {
	db, err := openMigrated(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	box, err := sealbox.New(key)
	if err != nil {
		return nil, err
	}
	b := &channelBench{name: "messaging — " + database, database: database, pgDatabase: postgresDatabase(dbURL), db: db, box: box, goal: goal,
		outbox: events.NewOutbox(db, events.Builtin()), inbound: &inboundArrivals{}}
	b.rec, err = channels.NewRecorder(db, b.outbox, channels.Config{Sealer: box, Logger: quietLog(),
		Providers: []channels.Provider{sandbox.New(db.Sandbox, sandbox.Options{Logger: quietLog(),
			Delivered: sandbox.DefaultDelivered, Read: sandbox.DefaultRead})}})
	if err != nil {
		return nil, err
	}
	if err := b.startRuntime(channelStagger); err != nil {
		return nil, err
	}
	ws, err := db.Workspaces.Create(ctx, "messaging bench")
	if err != nil {
		return nil, err
	}
	b.ws = ws.ID
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	b.receiver = serve(ln, b.inbound)
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	if _, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: b.ws, URL: b.receiver.url + "/hook",
		Events: []string{"message.received"}, SealSecret: func(id string) string { return box.Seal([]byte(secret), []byte(id)) }}); err != nil {
		return nil, err
	}
	return b, nil
}

// startRuntime runs a runtime over the records until stopRT, and the service over it (the sandbox's sessions wake
// each other through the runtime that opened them).
func (b *channelBench) startRuntime(stagger time.Duration) error {
	b.rt = hub.New(b.db, b.rec, hub.Options{Rate: -1, Stagger: stagger, Logger: quietLog()})
	var err error
	if b.svc, err = channels.New(b.rec, b.rt); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.rt.Run(ctx); close(done) }()
	b.stopRT = func() { cancel(); <-done }
	return nil
}

func (b *channelBench) close() {
	b.stopRT()
	b.receiver.close()
	_ = b.db.Close()
}

// inboundArrivals takes message.received webhooks and keeps, for each, the time from the network's handing the
// message over (its received time) to the webhook's arrival.
type inboundArrivals struct {
	mu    sync.Mutex
	lat   []time.Duration
	since time.Time
}

func (a *inboundArrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var ev struct {
		Data struct {
			Message struct {
				StatusHistory []struct {
					At time.Time `json:"at"`
				} `json:"status_history"`
			} `json:"message"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&ev); err == nil && len(ev.Data.Message.StatusHistory) > 0 {
		at := ev.Data.Message.StatusHistory[0].At
		a.mu.Lock()
		if !a.since.IsZero() && at.After(a.since) {
			a.lat = append(a.lat, now.Sub(at))
		}
		a.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func (a *inboundArrivals) reset(since time.Time) {
	a.mu.Lock()
	a.lat, a.since = nil, since
	a.mu.Unlock()
}

func (a *inboundArrivals) take() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.lat)
}

// instances creates n sandbox instances that pair by themselves and connects them, eight clients at a time.
func (b *channelBench) instances(ctx context.Context, n int, prefix string) ([]store.Instance, error) {
	out := make([]store.Instance, n)
	const clients = 8
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Go(func() {
			for i := w; i < n; i += clients {
				inst, err := b.svc.Create(ctx, b.ws, channels.NewInstance{Name: fmt.Sprint(prefix, i), Provider: "sandbox",
					Config: map[string]any{"auto_pair": true}})
				if err == nil {
					_, err = b.svc.Connect(ctx, b.ws, inst.ID)
				}
				if err != nil {
					errs <- err
					return
				}
				out[i] = inst
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	for i, inst := range out {
		got, err := b.until(ctx, inst.ID, channels.StatusConnected, time.Minute)
		if err != nil {
			return nil, err
		}
		out[i] = got
	}
	return out, nil
}

// until polls an instance until it reaches a status.
func (b *channelBench) until(ctx context.Context, id string, st channels.Status, limit time.Duration) (store.Instance, error) {
	deadline := time.Now().Add(limit)
	for {
		inst, err := b.svc.Get(ctx, b.ws, id)
		if err != nil {
			return inst, err
		}
		if channels.Status(inst.Status) == st {
			return inst, nil
		}
		if time.Now().After(deadline) {
			return inst, fmt.Errorf("instance %s is %s after %v, want %s", id, inst.Status, limit, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (b *channelBench) send(ctx context.Context, from string, to store.Instance, text string) (store.Message, error) {
	addr := to.Account.Address
	m, _, err := b.svc.Send(ctx, b.ws, from, channels.MessageDraft{Type: channels.TypeText, To: &addr, Text: &text})
	return m, err
}

// waitQueue waits until an instance's send queue is empty.
func (b *channelBench) waitQueue(ctx context.Context, id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		// Whether one is left, not how many: counting a backlog of 10,000 every few milliseconds is work for the
		// database the row measures.
		left, err := b.db.Reader().NewSelect().Table("send_queue").Where("instance_id = ?", id).Exists(ctx)
		if err != nil || !left {
			return err
		}
		if time.Now().After(deadline) {
			st, err := b.db.SendQueue.Stats(ctx, id, time.Now())
			if err != nil {
				return err
			}
			return fmt.Errorf("%d messages still queued after %v", st.Depth, limit)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// measure runs the throughput and latency rounds.
func (b *channelBench) measure(ctx context.Context, d time.Duration) (channelResult, error) {
	var r channelResult
	stopDispatch := b.dispatch()
	defer stopDispatch()
	all, err := b.instances(ctx, channelRecipients+1, "bench")
	if err != nil {
		return r, err
	}
	sender, recipients := all[0], all[1:]

	// Throughput: a backlog queued while the sender is disconnected.
	if _, err := b.svc.Disconnect(ctx, b.ws, sender.ID); err != nil {
		return r, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < channelBacklog; i += 8 {
				if _, err := b.send(ctx, sender.ID, recipients[i%len(recipients)], fmt.Sprint("backlog ", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	if _, err := b.svc.Connect(ctx, b.ws, sender.ID); err != nil {
		return r, err
	}
	if _, err := b.until(ctx, sender.ID, channels.StatusConnected, time.Minute); err != nil {
		return r, err
	}
	eventsBefore, err := b.db.Reader().NewSelect().Table("events").Count(ctx)
	if err != nil {
		return r, err
	}
	start, cpu := time.Now(), readCPU(b.pgDatabase)
	if err := b.waitQueue(ctx, sender.ID, 5*time.Minute); err != nil {
		r.failures = append(r.failures, "backlog: "+err.Error())
		return r, nil
	}
	r.rate = channelBacklog / time.Since(start).Seconds()
	r.cpuSelf, r.cpuDB = cpu.perItem(readCPU(b.pgDatabase), channelBacklog)
	eventsAfter, err := b.db.Reader().NewSelect().Table("events").Count(ctx)
	if err != nil {
		return r, err
	}
	r.eventsPerMsg = float64(eventsAfter-eventsBefore) / channelBacklog

	// Accept → sent, and inbound → webhook, at a steady rate.
	roundStart := time.Now()
	b.inbound.reset(roundStart)
	var mu sync.Mutex
	var acc []accepted
	var refused []error
	tick := time.NewTicker(time.Second / channelLatencyRate)
	deadline := time.Now().Add(d)
	i := 0
	for time.Now().Before(deadline) {
		<-tick.C
		i++
		n := i
		wg.Go(func() {
			m, err := b.send(ctx, sender.ID, recipients[n%len(recipients)], fmt.Sprint("steady ", n))
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			acc = append(acc, accepted{m.ID, at})
		})
	}
	tick.Stop()
	wg.Wait()
	if len(refused) > 0 {
		r.failures = append(r.failures, fmt.Sprintf("steady: %d of %d sends refused (the first: %v)", len(refused), i, refused[0]))
	}
	if err := b.waitQueue(ctx, sender.ID, time.Minute); err != nil {
		r.failures = append(r.failures, "steady: "+err.Error())
		return r, nil
	}
	lat, err := b.sentAfter(ctx, sender.ID, acc)
	if err != nil {
		return r, err
	}
	r.sentN, r.sentP50, r.sentP99 = len(lat), percentile(lat, 0.50), percentile(lat, 0.99)
	// The webhooks of the last inbound messages: wait for them to arrive.
	want := len(acc) * 9 / 10
	for end := time.Now().Add(30 * time.Second); len(b.inbound.take()) < want && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	in := b.inbound.take()
	r.inN, r.inP50, r.inP99 = len(in), percentile(in, 0.50), percentile(in, 0.99)
	if err := b.fairness(ctx, d, sender, recipients, &r); err != nil {
		return r, err
	}
	for _, inst := range all {
		if err := b.svc.Delete(ctx, b.ws, inst.ID); err != nil {
			return r, err
		}
	}
	return r, nil
}

// accepted is a message the service accepted, and when.
type accepted struct {
	id string
	at time.Time
}

// sentAfter is, for each accepted message of an instance that was sent, the time from its acceptance to its sent
// step.
func (b *channelBench) sentAfter(ctx context.Context, instanceID string, acc []accepted) ([]time.Duration, error) {
	var lat []time.Duration
	for _, a := range acc {
		m, err := b.svc.GetMessage(ctx, b.ws, instanceID, a.id)
		if err != nil {
			return nil, err
		}
		for _, h := range m.StatusHistory {
			if h.Status == "sent" {
				lat = append(lat, max(h.At.Sub(a.at), 0))
			}
		}
	}
	return lat, nil
}

// fairness queues channelFairBacklog messages of the sender while it is disconnected, connects it, and while it
// drains them has a quiet instance (the first recipient) send channelFairRate messages a second to another
// recipient for d: the quiet instance's accept → sent, and the busy sender's drain meanwhile.
func (b *channelBench) fairness(ctx context.Context, d time.Duration, sender store.Instance, recipients []store.Instance, r *channelResult) error {
	if _, err := b.svc.Disconnect(ctx, b.ws, sender.ID); err != nil {
		return err
	}
	const clients = 32
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Go(func() {
			for i := w; i < channelFairBacklog; i += clients {
				if _, err := b.send(ctx, sender.ID, recipients[1+i%(len(recipients)-1)], fmt.Sprint("busy ", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if _, err := b.svc.Connect(ctx, b.ws, sender.ID); err != nil {
		return err
	}
	if _, err := b.until(ctx, sender.ID, channels.StatusConnected, time.Minute); err != nil {
		return err
	}
	start := time.Now()
	quiet, to := recipients[0], recipients[1]
	var mu sync.Mutex
	var acc []accepted
	var refused []error
	offered := 0
	tick := time.NewTicker(time.Second / channelFairRate)
	for end := time.Now().Add(d); time.Now().Before(end); offered++ {
		<-tick.C
		n := offered
		wg.Go(func() {
			m, err := b.send(ctx, quiet.ID, to, fmt.Sprint("quiet ", n))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			acc = append(acc, accepted{m.ID, time.Now()})
		})
	}
	tick.Stop()
	wg.Wait()
	// A refused send is a failure of the row, not a message left out of its latencies; fewer offered than the rate
	// times the window means the ticker fell behind (a loaded machine), which the log line's count shows.
	if len(refused) > 0 {
		r.failures = append(r.failures, fmt.Sprintf("fairness: %d of %d quiet sends refused (the first: %v)",
			len(refused), offered, refused[0]))
	}
	if err := b.waitQueue(ctx, quiet.ID, time.Minute); err != nil {
		r.failures = append(r.failures, "fairness, quiet instance: "+err.Error())
		return nil
	}
	lat, err := b.sentAfter(ctx, quiet.ID, acc)
	if err != nil {
		return err
	}
	r.fairN, r.fairP50, r.fairP99 = len(lat), percentile(lat, 0.50), percentile(lat, 0.99)
	if len(lat) < len(acc) {
		r.failures = append(r.failures, fmt.Sprintf("fairness: %d of %d quiet messages sent", len(lat), len(acc)))
	}
	if err := b.waitQueue(ctx, sender.ID, 5*time.Minute); err != nil {
		r.failures = append(r.failures, "fairness, busy instance: "+err.Error())
		return nil
	}
	r.busyRate = channelFairBacklog / time.Since(start).Seconds()
	return nil
}

// dispatch runs a webhook dispatcher beside the runtime until the returned function stops it.
func (b *channelBench) dispatch() func() {
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	d := webhook.NewDispatcher(b.db, b.box, guard, webhook.Config{Events: b.outbox, Logger: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// scale connects n instances, measures what they hold, restarts the runtime and measures the reconnects.
func (b *channelBench) scale(ctx context.Context, n int, r *channelResult) error {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	insts, err := b.instances(ctx, n, "scale")
	if err != nil {
		return err
	}
	r.scaleConnect = time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r.scaleHeap = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / float64(n)
	r.scaleGoroutines = float64(runtime.NumGoroutine()-goroutines) / float64(n)

	b.stopRT()
	restart := time.Now().UTC()
	if err := b.startRuntime(channelStagger); err != nil {
		return err
	}
	var connectedAt []time.Duration
	deadline := time.Now().Add(channelStagger + 2*time.Minute)
	for {
		// A count while waiting (the rows once at the end): reading every connected row 20 times a second loaded
		// the database the restart writes to.
		connected := b.db.Bun().NewSelect().Model((*store.Instance)(nil)).Where("workspace_id = ?", b.ws).
			Where("status = ?", channels.StatusConnected).Where("status_since > ?", restart)
		count, err := connected.Count(ctx)
		if err != nil {
			return err
		}
		var rows []store.Instance
		if int64(count) == int64(len(insts)) {
			if err := b.db.Bun().NewSelect().Model(&rows).Column("status_since").Where("workspace_id = ?", b.ws).
				Where("status = ?", channels.StatusConnected).Where("status_since > ?", restart).Scan(ctx); err != nil {
				return err
			}
		}
		if int64(count) == int64(len(insts)) && len(rows) == len(insts) {
			for _, row := range rows {
				connectedAt = append(connectedAt, row.StatusSince.Sub(restart))
			}
			break
		}
		if time.Now().After(deadline) {
			r.failures = append(r.failures, fmt.Sprintf("restart: %d of %d connected again", len(rows), len(insts)))
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(connectedAt)
	r.restartAll = connectedAt[len(connectedAt)-1]
	r.restartSpreadP10, r.restartSpreadP90 = percentile(connectedAt, 0.10), percentile(connectedAt, 0.90)
	r.restartSpreadLast = connectedAt[len(connectedAt)-1]
	perSecond := map[time.Duration]int{}
	for _, d := range connectedAt {
		perSecond[d/time.Second]++
		r.restartPeak = max(r.restartPeak, float64(perSecond[d/time.Second]))
	}
	r.restartBound = float64(n) / min(channelStagger, time.Duration(n)*50*time.Millisecond).Seconds()
	if r.restartAll > channelStagger+channelStagger/10 {
		r.failures = append(r.failures, fmt.Sprintf("restart: the last of %d instances connected after %s, beyond the %s stagger", n,
			r.restartAll.Round(time.Millisecond), channelStagger))
	}
	return nil
}

// runChannels measures the messaging rows on SQLite and, unless skipped or unreachable, PostgreSQL, and prints
// their table; it returns how many rows failed.
func runChannels(ctx context.Context, o options, prof *profile, out, log io.Writer) (int, error) {
	tmp, err := os.MkdirTemp("", "switchboard-bench-channels-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	type target struct {
		database, url string
		goal          float64
	}
	// -rows picks the databases by the rows' names; with neither picked the section is left out.
	wanted := func(database string) bool { return o.rows.MatchString("messaging — " + database) }
	if !wanted("SQLite") && !wanted("PostgreSQL") {
		return 0, nil
	}
	var targets []target
	if wanted("SQLite") {
		targets = append(targets, target{"SQLite", "file:" + filepath.Join(tmp, "switchboard.db"), channelRateGoalSQLite})
	}
	pgURL, dropPG, skipped := benchPostgres(ctx, o, wanted("PostgreSQL"), log)
	defer dropPG()
	if pgURL != "" {
		targets = append(targets, target{"PostgreSQL", pgURL, channelRateGoalPostgres})
	}
	if err := prof.start(); err != nil {
		return 0, err
	}
	d := max(o.duration/2, time.Second)
	failed := 0
	var fairRows []string
	fmt.Fprintf(out, "\nmessaging: the sandbox network in this process, pacing off, receipts on the sandbox's schedule; "+
		"backlog of %d messages to %d chats; accept → sent at %d/s for %s; inbound → signed webhook on loopback; "+
		"%d instances, restart with a %s stagger; medians of %d round(s)\n\n", channelBacklog, channelRecipients,
		channelLatencyRate, d, o.channelScale, channelStagger, o.rounds)
	fmt.Fprintln(out, "| database | sent/s (goal) | accept→sent p50 / p99 (goal p99 < 100 ms) | inbound→webhook p50 / p99 (goal p99 < 250 ms) | per instance | restart: all connected, connects p10–p90, peak connects/s |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, t := range targets {
		// The webhook engine's drain on the same kind of database, in the same rounds, is the scale of the
		// messaging drain (its own SQLite file; the same PostgreSQL database).
		whURL := t.url
		if t.database == "SQLite" {
			whURL = "file:" + filepath.Join(tmp, "webhooks.db")
		}
		wb, err := startWebhookBench(ctx, t.database, whURL)
		if err != nil {
			return failed, fmt.Errorf("webhooks on %s: %w", t.database, err)
		}
		b, err := startChannelBench(ctx, t.database, t.url, t.goal)
		if err != nil {
			wb.close()
			return failed, fmt.Errorf("messaging on %s: %w", t.database, err)
		}
		var runs []channelResult
		for round := 1; round <= o.rounds && !o.scaleOnly; round++ {
			before, err := wb.succeeded(ctx)
			if err != nil {
				return failed, err
			}
			wr, ok, err := wb.measureBacklog(ctx, before)
			if err != nil {
				return failed, fmt.Errorf("%s: webhook drain: %w", b.name, err)
			}
			r, err := b.measure(ctx, d)
			if err != nil {
				b.close()
				return failed, fmt.Errorf("%s: %w", b.name, err)
			}
			if ok {
				r.webhookRate = wr.rate
			} else {
				r.failures = append(r.failures, wb.failures...)
			}
			fmt.Fprintf(log, "round %d/%d  %-30s webhook drain %.0f/s (ratio %.2f); fairness: quiet instance accept→sent p50 %s p99 %s (%d), busy instance %.0f sent/s\n",
				round, o.rounds, b.name, r.webhookRate, ratio(r.rate, r.webhookRate), formatLatency(r.fairP50), formatLatency(r.fairP99), r.fairN, r.busyRate)
			fmt.Fprintf(log, "round %d/%d  %-30s %8.0f sent/s  CPU/message %s + PostgreSQL %s  events/message %.1f  accept→sent p50 %s p99 %s (%d)  inbound→webhook p50 %s p99 %s (%d) %v\n",
				round, o.rounds, b.name, r.rate, formatMicros(r.cpuSelf), formatMicros(r.cpuDB), r.eventsPerMsg, formatLatency(r.sentP50), formatLatency(r.sentP99), r.sentN,
				formatLatency(r.inP50), formatLatency(r.inP99), r.inN, r.failures)
			runs = append(runs, r)
		}
		var scale channelResult
		if o.channelScale > 0 {
			if err := b.scale(ctx, o.channelScale, &scale); err != nil {
				b.close()
				return failed, fmt.Errorf("%s: scale: %w", b.name, err)
			}
		}
		fmt.Fprintf(log, "scale %-30s %d instances connected in %s, %.1f KiB heap and %.2f goroutines each; restart: all in %s, p10 %s p90 %s, peak %.0f connects/s (stagger's average %.0f/s) %v\n",
			b.name, o.channelScale, scale.scaleConnect.Round(time.Millisecond), scale.scaleHeap/1024, scale.scaleGoroutines,
			scale.restartAll.Round(time.Millisecond), scale.restartSpreadP10.Round(time.Millisecond),
			scale.restartSpreadP90.Round(time.Millisecond), scale.restartPeak, scale.restartBound, scale.failures)
		b.close()
		wb.close()
		med := func(f func(channelResult) float64) float64 {
			var v []float64
			for _, r := range runs {
				v = append(v, f(r))
			}
			if len(v) == 0 {
				return 0 // -scale-only: no rounds
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		ms := func(f func(channelResult) time.Duration) string {
			return formatLatency(time.Duration(med(func(r channelResult) float64 { return float64(f(r)) })))
		}
		rate := med(func(r channelResult) float64 { return r.rate })
		dbBound = append(dbBound, dbBoundRow{name: "messages sent (sandbox) — " + t.database, database: t.database, rate: rate, unit: "sent/s"})
		var failures []string
		for _, r := range append(runs, scale) {
			failures = append(failures, r.failures...)
		}
		mark := func(ok bool) string {
			if ok {
				return "✓"
			}
			return "✗"
		}
		drainRatio := med(func(r channelResult) float64 { return ratio(r.rate, r.webhookRate) })
		fairP99 := time.Duration(med(func(r channelResult) float64 { return float64(r.fairP99) }))
		fairRows = append(fairRows, fmt.Sprintf("| %s | %.0f | %.0f | %.2f (≥ %.1f %s) | %s / %s %s | %.0f |", t.database,
			rate, med(func(r channelResult) float64 { return r.webhookRate }), drainRatio, channelWebhookRatioGoal,
			mark(drainRatio >= channelWebhookRatioGoal), ms(func(r channelResult) time.Duration { return r.fairP50 }),
			formatLatency(fairP99), mark(fairP99 < channelFairP99Goal), med(func(r channelResult) float64 { return r.busyRate })))
		sentP99 := time.Duration(med(func(r channelResult) float64 { return float64(r.sentP99) }))
		inP99 := time.Duration(med(func(r channelResult) float64 { return float64(r.inP99) }))
		fmt.Fprintf(out, "| %s | %.0f (≥ %.0f %s) | %s / %s %s | %s / %s %s | %.1f KiB heap, %.2f goroutines | %s, %s–%s (stagger %s), peak %.0f/s (average %.0f/s) |\n",
			t.database, rate, t.goal, mark(rate >= t.goal),
			ms(func(r channelResult) time.Duration { return r.sentP50 }), formatLatency(sentP99), mark(sentP99 < channelSentP99Goal),
			ms(func(r channelResult) time.Duration { return r.inP50 }), formatLatency(inP99), mark(inP99 < channelInboundP99Goal),
			scale.scaleHeap/1024, scale.scaleGoroutines, scale.restartAll.Round(100*time.Millisecond),
			scale.restartSpreadP10.Round(100*time.Millisecond), scale.restartSpreadP90.Round(100*time.Millisecond), channelStagger, scale.restartPeak, scale.restartBound)
		if len(failures) > 0 {
			failed++
			fmt.Fprintf(out, "\n%s FAILED: %v\n", b.name, failures)
		}
	}
	if len(fairRows) > 0 {
		fmt.Fprintf(out, "\nmessaging drain against the webhook drain of the same rounds and database; fairness: a quiet "+
			"instance sending %d/s for %s while another drains %d queued messages\n\n", channelFairRate, d, channelFairBacklog)
		fmt.Fprintln(out, "| database | sent/s | webhook deliveries/s | ratio (goal) | quiet instance accept→sent p50 / p99 (goal p99 < 200 ms) | busy instance sent/s meanwhile |")
		fmt.Fprintln(out, "|---|---:|---:|---|---|---:|")
		for _, row := range fairRows {
			fmt.Fprintln(out, row)
		}
	}
	if skipped != "" {
		fmt.Fprintf(out, "\nPostgreSQL messaging rows skipped: %s\n", skipped)
	}
	return failed, nil
}

// ratio is a/b, 0 when b is.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
