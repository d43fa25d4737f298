// Package eventstream follows the event log live: a Hub per process reads the events that commit, in commit order,
// and hands each to the subscriptions it matches, after replaying from the log what a subscriber missed. The API
// serves subscriptions as Server-Sent Events and over WebSocket.
//
// No event is missed or repeated between the replay and the live part of a subscription: a subscription is
// registered at the position the hub has read up to, replays the log from its cursor up to that position, and takes
// from the hub only what lies beyond both. Positions follow commit order (store.EventPosition), so a subscriber that
// resumes after the last event it saw misses nothing that committed later.
package eventstream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/queue"
	"github.com/switchboard/switchboard/store"
)

// Defaults of Config.
const (
	// DefaultBuffer is how many events a subscription may have waiting before it is closed as too slow.
	DefaultBuffer = 10000
	// DefaultPoll is the longest an event waits when no wake-up announced it (a lost notification).
	DefaultPoll = time.Second
	// readBatch is how many events one read of the log takes.
	readBatch = 1000
	// readGap is the shortest time between two reads of the log that found events. PostgreSQL notifies every
	// commit, so at a thousand commits a second the hub would otherwise read (and hand out to every subscription) a
	// thousand times a second, one event each; waiting this long after a read that found some lets the events of
	// the next few milliseconds share a read. A quiet log is read at once when woken.
	readGap = 5 * time.Millisecond
)

// Config tunes a Hub; zero values take the defaults.
type Config struct {
	// Buffer is how many events a subscription may have waiting (DefaultBuffer); one more closes it with
	// ErrOverflow, so that a slow consumer never grows the server's memory.
	Buffer int
	// Poll bounds the wait for an event whose wake-up was lost (DefaultPoll).
	Poll   time.Duration
	Logger *slog.Logger
}

// Errors a subscription ends with.
var (
	// ErrOverflow: the subscriber fell Buffer events behind. It can resume after the last event it received.
	ErrOverflow = errors.New("eventstream: the subscriber fell too far behind")
	// ErrClosed: the hub stopped (the server is shutting down). The subscriber can resume on another replica.
	ErrClosed = errors.New("eventstream: the stream closed")
)

// Hub follows the event log of a database for the subscriptions of one process.
type Hub struct {
	db    *store.DB
	types *events.Registry
	cfg   Config
	wake  chan struct{}
	// ready is closed once Run knows where the log ends; stopped once it has returned.
	ready, stopped chan struct{}

	mu sync.Mutex
	// pos is how far the hub has read and handed out.
	pos  store.EventPosition
	subs map[string]map[*Subscription]struct{} // by workspace
	n    int
}

// NewHub returns the hub of a database, whose events are of the types of a registry. Run it to serve subscriptions.
func NewHub(db *store.DB, types *events.Registry, cfg Config) *Hub {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Hub{db: db, types: types, cfg: cfg, wake: make(chan struct{}, 1), ready: make(chan struct{}),
		stopped: make(chan struct{}), subs: map[string]map[*Subscription]struct{}{}}
}

// Wake makes the hub read the log now (this process committed events).
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Subscribers is how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Run follows the log until ctx ends, then closes every subscription with ErrClosed. Wake-ups come from
// PostgreSQL notifications (every replica hears every commit), from SQLite's commit watch, from Wake, and at worst
// every Poll.
func (h *Hub) Run(ctx context.Context) {
	defer h.stop()
	if !h.start(ctx) {
		return
	}
	var background sync.WaitGroup
	defer background.Wait()
	background.Go(func() {
		h.db.Listen(ctx, store.Listener{Channel: store.EventsChannel, Connected: h.Wake, Notified: func(string) { h.Wake() }})
	})
	if w := h.db.WatchCommits(); w != nil {
		background.Go(func() { w.Watch(ctx, queue.CommitCheck, h.Wake) })
	}
	retry := time.Duration(0)
	var found time.Time // when the last read that found events began
	for {
		wait := h.cfg.Poll
		if retry > 0 {
			wait = retry
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-h.wake:
		case <-timer.C:
		}
		timer.Stop()
		if gap := readGap - time.Since(found); gap > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap):
			}
		}
		began := time.Now()
		heldBack, n, err := h.catchUp(ctx)
		if n > 0 {
			found = began
		}
		switch {
		case err != nil && ctx.Err() == nil:
			h.cfg.Logger.Warn("event stream could not read the event log", "error", err)
			retry = min(max(2*retry, 10*time.Millisecond), h.cfg.Poll)
		case heldBack:
			// A transaction older than committed events is still running; its end is not necessarily notified.
			retry = min(max(2*retry, time.Millisecond), h.cfg.Poll)
		default:
			retry = 0
		}
	}
}

// start learns where the log ends, retrying until it can or ctx ends.
func (h *Hub) start(ctx context.Context) bool {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, h.cfg.Poll) {
		pos, err := h.db.Events.LastPosition(ctx)
		if err == nil {
			h.mu.Lock()
			h.pos = pos
			h.mu.Unlock()
			close(h.ready)
			return true
		}
		h.cfg.Logger.Warn("event stream could not find the end of the event log", "error", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

func (h *Hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for s := range subs {
			s.end(ErrClosed)
		}
	}
	h.subs, h.n = map[string]map[*Subscription]struct{}{}, 0
	close(h.stopped)
}

// catchUp reads what committed since the hub's position and hands it out. With nobody subscribed it only moves to
// the end of the log.
func (h *Hub) catchUp(ctx context.Context) (heldBack bool, read int, err error) {
	for {
		h.mu.Lock()
		pos, idle := h.pos, h.n == 0
		h.mu.Unlock()
		if idle {
			last, err := h.db.Events.LastPosition(ctx)
			if err != nil {
				return false, read, err
			}
			h.mu.Lock()
			if h.n == 0 && last.Compare(h.pos) > 0 {
				h.pos = last
			}
			idle = h.n == 0
			h.mu.Unlock()
			if idle {
				return false, read, nil
			}
			continue // somebody subscribed meanwhile, at the old position: read from there
		}
		evs, held, err := h.db.Events.ReadEvents(ctx, "", pos, readBatch)
		if err != nil {
			return false, read, err
		}
		read += len(evs)
		h.mu.Lock()
		// Each subscription is handed the whole read at once, with one signal: its stream then takes the events
		// together and writes them with one write and flush, instead of waking (and writing) per event while the
		// hub is still handing out the rest.
		byWorkspace := map[string][]*Event{}
		for _, ev := range evs {
			if len(h.subs[ev.WorkspaceID]) > 0 {
				byWorkspace[ev.WorkspaceID] = append(byWorkspace[ev.WorkspaceID], newEvent(h.types, ev))
			}
		}
		for workspaceID, batch := range byWorkspace {
			for s := range h.subs[workspaceID] {
				s.offer(batch, h.cfg.Buffer)
			}
		}
		if len(evs) > 0 {
			h.pos = evs[len(evs)-1].Position
		}
		h.mu.Unlock()
		if len(evs) < readBatch {
			return held, read, nil
		}
	}
}

// Subscribe opens a subscription to a workspace's events that match f: after a position (replaying from the log
// what came after it), or from now on when after is nil. It waits until the hub runs; returns ErrClosed if the hub
// has stopped, or ctx's error.
func (h *Hub) Subscribe(ctx context.Context, workspaceID string, f Filter, after *store.EventPosition) (*Subscription, error) {
	select {
	case <-h.ready:
	case <-h.stopped:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s := &Subscription{hub: h, workspaceID: workspaceID, filter: f, signal: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stopped:
		return nil, ErrClosed
	default:
	}
	s.seen = h.pos
	if after != nil {
		s.replaying, s.cursor, s.replayTo = after.Compare(h.pos) < 0, *after, h.pos
		if !s.replaying {
			s.seen = *after // the subscriber is ahead of this hub (it came from another replica)
		}
	}
	if h.subs[workspaceID] == nil {
		h.subs[workspaceID] = map[*Subscription]struct{}{}
	}
	h.subs[workspaceID][s] = struct{}{}
	h.n++
	return s, nil
}

// remove forgets a subscription.
func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(s)
}

// dropLocked is remove with the hub's lock held.
func (h *Hub) dropLocked(s *Subscription) {
	if subs := h.subs[s.workspaceID]; subs != nil {
		if _, ok := subs[s]; ok {
			delete(subs, s)
			h.n--
			if len(subs) == 0 {
				delete(h.subs, s.workspaceID)
			}
		}
	}
}
