package webhook

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/store"
)

// Config tunes the Dispatcher; zero values take the defaults.
type Config struct {
	// Schedule is the retry schedule (default DefaultSchedule; SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE).
	Schedule []time.Duration
	// ThrottledWait is the least wait after a timeout or a 429 (default DefaultThrottledWait, 60 s).
	ThrottledWait time.Duration
	// Timeout bounds one attempt (default 15 s); Lease, how long a claimed delivery is held, must exceed it
	// (default Timeout + 1 min): a dispatcher that dies mid-attempt releases its deliveries when the lease runs out.
	Timeout time.Duration
	Lease   time.Duration
	// Workers is how many attempts run at once (default 32); PerEndpoint caps those of one endpoint (default 4), so a
	// slow receiver holds at most that many workers and never delays the others.
	Workers     int
	PerEndpoint int
	// Poll is how often an idle dispatcher looks for due deliveries (default 250 ms). It is woken sooner when
	// deliveries are queued: by Wake in this process, by LISTEN/NOTIFY on PostgreSQL, and on SQLite by any commit
	// (seen in the WAL index within 10 ms).
	Poll time.Duration
	// DisableAfter disables an endpoint that has failed without a success for this long (default 5 days).
	DisableAfter time.Duration
	// Retention is how long events, their deliveries and attempts are kept (default 30 days); PruneEvery is how
	// often they are pruned (default hourly, and once at start). Events with a pending delivery are always kept.
	Retention  time.Duration
	PruneEvery time.Duration
	// Events records the operational events (an endpoint disabled, a delivery exhausted) in the transaction of the
	// attempt that caused them (default: an outbox of the built-in types).
	Events *events.Outbox
	// Limiter enforces the endpoints' rate limits (default: in this process only; a shared one, such as
	// redislimit's, makes an endpoint's rate hold across every dispatcher of the database).
	Limiter ratelimit.Limiter
	Logger  *slog.Logger
}

// Defaults of Config.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultWorkers      = 32
	DefaultPerEndpoint  = 4
	DefaultDisableAfter = 5 * 24 * time.Hour
	DefaultRetention    = 30 * 24 * time.Hour
)

// maxRecordBatch bounds how many attempts one transaction records.
const maxRecordBatch = 128

// Dispatcher delivers queued webhooks: it claims due deliveries with a lease, signs and sends them through the
// SSRF-guarded client, and records every attempt with its consequences. Any number of dispatchers may run against
// one PostgreSQL database; on SQLite run one per database.
//
// An endpoint's rate limit is enforced by Config.Limiter: per process by default, in which case with several
// processes on one database a receiver may get up to that many times its rate.
type Dispatcher struct {
	db       *store.DB
	recorder *Recorder
	sender   *Sender
	cfg      Config
	retry    RetryPolicy
	log      *slog.Logger
	wake     chan struct{}
	limiter  ratelimit.Limiter
	metrics  *metrics
	// results carries finished attempts to the recorder, which writes them in batches.
	results chan AttemptResult

	mu sync.Mutex
	// inFlight counts the requests running per endpoint (the in-flight cap).
	inFlight map[string]int
	// throttled holds the endpoints out of rate until the time given: they are not claimed before it.
	throttled map[string]time.Time
	// running counts the claimed deliveries whose attempt is not recorded yet.
	running int
	idle    *sync.Cond
}

// NewDispatcher returns a dispatcher; Run starts it.
func NewDispatcher(db *store.DB, box *Box, guard *egress.Guard, cfg Config) *Dispatcher {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.ThrottledWait <= 0 {
		cfg.ThrottledWait = DefaultThrottledWait
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Lease <= cfg.Timeout {
		cfg.Lease = cfg.Timeout + time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = DefaultPerEndpoint
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.DisableAfter <= 0 {
		cfg.DisableAfter = DefaultDisableAfter
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New()
	}
	d := &Dispatcher{db: db, recorder: NewRecorder(db, cfg.Events, cfg.DisableAfter), sender: NewSender(box, guard, cfg.Timeout),
		cfg: cfg, retry: RetryPolicy{Schedule: cfg.Schedule, ThrottledWait: cfg.ThrottledWait}, log: cfg.Logger,
		wake: make(chan struct{}, 1), limiter: cfg.Limiter, results: make(chan AttemptResult, cfg.Workers),
		inFlight: map[string]int{}, throttled: map[string]time.Time{}}
	d.idle = sync.NewCond(&d.mu)
	d.metrics = newMetrics(d)
	return d
}

// Sender is the dispatcher's sender, for the API's test pings: the same server key, guard and timeout.
func (d *Dispatcher) Sender() *Sender { return d.sender }

// Collectors are the dispatcher's Prometheus metrics; register them on the server's registry.
func (d *Dispatcher) Collectors() []prometheus.Collector { return d.metrics.collectors() }

// Wake makes an idle dispatcher look for due deliveries now (after this process queued some).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers (and prunes old events) until ctx ends, then waits for the attempts in flight to be recorded (they
// finish or time out), so that a graceful shutdown loses nothing and leaves no delivery leased.
func (d *Dispatcher) Run(ctx context.Context) error {
	var background sync.WaitGroup
	// On PostgreSQL, a transaction that queued deliveries notifies; deliveries may also have been queued while the
	// listener was down. (On SQLite, Listen returns at once: the commit watch below wakes the dispatcher.)
	background.Go(func() {
		d.db.Listen(ctx, store.Listener{Channel: store.DeliveriesChannel, Connected: d.Wake, Notified: func(string) { d.Wake() }})
	})
	if w := d.db.WatchCommits(); w != nil {
		background.Go(func() { d.watch(ctx, w) })
	}
	background.Go(func() { d.prune(ctx) })
	recorded := make(chan struct{})
	go func() { d.record(); close(recorded) }()

	for ctx.Err() == nil {
		started, retryAt, err := d.claimAndStart(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhook dispatcher could not claim deliveries", "error", err)
		}
		if started > 0 && err == nil {
			continue
		}
		wait := d.cfg.Poll
		if !retryAt.IsZero() {
			wait = max(min(wait, time.Until(retryAt)), time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
	d.mu.Lock()
	for d.running > 0 {
		d.idle.Wait()
	}
	d.mu.Unlock()
	close(d.results)
	<-recorded
	background.Wait()
	return nil
}

// claimed is a leased delivery with what sending it needs.
type claimed struct {
	delivery store.Delivery
	endpoint store.WebhookEndpoint
	event    store.Event
}

// claimAndStart claims as many due deliveries as there are free workers and starts an attempt for each that its
// endpoint's in-flight cap and rate allow; the others are given back. retryAt is when a rate-limited endpoint has
// its next token (zero when none is limited): the loop looks again then.
func (d *Dispatcher) claimAndStart(ctx context.Context) (started int, retryAt time.Time, err error) {
	now := time.Now()
	d.mu.Lock()
	free := d.cfg.Workers - d.running
	var exclude []string
	for id, n := range d.inFlight {
		if n >= d.cfg.PerEndpoint {
			exclude = append(exclude, id)
		}
	}
	for id, until := range d.throttled {
		if !now.Before(until) {
			delete(d.throttled, id)
			continue
		}
		exclude = append(exclude, id)
		retryAt = earliest(retryAt, until)
	}
	d.mu.Unlock()
	if free <= 0 {
		return 0, retryAt, nil
	}
	ds, err := d.db.Deliveries.Claim(ctx, now, d.cfg.Lease, free, exclude)
	if err != nil || len(ds) == 0 {
		return 0, retryAt, err
	}
	// Giving deliveries back must not fail because shutdown began meanwhile: they would stay leased for a lease.
	release := func(ids []string, notBefore time.Time) error {
		return d.db.Deliveries.Release(context.WithoutCancel(ctx), ids, notBefore)
	}
	endpoints, events, err := d.db.Deliveries.ForSending(ctx, ds)
	if err != nil {
		ids := make([]string, len(ds))
		for i, dl := range ds {
			ids[i] = dl.ID
		}
		return 0, retryAt, errors.Join(err, release(ids, time.Time{}))
	}
	// Deliveries that may not start now, by when they may.
	giveBack := map[time.Time][]string{}
	// Admission is judged at the moment the attempts start, not when the claim began: a claim slowed down by the
	// database, followed by a quick one, would otherwise send two deliveries closer together than the rate.
	admitAt := time.Now()
	for _, dl := range ds {
		e, ok := endpoints[dl.EndpointID]
		ev, ok2 := events[dl.EventID]
		if !ok || !ok2 {
			continue // deleted since the claim, and the delivery with it
		}
		d.mu.Lock()
		notBefore, ok := d.admit(e, admitAt)
		if !ok {
			d.mu.Unlock()
			giveBack[notBefore] = append(giveBack[notBefore], dl.ID)
			if !notBefore.IsZero() {
				retryAt = earliest(retryAt, notBefore)
			}
			continue
		}
		d.inFlight[e.ID]++
		d.running++
		d.mu.Unlock()
		started++
		go d.attempt(claimed{delivery: dl, endpoint: e, event: ev})
	}
	for notBefore, ids := range giveBack {
		err = errors.Join(err, release(ids, notBefore))
	}
	return started, retryAt, err
}

// admit decides whether a delivery to e may start now; when it may not, notBefore is when it may (zero: as soon as
// an attempt of e ends). d.mu must be held.
func (d *Dispatcher) admit(e store.WebhookEndpoint, now time.Time) (notBefore time.Time, ok bool) {
	if d.inFlight[e.ID] >= d.cfg.PerEndpoint {
		return time.Time{}, false
	}
	if until, limited := d.throttled[e.ID]; limited && now.Before(until) {
		return until, false
	}
	if e.RateLimit == nil {
		return time.Time{}, true
	}
	dec := d.limiter.Take("webhook:"+e.ID, ratelimit.Policy{Name: "webhook", Quota: *e.RateLimit, Window: time.Second}, now)
	if dec.Allowed {
		return time.Time{}, true
	}
	until := now.Add(dec.RetryAfter)
	d.throttled[e.ID] = until
	return until, false
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// attempt makes one attempt of a claimed delivery and hands the result to the recorder. It runs detached from Run's
// context: an attempt that started is finished and recorded even during shutdown.
func (d *Dispatcher) attempt(c claimed) {
	dl := c.delivery
	sent, err := d.sender.Send(context.Background(), c.endpoint, c.event)
	d.mu.Lock()
	if d.inFlight[dl.EndpointID]--; d.inFlight[dl.EndpointID] <= 0 {
		delete(d.inFlight, dl.EndpointID)
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Error("webhook attempt could not be prepared; the lease will expire and it is retried", "delivery_id", dl.ID, "error", err)
		d.finished(1)
		return
	}
	d.metrics.observeAttempt(sent)
	res := AttemptResult{DeliveryID: dl.ID, LeaseUntil: dl.LeaseUntil, StartedAt: sent.StartedAt,
		Duration: sent.Duration, StatusCode: sent.StatusCode, Excerpt: sent.Excerpt,
		Succeeded: sent.Outcome.Result == Delivered, Gone: sent.Outcome.Result == Gone}
	if sent.Outcome.Class != "" {
		class := sent.Outcome.Class
		res.ErrorClass = &class
	}
	if next, ok := d.retry.NextAttempt(dl.Attempts-dl.ScheduleStart+1, time.Now(), sent.Outcome, sent.RetryAfter, rand.Float64); ok {
		res.NextAttemptAt = &next
	}
	d.results <- res
}

// finished counts n claimed deliveries as done and lets the loop claim more.
func (d *Dispatcher) finished(n int) {
	d.mu.Lock()
	d.running -= n
	d.idle.Broadcast()
	d.mu.Unlock()
	d.Wake()
}

// record writes the attempts the workers finish, as many per transaction as are waiting, until results is closed.
func (d *Dispatcher) record() {
	for first := range d.results {
		batch := []AttemptResult{first}
	more:
		for len(batch) < maxRecordBatch {
			select {
			case r, ok := <-d.results:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		d.recordBatch(batch)
		d.finished(len(batch))
	}
}

// recordBatch records attempts in one transaction or, when that fails, one by one, so that one attempt that cannot
// be recorded does not hold back the others. An attempt that is not recorded keeps its lease: when it runs out the
// delivery is attempted again.
func (d *Dispatcher) recordBatch(batch []AttemptResult) {
	fxs, err := d.recorder.Record(context.Background(), batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			d.recordBatch([]AttemptResult{r})
		}
		return
	}
	if err != nil {
		d.log.Error("webhook attempt could not be recorded; the lease will expire and it is retried", "delivery_id", batch[0].DeliveryID, "error", err)
		return
	}
	for _, fx := range fxs {
		if fx.Missing || fx.Superseded {
			continue
		}
		d.metrics.observeDelivery(fx.Delivery.Status)
		if fx.EndpointDisabled != "" {
			d.log.Info("webhook endpoint disabled", "webhook_id", fx.Delivery.EndpointID, "workspace_id", fx.Delivery.WorkspaceID, "reason", fx.EndpointDisabled)
		}
	}
}

// prune deletes events older than the retention period at start and then every PruneEvery, until ctx ends.
func (d *Dispatcher) prune(ctx context.Context) {
	for {
		cutoff := time.Now().Add(-d.cfg.Retention)
		n, err := d.db.Events.Prune(ctx, cutoff, store.PruneBatch)
		if n > 0 {
			d.metrics.pruned.Add(float64(n))
			d.log.Info("pruned webhook events past retention", "events", n, "created_before", cutoff.UTC().Format(time.RFC3339))
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("could not prune webhook events", "error", err)
		}
		timer := time.NewTimer(d.cfg.PruneEvery)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// commitCheck is how often the dispatcher looks at the SQLite WAL index for commits of other processes (or of code
// that queued deliveries without calling Wake).
const commitCheck = 10 * time.Millisecond

// watch wakes the dispatcher when anything was committed to the SQLite database, until ctx ends.
func (d *Dispatcher) watch(ctx context.Context, w *store.CommitWatch) {
	defer w.Close()
	tick := time.NewTicker(commitCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if w.Changed() {
				d.Wake()
			}
		}
	}
}
