// Package hub is the channel runtime: it holds the live session of each instance in exactly one process of a
// deployment, reconnects sessions that fail, carries commands to the process that holds a session, and runs the
// durable send queue. It implements channels.Sessions and channels.SendQueue over the messaging capability's
// Ledger (its channels.Recorder).
//
// Ownership is a lease in the database (instance_leases): the holder renews it every Renew; when a process dies,
// its leases run out after Lease and any other process takes the instances over. A start (or a takeover of many
// instances) spreads the connects over Stagger, so a restart with a thousand instances is not a storm against the
// networks. A session that fails is opened again after a capped exponential backoff with jitter, and after Budget
// failures in a row the instance is failed with the last reason, until a client connects it again.
//
// The send queue is a client of the shared queue engine (internal/queue): only the process that holds an instance
// claims its messages, only the oldest message of a chat is ever claimed (FIFO per chat, one in flight), sends are
// paced per instance (a token bucket with jitter), and a message in flight when its process dies is sent again with
// the same message ID once its lease ran out — the only repeat the queue allows.
package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/queue"
	"github.com/switchboard/switchboard/store"
)

// Options tune a Hub; zero values take the defaults.
type Options struct {
	// Slot is the runtime slot this process holds (store.LockRuntimeSlot), "" for none. With one, the process takes
	// the leases an earlier process of its slot left at once, with the claims of their queued messages: that
	// process died (a slot is held while its process lives), and a restart does not wait for its leases to run out.
	Slot string
	// Owner names this process in the leases (default: the slot's name, "/", and random characters; without a
	// slot host-pid-random).
	Owner string
	// Lease is how long a lease holds without renewal (default 30 s): the failover time when a process dies. Renew
	// is how often leases are renewed and free instances looked for (default Lease/3).
	Lease time.Duration
	Renew time.Duration
	// Stagger spreads the connects of the instances taken at start or over from a dead process (default 30 s).
	Stagger time.Duration
	// BackoffBase and BackoffMax bound the wait before a failed session is opened again (defaults 1 s and 5 min;
	// each failure doubles it, with ±25 % jitter). Budget is how many failures in a row fail the instance (default
	// 12); a session that stayed up for StableAfter (default 1 min) starts the count again.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	Budget      int
	StableAfter time.Duration
	// Rate and Burst are the default send pacing of an instance: at most Rate messages a minute on average, Burst
	// back to back (defaults DefaultRate and DefaultBurst). Rate -1 turns the default pacing off (an instance's own
	// setting still applies).
	Rate  int
	Burst int
	// Workers is how many sends run at once in this process (default 64); PerInstance caps those of one instance
	// (default 16; one chat never has more than one).
	Workers     int
	PerInstance int
	// MaxAttempts is how many times a send that fails transiently is tried before the message fails (default 12).
	MaxAttempts int
	// SendTimeout bounds one send (default 30 s; it must stay below Lease).
	SendTimeout time.Duration
	Logger      *slog.Logger
}

// Defaults of the send pacing: conservative, as networks that ban accounts for bursts expect.
const (
	DefaultRate  = 20
	DefaultBurst = 5
)

func (o *Options) defaults() {
	if o.Owner == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		if o.Slot != "" {
			o.Owner = fmt.Sprintf("%s/%d-%s", o.Slot, os.Getpid(), hex.EncodeToString(b))
		} else {
			host, _ := os.Hostname()
			o.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
		}
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Renew <= 0 {
		o.Renew = o.Lease / 3
	}
	if o.Stagger < 0 {
		o.Stagger = 0
	} else if o.Stagger == 0 {
		o.Stagger = 30 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.Budget <= 0 {
		o.Budget = 12
	}
	if o.StableAfter <= 0 {
		o.StableAfter = time.Minute
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Workers <= 0 {
		o.Workers = 64
	}
	if o.PerInstance <= 0 {
		o.PerInstance = 16
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 12
	}
	if o.SendTimeout <= 0 || o.SendTimeout >= o.Lease {
		o.SendTimeout = min(30*time.Second, o.Lease*2/3)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Hub is the channel runtime of one process. New starts nothing; Run does.
type Hub struct {
	db     *store.DB
	ledger channels.Ledger
	opts   Options
	log    *slog.Logger
	send   *queue.Engine[*job, outcome]
	kick   chan struct{}
	// commands wakes the command loop (a notification, or a commit on SQLite).
	commands chan struct{}

	mu   sync.Mutex
	held map[string]*held
	// pacers hold the send pacing of the instances this process sends for.
	pacers map[string]*pacer
	// running is set while Run runs: Start and Do before it (or after it) find no live session.
	running bool
	// pending are the instances a connect asked for since the last pass (Start): a wake-up takes just those,
	// rather than looking over every instance of the deployment as the upkeep pass does.
	pending map[string]bool
	// taking serialises the passes that take instances (the upkeep's and a wake-up's).
	taking sync.Mutex
	// passes counts the lease upkeep passes done (tests watch it).
	passes atomic.Int64

	gauges []prometheus.Collector
}

// held is an instance this process holds the lease of.
type held struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	// stoppedAt is set when its session was stopped on request while the instance is still wanted: the service
	// moves it offline right after, and until then it is not opened again.
	stoppedAt time.Time

	mu        sync.Mutex
	sess      channels.Session
	connected bool
	// sink is the current session's sink, fenced by close before the instance stops counting as held.
	sink *trackingSink
}

func (h *held) session() (channels.Session, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sess, h.connected
}

var (
	_ channels.Sessions  = (*Hub)(nil)
	_ channels.SendQueue = (*Hub)(nil)
)

// New returns the runtime over db and the ledger it records through (a channels.Recorder, built before it: the
// messaging service is built after the runtime, over both).
func New(db *store.DB, ledger channels.Ledger, opts Options) *Hub {
	opts.defaults()
	h := &Hub{db: db, ledger: ledger, opts: opts, log: opts.Logger.With("owner", opts.Owner),
		kick: make(chan struct{}, 1), commands: make(chan struct{}, 1),
		held: map[string]*held{}, pacers: map[string]*pacer{}, pending: map[string]bool{}}
	h.send = queue.New[*job, outcome](db, &sendClient{h: h}, queue.Config{Name: "send", Workers: opts.Workers,
		PerTarget: opts.PerInstance, Lease: opts.Lease, Channel: store.SendChannel, Logger: opts.Logger})
	h.gauges = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_channel_sessions",
			Help: "Instances whose session this process holds."}, func() float64 { n, _ := h.counts(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_channel_sessions_connected",
			Help: "Instances whose session this process holds and that are connected."},
			func() float64 { _, c := h.counts(); return float64(c) }),
	}
	return h
}

// Owner is the name this process holds leases under.
func (h *Hub) Owner() string { return h.opts.Owner }

// Collectors are the runtime's Prometheus metrics.
func (h *Hub) Collectors() []prometheus.Collector { return append(h.send.Collectors(), h.gauges...) }

func (h *Hub) counts() (heldN, connected int) {
	h.mu.Lock()
	hs := make([]*held, 0, len(h.held))
	for _, x := range h.held {
		hs = append(hs, x)
	}
	h.mu.Unlock()
	for _, x := range hs {
		if _, c := x.session(); c {
			connected++
		}
	}
	return len(hs), connected
}

// Held lists the instances whose lease this process holds.
func (h *Hub) Held() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.held))
	for id := range h.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (h *Hub) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Run holds sessions, sends queued messages and runs commands until ctx ends; then it stops taking sends, waits for
// those in flight to be recorded, closes every session (credentials kept) and gives its leases up so that another
// process takes the instances over at once.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	var wg sync.WaitGroup
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() { _ = h.send.Run(sendCtx) })
	wg.Go(func() { h.runCommands(ctx) })

	// The upkeep pass runs at start and every Renew; a wake-up in between only takes what was asked for (a connect)
	// or, with nothing asked for, looks for free instances: with ten thousand instances a connect must not cost a
	// renewal of every lease.
	first := true
	tick := time.NewTicker(h.opts.Renew)
	defer tick.Stop()
	for full := true; ; {
		var err error
		if full {
			err = h.maintain(ctx, first)
			h.passes.Add(1)
		} else {
			err = h.takeAsked(ctx)
		}
		if err != nil && ctx.Err() == nil {
			h.log.Warn("channel runtime: lease upkeep failed", "error", err)
		}
		first = false
		select {
		case <-ctx.Done():
		case <-tick.C:
			full = true
			continue
		case <-h.kick:
			full = false
			continue
		}
		break
	}

	// Sends in flight need their sessions: drain them first.
	stopSends()
	h.mu.Lock()
	h.running = false
	hs := make([]*held, 0, len(h.held))
	for _, x := range h.held {
		hs = append(hs, x)
	}
	h.mu.Unlock()
	ids := make([]string, 0, len(hs))
	for _, x := range hs {
		x.cancel()
	}
	for _, x := range hs {
		<-x.done
		ids = append(ids, x.id)
	}
	wg.Wait()
	h.mu.Lock()
	h.held = map[string]*held{}
	h.mu.Unlock()
	return h.db.InstanceLeases.Release(context.WithoutCancel(ctx), h.opts.Owner, ids)
}

// maintain renews this process's leases, closes the sessions of instances that are no longer wanted or whose lease
// was lost, and takes the free instances. first marks the pass at start: every instance taken then is staggered.
func (h *Hub) maintain(ctx context.Context, first bool) error {
	now := time.Now()
	h.mu.Lock()
	mine := make([]string, 0, len(h.held))
	for id := range h.held {
		mine = append(mine, id)
	}
	h.mu.Unlock()

	kept, err := h.db.InstanceLeases.Renew(ctx, h.opts.Owner, mine, now, h.opts.Lease)
	if err != nil {
		return err
	}
	lost := without(mine, kept)
	// Instances held but no longer wanted (disconnected, logged out, failed, deleted): close and give up.
	var unwanted []string
	if len(kept) > 0 {
		wanted, err := h.db.Instances.WantedAmong(ctx, kept)
		if err != nil {
			return err
		}
		unwanted = without(kept, wanted)
	}
	for _, id := range lost {
		h.log.Warn("channel runtime: lease lost; another process holds the instance now", "instance_id", id)
		h.close(id)
	}
	for _, id := range unwanted {
		h.close(id)
	}
	if err := h.db.InstanceLeases.Release(ctx, h.opts.Owner, unwanted); err != nil {
		return err
	}
	h.restartStopped(now)
	if err := h.refreshPacing(ctx, kept); err != nil {
		return err
	}

	return h.takeFree(ctx, now, first)
}

// takeFree takes the instances no live process holds. first marks the pass at start.
func (h *Hub) takeFree(ctx context.Context, now time.Time, first bool) error {
	h.taking.Lock()
	defer h.taking.Unlock()
	h.mu.Lock()
	clear(h.pending) // the instances asked for are free ones too
	h.mu.Unlock()
	free, before, left, err := h.db.InstanceLeases.Free(ctx, now, h.opts.Slot)
	if err != nil {
		return err
	}
	return h.take(ctx, now, free, before, left, first)
}

// takeAsked takes the instances a connect asked for since the last pass, or, when none was, the free ones (a
// session that ended for good gave its lease up).
func (h *Hub) takeAsked(ctx context.Context) error {
	h.mu.Lock()
	asked := make([]string, 0, len(h.pending))
	for id := range h.pending {
		asked = append(asked, id)
	}
	clear(h.pending)
	h.mu.Unlock()
	if len(asked) == 0 {
		return h.takeFree(ctx, time.Now(), false)
	}
	h.taking.Lock()
	defer h.taking.Unlock()
	slices.Sort(asked)
	// Nobody held them when they were asked for; Acquire still takes only those whose lease is free.
	return h.take(ctx, time.Now(), asked, nil, nil, false)
}

// take acquires the leases of free instances not held here yet and opens their sessions: before are those that
// had a holder (taken over: staggered), left those the slot's earlier process left (their claims are undone).
func (h *Hub) take(ctx context.Context, now time.Time, free []string, before, left map[string]bool, first bool) error {
	free = slices.DeleteFunc(free, func(id string) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.held[id] != nil
	})
	if len(free) == 0 {
		return nil
	}
	took, err := h.db.InstanceLeases.Acquire(ctx, h.opts.Owner, h.opts.Slot, free, now, h.opts.Lease)
	if err != nil && len(took) == 0 {
		return err
	}
	// What the slot's earlier process claimed to send is due again: it was never sent, or is sent again with the
	// same message ID, as after any lease that ran out.
	var orphaned []string
	for _, id := range took {
		if left[id] {
			orphaned = append(orphaned, id)
		}
	}
	if uerr := h.db.SendQueue.Unclaim(ctx, orphaned); uerr != nil {
		err = errors.Join(err, uerr)
	}
	// Instances taken at start or over from a process that died connect over the stagger; an instance nobody held
	// (a connect just asked for) connects at once.
	var staggered []string
	for _, id := range took {
		if first || before[id] {
			staggered = append(staggered, id)
			continue
		}
		h.open(ctx, id, 0)
	}
	reason := "taken over from a process that stopped answering"
	if first {
		reason = "reconnecting after the server started"
	}
	// The window grows with the number of instances up to Stagger: a few connect within a fraction of a second,
	// a thousand over the whole window. The instances show reconnecting until their turn; that is recorded for a
	// chunk at a time, each chunk's sessions started right after (a session must not connect before its instance
	// shows its turn, or the record would move it back), so the first connects do not wait for every record.
	window := min(h.opts.Stagger, time.Duration(len(staggered))*staggerStep)
	start := time.Now()
	for off := 0; off < len(staggered); off += staggerChunk {
		chunk := staggered[off:min(off+staggerChunk, len(staggered))]
		at := make(map[string]time.Time, len(chunk))
		for k, id := range chunk {
			i := off + k
			at[id] = start.Add(time.Duration(float64(window) * (float64(i) + mrand.Float64()) / float64(len(staggered))))
		}
		if rerr := h.ledger.Staggered(ctx, at, reason); rerr != nil {
			h.log.Warn("channel runtime: could not record the staggered start", "instances", len(chunk), "error", rerr)
		}
		for _, id := range chunk {
			h.open(ctx, id, time.Until(at[id]))
		}
	}
	return err
}

// staggerChunk is how many staggered instances one transaction marks reconnecting.
const staggerChunk = 250

// staggerStep is the share of the stagger window each instance adds: at most 20 connects a second.
const staggerStep = 50 * time.Millisecond

// open starts holding an instance: its supervisor opens the session after delay (a staggered start recorded the
// wait beforehand).
func (h *Hub) open(ctx context.Context, id string, delay time.Duration) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	x := &held{id: id, cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	h.held[id] = x
	h.mu.Unlock()
	go h.supervise(sctx, x, delay)
}

// close stops holding an instance: its session is closed (credentials kept) and it is forgotten. Its session's
// reports are refused before the instance stops counting as held (Held): a report under way then ends first (its
// commit may wait for a shared transaction), and nothing the session reports once another process may hold the
// instance is recorded.
func (h *Hub) close(id string) {
	h.mu.Lock()
	x := h.held[id]
	h.mu.Unlock()
	if x != nil {
		x.mu.Lock()
		ts := x.sink
		x.mu.Unlock()
		if ts != nil {
			ts.fence()
		}
	}
	h.mu.Lock()
	if h.held[id] == x {
		delete(h.held, id)
		delete(h.pacers, id)
	}
	h.mu.Unlock()
	if x != nil {
		x.cancel()
		<-x.done
	}
}

// forget drops an instance whose supervisor ended for good and gives its lease up.
func (h *Hub) forget(x *held) {
	h.mu.Lock()
	mine := h.held[x.id] == x
	if mine {
		delete(h.held, x.id)
		delete(h.pacers, x.id)
	}
	h.mu.Unlock()
	if mine {
		if err := h.db.InstanceLeases.Release(context.Background(), h.opts.Owner, []string{x.id}); err != nil {
			h.log.Warn("channel runtime: could not give a lease up", "instance_id", x.id, "error", err)
		}
		h.wake()
	}
}

// stopGrace is how long a session stopped on request stays closed while its instance is still wanted: the service
// moves the instance offline right after Stop returns.
const stopGrace = 30 * time.Second

// restartStopped opens again the sessions stopped on request whose instance is still wanted after stopGrace (the
// service's move offline failed).
func (h *Hub) restartStopped(now time.Time) {
	h.mu.Lock()
	var again []*held
	for _, x := range h.held {
		if !x.stoppedAt.IsZero() && now.Sub(x.stoppedAt) > stopGrace {
			again = append(again, x)
		}
	}
	h.mu.Unlock()
	for _, x := range again {
		h.restart(x)
	}
}

// without is all but some; a set, as both hold every instance of the process.
func without(all, some []string) []string {
	in := make(map[string]bool, len(some))
	for _, id := range some {
		in[id] = true
	}
	var out []string
	for _, id := range all {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

// supervise runs an instance's session until ctx ends: it opens it after delay, and after each failure again after
// a backoff, until the session ends for good (logged out, banned: the instance is offline) or fails more often in
// a row than the budget allows.
func (h *Hub) supervise(ctx context.Context, x *held, delay time.Duration) {
	defer close(x.done)
	// A session that ended for good (not stopped) lets its instance go: a later connect takes it afresh.
	defer func() {
		if ctx.Err() == nil {
			h.forget(x)
		}
	}()
	if !sleep(ctx, delay) {
		return
	}
	// An instance restricted when this process took it (a restart, a takeover) waits for the restriction's end.
	if !sleep(ctx, h.restrictedFor(ctx, x.id)) {
		return
	}
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		err := h.runOnce(ctx, x)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrNotFound) {
			return // deleted
		}
		if r := (*channels.Restriction)(nil); errors.As(err, &r) {
			// Not a failure: the network said when the account may come back, so neither the budget nor the
			// backoff applies, and a retry before the end would only prolong the ban.
			h.log.Info("channel session restricted by its network", "instance_id", x.id, "until", r.Until)
			if rerr := h.ledger.Restrict(ctx, x.id, r.Until, r.Reason); rerr != nil && ctx.Err() == nil {
				h.log.Warn("channel runtime: could not record the restriction", "instance_id", x.id, "error", rerr)
			}
			failures = 0
			if !sleep(ctx, time.Until(r.Until)) {
				return
			}
			continue
		}
		if err == nil {
			inst, gerr := h.db.Instances.ByID(ctx, h.db.Reader(), x.id)
			if gerr != nil || offlineStatus(inst.Status) {
				return // ended for good; the session reported why
			}
			err = errors.New("the session ended without saying why")
		}
		if time.Since(started) >= h.opts.StableAfter {
			failures = 0
		}
		failures++
		if failures > h.opts.Budget {
			reason := fmt.Sprintf("gave up after %d failed attempts in a row: %v", failures-1, err)
			if gerr := h.ledger.GiveUp(ctx, x.id, reason); gerr != nil {
				h.log.Warn("channel runtime: could not fail the instance", "instance_id", x.id, "error", gerr)
			}
			return
		}
		wait := backoff(h.opts.BackoffBase, h.opts.BackoffMax, failures)
		h.log.Info("channel session failed; reconnecting after a backoff", "instance_id", x.id, "attempt", failures,
			"wait", wait.String(), "error", err)
		if berr := h.ledger.Backoff(ctx, x.id, failures, time.Now().Add(wait), err.Error()); berr != nil && ctx.Err() == nil {
			h.log.Warn("channel runtime: could not record the backoff", "instance_id", x.id, "error", berr)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// runOnce opens the instance's session and runs it until it returns.
func (h *Hub) runOnce(ctx context.Context, x *held) error {
	inst, p, sink, err := h.ledger.Open(ctx, x.id)
	if err != nil {
		return err
	}
	inst.Runtime = h
	h.loadPacing(ctx, x.id)
	ts := &trackingSink{sink: sink, h: h, x: x}
	sess, err := p.Open(inst, ts)
	if err != nil {
		return err
	}
	defer ts.fence()
	// The session takes commands (a sandbox delivery, a lookup) as soon as it exists: some arrive while it is still
	// connecting.
	x.mu.Lock()
	x.sess, x.connected, x.sink = sess, false, ts
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.sess, x.connected, x.sink = nil, false, nil
		x.mu.Unlock()
	}()
	return sess.Run(ctx)
}

// restrictedFor is how long an instance stays restricted by its network from now (0 if it is not).
func (h *Hub) restrictedFor(ctx context.Context, id string) time.Duration {
	inst, err := h.db.Instances.ByID(ctx, h.db.Reader(), id)
	if err != nil || channels.Status(inst.Status) != channels.StatusRestricted || inst.ReconnectNextAt == nil {
		return 0
	}
	return time.Until(*inst.ReconnectNextAt)
}

func offlineStatus(s string) bool {
	switch channels.Status(s) {
	case channels.StatusCreated, channels.StatusDisconnected, channels.StatusLoggedOut, channels.StatusFailed:
		return true
	}
	return false
}

// backoff is the wait before attempt n (1-based): base doubled n-1 times, capped, ±25 % jitter.
func backoff(base, ceiling time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return time.Duration(float64(d) * (0.75 + mrand.Float64()/2))
}

// sleep waits d or until ctx ends, reporting whether it waited the whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// trackingSink passes a session's reports on, keeps for the send queue whether the session is connected, and
// fences the session once its Run returned (stopped, or its lease lost): a goroutine the session left behind, or
// a session slow to notice, must not record anything over the process that holds the instance now.
type trackingSink struct {
	sink channels.Sink
	h    *Hub
	x    *held

	// mu is held for reading by each report under way, and for writing by fence.
	mu     sync.RWMutex
	fenced bool
}

// errFenced answers the reports of a session the runtime no longer runs.
var errFenced = errors.New("hub: the runtime no longer runs this session; its report is not recorded")

// fence refuses every later report and returns once those under way are done.
func (s *trackingSink) fence() {
	s.mu.Lock()
	s.fenced = true
	s.mu.Unlock()
}

// pass makes a report unless the session is fenced.
func (s *trackingSink) pass(report func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fenced {
		return errFenced
	}
	return report()
}

func (s *trackingSink) State(ctx context.Context, st channels.Status, reason string) error {
	return s.pass(func() error {
		s.set(st == channels.StatusConnected)
		return s.sink.State(ctx, st, reason)
	})
}

func (s *trackingSink) Connected(ctx context.Context, account channels.Party, credentials []byte) error {
	return s.pass(func() error {
		err := s.sink.Connected(ctx, account, credentials)
		if err == nil {
			s.set(true)
		}
		return err
	})
}

func (s *trackingSink) QR(ctx context.Context, code string, expires time.Time) error {
	return s.pass(func() error { return s.sink.QR(ctx, code, expires) })
}

func (s *trackingSink) Inbound(ctx context.Context, m channels.Inbound) error {
	return s.pass(func() error { return s.sink.Inbound(ctx, m) })
}

func (s *trackingSink) Receipt(ctx context.Context, r channels.Receipt) error {
	return s.pass(func() error { return s.sink.Receipt(ctx, r) })
}

var _ channels.BatchSink = (*trackingSink)(nil)

// Record passes a run of reports on in one call when the sink takes runs, one by one otherwise.
func (s *trackingSink) Record(ctx context.Context, reports []channels.Report) (int, error) {
	n := 0
	err := s.pass(func() error {
		var err error
		n, err = channels.RecordEach(ctx, s.sink, reports)
		return err
	})
	return n, err
}

func (s *trackingSink) GroupChanged(ctx context.Context, g channels.Group, change string) error {
	return s.pass(func() error { return s.sink.GroupChanged(ctx, g, change) })
}

func (s *trackingSink) ContactChanged(ctx context.Context, p channels.Party) error {
	return s.pass(func() error { return s.sink.ContactChanged(ctx, p) })
}

func (s *trackingSink) Presence(ctx context.Context, p channels.Presence) error {
	return s.pass(func() error { return s.sink.Presence(ctx, p) })
}

func (s *trackingSink) PollVote(ctx context.Context, v channels.PollVote) error {
	return s.pass(func() error { return s.sink.PollVote(ctx, v) })
}

func (s *trackingSink) ChatOrganized(ctx context.Context, chat string, o channels.ChatOrganization) error {
	return s.pass(func() error { return s.sink.ChatOrganized(ctx, chat, o) })
}

func (s *trackingSink) LabelChanged(ctx context.Context, l channels.NetworkLabel) error {
	return s.pass(func() error { return s.sink.LabelChanged(ctx, l) })
}

func (s *trackingSink) ChatLabelled(ctx context.Context, chat, label string, on bool) error {
	return s.pass(func() error { return s.sink.ChatLabelled(ctx, chat, label, on) })
}

func (s *trackingSink) Call(ctx context.Context, c channels.IncomingCall) (channels.CallAnswer, error) {
	var a channels.CallAnswer
	err := s.pass(func() (err error) {
		a, err = s.sink.Call(ctx, c)
		return err
	})
	if err == nil {
		s.h.send.Wake() // the message to the caller, if the instance sends one
	}
	return a, err
}

func (s *trackingSink) set(connected bool) {
	s.x.mu.Lock()
	was := s.x.connected
	s.x.connected = connected && s.x.sess != nil
	s.x.mu.Unlock()
	if connected && !was {
		s.h.send.Wake() // its queued messages can go now
	}
}

// Start asks for an instance to be connected: this process takes it at once if no other holds it, and a session
// stopped on request (a disconnect followed by a connect) opens again wherever it is held.
func (h *Hub) Start(ctx context.Context, id string) error {
	h.mu.Lock()
	x := h.held[id]
	h.mu.Unlock()
	if x != nil {
		h.restart(x)
		return nil
	}
	holder, err := h.db.InstanceLeases.Holder(ctx, id, time.Now())
	if err != nil || holder == "" || holder == h.opts.Owner {
		if err == nil && holder == "" {
			h.mu.Lock()
			h.pending[id] = true
			h.mu.Unlock()
		}
		h.wake()
		return err
	}
	if _, err := h.Do(ctx, id, channels.Command{Op: opStart}); err != nil && !errors.Is(err, channels.ErrNotConnected) {
		return err
	}
	return nil
}

// restart opens again a held session that was stopped on request.
func (h *Hub) restart(x *held) {
	h.mu.Lock()
	stopped := !x.stoppedAt.IsZero()
	h.mu.Unlock()
	if stopped {
		h.close(x.id)
		h.open(context.Background(), x.id, 0)
	}
}

// Stop closes an instance's session wherever it is held, keeping its credentials, and returns once it is closed
// (or the process holding it did not answer in time).
func (h *Hub) Stop(ctx context.Context, id string) error {
	h.mu.Lock()
	x := h.held[id]
	h.mu.Unlock()
	if x != nil {
		h.stopLocal(x)
		return nil
	}
	_, err := h.Do(ctx, id, channels.Command{Op: opStop})
	if errors.Is(err, channels.ErrNotConnected) {
		return nil
	}
	return err
}

// stopLocal closes a held session on request and keeps the lease until the instance is offline.
func (h *Hub) stopLocal(x *held) {
	x.cancel()
	<-x.done
	h.mu.Lock()
	x.stoppedAt = time.Now()
	h.mu.Unlock()
}

// The hub's own commands, run by the process that holds the instance: close the session (Stop of another process)
// and open it again (Start after a Stop).
const (
	opStop  = "hub.stop"
	opStart = "hub.start"
)
