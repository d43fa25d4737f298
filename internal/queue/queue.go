// Package queue is the engine of the durable work queues kept in the database: webhook deliveries and the messaging
// send queue are its clients. The engine claims due items with a lease, runs an attempt of each on a bounded pool of
// workers, caps the attempts of one target (an endpoint, an instance) running at once, and hands the outcomes to its
// client to record in batches. What an item is, how it is claimed and what an attempt records stay the client's.
//
// The guarantees the clients build on:
//
//   - Claims lease: an item claimed by a process that dies is due again once its lease ran out, and keeps its ID.
//     On PostgreSQL a client claims with FOR UPDATE SKIP LOCKED, so any number of processes share the work; on
//     SQLite the single writer serialises claims.
//   - Only the lease holder records: a client's Record writes an outcome only while the item still holds the lease
//     its claim returned, so a late answer of a process whose lease ran out never overwrites the retry's outcome.
//   - Wake-ups are immediate: Wake in this process, LISTEN/NOTIFY on PostgreSQL (the client's transactions notify
//     its channel), and on SQLite any commit of any process, seen in the WAL index within CommitCheck. Poll is only
//     the fallback.
//   - A graceful stop loses nothing: Run returns once every attempt that started has been recorded.
package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/store"
)

// Client is what a queue gives the engine. T is a claimed item, R the outcome of its attempt.
type Client[T, R any] interface {
	// Claim leases up to limit due items until now+lease, leaving out the targets in exclude (at their in-flight cap
	// or out of rate), in the order they should start.
	Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]T, error)
	// Prepare reads what the attempts of claimed items need, for all of them at once, and returns the items to
	// attempt (those deleted since the claim are left out: nothing remains to record).
	Prepare(ctx context.Context, items []T) ([]T, error)
	// Release gives claimed items back without an attempt; they are due again at notBefore (at once when zero).
	Release(ctx context.Context, items []T, notBefore time.Time) error
	// Target names the target of an item: the unit of the in-flight cap and of Admit's rate.
	Target(item T) string
	// Admit is the client's own admission beyond the in-flight cap (a rate): when an item may not start at now,
	// notBefore is when its target may start again (zero: when one of its attempts ends). The engine calls it one
	// item at a time.
	Admit(item T, now time.Time) (notBefore time.Time, ok bool)
	// Attempt runs one attempt, detached from Run's context (an attempt that started is finished during a stop).
	// ok false means there is nothing to record: the item keeps its lease and is attempted again when it runs out.
	Attempt(ctx context.Context, item T) (result R, ok bool)
	// Record stores outcomes, in one transaction when it can, each only if its item still holds the lease of its
	// claim. When it fails, the engine records the outcomes one by one; one that cannot be recorded keeps its lease.
	Record(ctx context.Context, results []R) error
}

// Config tunes an Engine; zero values take the defaults.
type Config struct {
	// Name names the queue in logs and metrics ("webhook", "send").
	Name string
	// Workers is how many attempts run at once (default 32); PerTarget caps those of one target (default 4), so a
	// slow target holds at most that many workers and never delays the others.
	Workers   int
	PerTarget int
	// Lease is how long a claimed item is held (default 1 min); it must exceed the longest attempt.
	Lease time.Duration
	// Poll is how often an idle engine looks for due items when nothing woke it (default 250 ms).
	Poll time.Duration
	// Channel is the PostgreSQL notification channel the client's transactions notify when they queue items (none:
	// no LISTEN).
	Channel string
	// MaxBatch bounds how many outcomes one Record call gets (default 128).
	MaxBatch int
	// RecordLanes is how many Record calls may run at once (default 1). The outcomes of one target always go to the
	// same lane, so concurrent calls never touch the same target's rows (no lock waits, no deadlocks between them);
	// more than one lane pays off where the database runs transactions in parallel (PostgreSQL), not on SQLite's
	// single writer.
	RecordLanes int
	// InFlightMetric names the gauge of the items this process has claimed and not recorded yet (default
	// switchboard_queue_in_flight with the label queue=Name).
	InFlightMetric string
	Logger         *slog.Logger
}

// Defaults of Config.
const (
	DefaultWorkers   = 32
	DefaultPerTarget = 4
	DefaultLease     = time.Minute
	DefaultPoll      = 250 * time.Millisecond
	DefaultMaxBatch  = 128
)

// gatherWait is the longest a claim for few items waits for more workers to free up, and a record of few outcomes
// for more outcomes (see claimAndStart and record).
const gatherWait = 2 * time.Millisecond

// CommitCheck is how often an engine on SQLite looks at the WAL index for commits of other processes (or of code
// that queued items without calling Wake).
const CommitCheck = 10 * time.Millisecond

// Engine runs a queue's attempts. Its constructor starts nothing; Run does.
type Engine[T, R any] struct {
	db     *store.DB
	client Client[T, R]
	cfg    Config
	log    *slog.Logger
	wake   chan struct{}
	// lanes carry finished attempts to the recorders, which hand them to the client in batches; a target's
	// outcomes always take the same lane.
	lanes []chan R

	mu sync.Mutex
	// inFlight counts the attempts running per target (the in-flight cap).
	inFlight map[string]int
	// throttled holds the targets out of rate until the time given: they are not claimed before it.
	throttled map[string]time.Time
	// attempting counts the attempts running (the worker pool); running counts the claimed items whose attempt is
	// not recorded yet: those attempting and those whose outcome waits for its Record. A worker is free again as
	// soon as its attempt ends, so claiming and attempting go on while earlier outcomes are recorded, and up to
	// MaxBatch outcomes may wait for their record besides the Workers attempts.
	attempting int
	running    int
	// lastClaim is when the loop last claimed (only the loop reads and writes it).
	lastClaim time.Time
	idle      *sync.Cond
	// draining is set once Run stopped claiming and waits for the attempts in flight.
	draining bool

	inFlightGauge prometheus.GaugeFunc
	claimed       prometheus.Counter
	released      prometheus.Counter
	unrecorded    prometheus.Counter
	saturated     prometheus.Counter
	// saturations counts the loop's passes that found no worker or outcome slot free (the metric's value, readable
	// without a registry).
	saturations atomic.Int64
}

// New returns an engine of client's queue over db; Run starts it.
func New[T, R any](db *store.DB, client Client[T, R], cfg Config) *Engine[T, R] {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PerTarget <= 0 {
		cfg.PerTarget = DefaultPerTarget
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.RecordLanes <= 0 {
		cfg.RecordLanes = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine[T, R]{db: db, client: client, cfg: cfg, log: cfg.Logger.With("queue", cfg.Name),
		wake: make(chan struct{}, 1), lanes: make([]chan R, cfg.RecordLanes),
		inFlight: map[string]int{}, throttled: map[string]time.Time{}}
	for i := range e.lanes {
		e.lanes[i] = make(chan R, cfg.Workers+cfg.MaxBatch)
	}
	e.idle = sync.NewCond(&e.mu)
	labels := prometheus.Labels{"queue": cfg.Name}
	gauge := prometheus.GaugeOpts{Name: "switchboard_queue_in_flight", ConstLabels: labels,
		Help: "Items of a queue this process has claimed and not recorded yet."}
	if cfg.InFlightMetric != "" {
		gauge = prometheus.GaugeOpts{Name: cfg.InFlightMetric, Help: "Items this process has claimed and not recorded yet."}
	}
	e.inFlightGauge = prometheus.NewGaugeFunc(gauge, func() float64 { return float64(e.InFlight()) })
	e.claimed = prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_claimed_total", ConstLabels: labels,
		Help: "Items of a queue this process claimed (an item given back and claimed again counts again)."})
	e.released = prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_released_total", ConstLabels: labels,
		Help: "Claimed items given back without an attempt: their target was at its in-flight cap or out of rate."})
	e.unrecorded = prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_unrecorded_total", ConstLabels: labels,
		Help: "Attempts whose outcome could not be recorded: their item keeps its lease and is attempted again when it runs out."})
	e.saturated = prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_saturated_total", ConstLabels: labels,
		Help: "Times a queue's loop found every worker busy or every outcome slot waiting for its record, and claimed nothing: a rate that keeps rising means the queue needs more workers or a faster record."})
	return e
}

// Collectors are the engine's Prometheus metrics; register them on the server's registry.
func (e *Engine[T, R]) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.inFlightGauge, e.claimed, e.released, e.unrecorded, e.saturated}
}

// InFlight is how many claimed items this engine has not recorded yet.
func (e *Engine[T, R]) InFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// Saturations is how many times the loop looked for due items and found no worker or outcome slot free.
func (e *Engine[T, R]) Saturations() int64 { return e.saturations.Load() }

// Attempting is how many attempts run now.
func (e *Engine[T, R]) Attempting() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempting
}

// Wake makes an idle engine look for due items now (after this process queued some, or a target became able to
// take them).
func (e *Engine[T, R]) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run claims and attempts due items until ctx ends, then waits for the attempts in flight to be recorded (they
// finish or time out), so that a graceful stop loses nothing and leaves nothing leased.
func (e *Engine[T, R]) Run(ctx context.Context) error {
	var background sync.WaitGroup
	// On PostgreSQL, a transaction that queued items notifies; items may also have been queued while the listener
	// was down. (On SQLite, Listen returns at once: the commit watch below wakes the engine.)
	if e.cfg.Channel != "" {
		background.Go(func() {
			e.db.Listen(ctx, store.Listener{Channel: e.cfg.Channel, Connected: e.Wake, Notified: func(string) { e.Wake() }})
		})
	}
	if w := e.db.WatchCommits(); w != nil {
		background.Go(func() { w.Watch(ctx, CommitCheck, e.Wake) })
	}
	var recorders sync.WaitGroup
	for _, lane := range e.lanes {
		recorders.Go(func() { e.record(lane) })
	}

	for ctx.Err() == nil {
		started, retryAt, err := e.claimAndStart(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("queue could not claim items", "error", err)
		}
		if started > 0 && err == nil {
			continue
		}
		wait := e.cfg.Poll
		if !retryAt.IsZero() {
			wait = max(min(wait, time.Until(retryAt)), time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
	e.mu.Lock()
	e.draining = true
	for e.running > 0 {
		e.idle.Wait()
	}
	e.mu.Unlock()
	for _, lane := range e.lanes {
		close(lane)
	}
	recorders.Wait()
	background.Wait()
	return nil
}

// claimAndStart claims as many due items as there are free workers and starts an attempt for each that its
// target's in-flight cap and the client's admission allow; the others are given back. retryAt is when a throttled
// target may start again (zero when none is throttled): the loop looks again then.
func (e *Engine[T, R]) claimAndStart(ctx context.Context) (started int, retryAt time.Time, err error) {
	now := time.Now()
	e.mu.Lock()
	free := min(e.cfg.Workers-e.attempting, e.cfg.Workers+e.cfg.MaxBatch-e.running)
	busy := e.attempting
	var exclude []string
	for target, n := range e.inFlight {
		if n >= e.cfg.PerTarget {
			exclude = append(exclude, target)
		}
	}
	for target, until := range e.throttled {
		if !now.Before(until) {
			delete(e.throttled, target)
			continue
		}
		exclude = append(exclude, target)
		retryAt = earliest(retryAt, until)
	}
	e.mu.Unlock()
	if free <= 0 {
		e.saturated.Inc()
		e.saturations.Add(1)
		return 0, retryAt, nil
	}
	// While attempts run, a claim for fewer than a quarter of the workers waits up to gatherWait after the last
	// claim for more of them to free up: every claim costs the database a transaction whatever its size, and one per
	// finished attempt spends it on claims of one or two items. The wait is bounded, so workers held by slow
	// targets never hold back the others for longer.
	if busy > 0 && free < max(e.cfg.Workers/4, 1) {
		if gathered := e.lastClaim.Add(gatherWait); now.Before(gathered) {
			return 0, earliest(retryAt, gathered), nil
		}
	}
	e.lastClaim = now
	items, err := e.client.Claim(ctx, now, e.cfg.Lease, free, exclude)
	if err != nil || len(items) == 0 {
		return 0, retryAt, err
	}
	e.claimed.Add(float64(len(items)))
	// Giving items back must not fail because a stop began meanwhile: they would stay leased for a lease.
	release := func(items []T, notBefore time.Time) error {
		e.released.Add(float64(len(items)))
		return e.client.Release(context.WithoutCancel(ctx), items, notBefore)
	}
	claimed := items
	if items, err = e.client.Prepare(ctx, claimed); err != nil {
		return 0, retryAt, errors.Join(err, release(claimed, time.Time{}))
	}
	// Items that may not start now, by when they may.
	giveBack := map[time.Time][]T{}
	// Once an item of a target is given back, so is every later item of it in this claim, though an attempt of the
	// target may end meanwhile and make room: the later item would otherwise start before the earlier one.
	heldBack := map[string]time.Time{}
	// Admission is judged at the moment the attempts start, not when the claim began: a claim slowed down by the
	// database, followed by a quick one, would otherwise start two attempts closer together than a rate allows.
	admitAt := time.Now()
	for _, it := range items {
		target := e.client.Target(it)
		if notBefore, held := heldBack[target]; held {
			giveBack[notBefore] = append(giveBack[notBefore], it)
			continue
		}
		e.mu.Lock()
		notBefore, ok := e.admit(target, it, admitAt)
		if !ok {
			e.mu.Unlock()
			heldBack[target] = notBefore
			giveBack[notBefore] = append(giveBack[notBefore], it)
			if !notBefore.IsZero() {
				retryAt = earliest(retryAt, notBefore)
			}
			continue
		}
		e.inFlight[target]++
		e.attempting++
		e.running++
		e.mu.Unlock()
		started++
		go e.attempt(target, it)
	}
	for notBefore, its := range giveBack {
		err = errors.Join(err, release(its, notBefore))
	}
	return started, retryAt, err
}

// admit decides whether an item of target may start now; when it may not, notBefore is when it may (zero: as soon
// as an attempt of the target ends). e.mu must be held.
func (e *Engine[T, R]) admit(target string, it T, now time.Time) (notBefore time.Time, ok bool) {
	if e.inFlight[target] >= e.cfg.PerTarget {
		return time.Time{}, false
	}
	if until, limited := e.throttled[target]; limited && now.Before(until) {
		return until, false
	}
	notBefore, ok = e.client.Admit(it, now)
	if !ok && !notBefore.IsZero() {
		e.throttled[target] = notBefore
	}
	return notBefore, ok
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// attempt runs one attempt and hands its outcome to the recorder.
func (e *Engine[T, R]) attempt(target string, it T) {
	res, ok := e.client.Attempt(context.Background(), it)
	e.mu.Lock()
	if e.inFlight[target]--; e.inFlight[target] <= 0 {
		delete(e.inFlight, target)
	}
	e.attempting--
	e.mu.Unlock()
	// The worker is free: the loop may claim and start the next items while this outcome waits for its record.
	e.Wake()
	if !ok {
		e.finished(1)
		return
	}
	e.lanes[store.LaneOf(target, len(e.lanes))] <- res
}

// finished counts n claimed items as done and lets the loop claim more.
func (e *Engine[T, R]) finished(n int) {
	e.mu.Lock()
	e.running -= n
	e.idle.Broadcast()
	e.mu.Unlock()
	e.Wake()
}

// record hands the outcomes of a lane to the client, as many per call as are waiting, until the lane is closed.
func (e *Engine[T, R]) record(lane chan R) {
	few := max(e.cfg.Workers/4, 1)
	for first := range lane {
		batch := []R{first}
		// What is waiting goes into the batch; a batch of few outcomes waits up to gatherWait for more while
		// attempts run, for the same reason claims do.
		var gather <-chan time.Time
	more:
		for len(batch) < e.cfg.MaxBatch {
			select {
			case r, ok := <-lane:
				if !ok {
					break more
				}
				batch = append(batch, r)
				continue
			default:
			}
			if gather == nil && len(batch) < few && e.Attempting() > 0 {
				gather = time.After(gatherWait)
			}
			if gather == nil {
				break
			}
			select {
			case r, ok := <-lane:
				if !ok {
					break more
				}
				batch = append(batch, r)
			case <-gather:
				break more
			}
		}
		e.recordBatch(batch)
		e.finished(len(batch))
	}
}

// recordBatch records outcomes in one call or, when that fails, one by one, so that one outcome that cannot be
// recorded does not hold back the others.
func (e *Engine[T, R]) recordBatch(batch []R) {
	err := e.client.Record(context.Background(), batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			e.recordBatch([]R{r})
		}
		return
	}
	if err != nil {
		e.unrecorded.Inc()
		e.log.Error("queue attempt could not be recorded; its lease will expire and it is attempted again", "error", err)
	}
}
