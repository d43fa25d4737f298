package eventstream

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Filter is what a subscription receives, with the meaning webhook endpoints give the same fields.
type Filter struct {
	// Types are event type names, family wildcards ("link.*") or "*"; none means "*" (which leaves out opt-in
	// types, as for webhooks).
	Types []string
	// InstanceIDs narrow the messaging events to these instances; none means every instance.
	InstanceIDs []string
	// Filters are conditions on the data, all of which must hold.
	Filters []store.WebhookFilter
}

// Event is an event as subscriptions receive it: shared by every subscription of the hub that it matches, so its
// envelope is encoded once.
type Event struct {
	store.PositionedEvent
	typ events.Type

	once     sync.Once
	envelope []byte
	data     any
	err      error

	sseOnce sync.Once
	sse     []byte
}

func newEvent(types *events.Registry, ev store.PositionedEvent) *Event {
	t, ok := types.Lookup(ev.WorkspaceID, ev.Type)
	if !ok {
		t = events.Type{Name: ev.Type} // a custom type deleted since
	}
	return &Event{PositionedEvent: ev, typ: t}
}

func (e *Event) decode() {
	e.once.Do(func() {
		if e.envelope, e.err = webhook.Body(e.Event); e.err == nil {
			e.data, e.err = events.DecodeData(e.Data)
		}
	})
}

// Envelope is the event's envelope as webhooks deliver it, JSON-encoded.
func (e *Event) Envelope() ([]byte, error) {
	e.decode()
	return e.envelope, e.err
}

// SSE is the event as one Server-Sent Events message (its id, its type as the event name, its envelope as data),
// encoded once for every stream it goes to: with a thousand streams, formatting it per stream cost more than
// writing it.
func (e *Event) SSE() ([]byte, error) {
	env, err := e.Envelope()
	if err != nil {
		return nil, err
	}
	e.sseOnce.Do(func() {
		e.sse = fmt.Appendf(make([]byte, 0, len(env)+len(e.ID)+len(e.Type)+24), "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, env)
	})
	return e.sse, nil
}

// everyType is the subscription to every type that is not opt-in, what no Types means.
var everyType = []string{"*"}

// matches reports whether the filter receives the event.
func (f Filter) matches(e *Event) bool {
	types := f.Types
	if len(types) == 0 {
		types = everyType
	}
	if !events.Receives(types, e.typ) {
		return false
	}
	if e.InstanceID != "" && len(f.InstanceIDs) > 0 && !slices.Contains(f.InstanceIDs, e.InstanceID) {
		return false
	}
	if len(f.Filters) == 0 {
		return true
	}
	e.decode()
	return e.err == nil && events.Matches(f.Filters, e.data)
}

// Subscription is one subscriber's view of a workspace's events: first those it missed, read from the log, then
// those the hub hands it as they commit. It is for one goroutine (besides the hub's).
type Subscription struct {
	hub         *Hub
	workspaceID string
	filter      Filter

	// replaying: the events after cursor up to replayTo are still to be read from the log.
	replaying        bool
	cursor, replayTo store.EventPosition
	signal, done     chan struct{}

	mu sync.Mutex
	// seen: live events at or before it were replayed (or precede the subscription).
	seen    store.EventPosition
	waiting []*Event
	// spare is the slice Take returned last: the subscriber is done with it when it takes again, so the next
	// events are gathered in it and the two slices take turns, with no allocation per read of the hub.
	spare []*Event
	err   error
}

// keptWaiting is the largest capacity of the waiting slices a subscription keeps between takes: a burst's larger
// slice is given back.
const keptWaiting = 256

// Replaying reports whether Take still reads missed events from the log (for the subscriber's goroutine).
func (s *Subscription) Replaying() bool { return s.replaying }

// Ready is signalled when Take may have something new.
func (s *Subscription) Ready() <-chan struct{} { return s.signal }

// Done is closed when the subscription ended (Err says why).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended: ErrOverflow, ErrClosed, or nil while it runs (or after Close).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Take returns the next events in commit order: a page of the replay while there is one, then whatever the hub
// handed over; none when nothing is waiting (wait for Ready). Returns ErrOverflow or ErrClosed once the subscription
// ended, or a database error of the replay.
func (s *Subscription) Take(ctx context.Context) ([]*Event, error) {
	for s.replaying {
		if err := s.Err(); err != nil {
			return nil, err
		}
		evs, _, err := s.hub.db.Events.ReadEvents(ctx, s.workspaceID, s.cursor, 100)
		if err != nil {
			return nil, err
		}
		var out []*Event
		for _, ev := range evs {
			if ev.Position.Compare(s.replayTo) > 0 {
				s.replaying = false
				break
			}
			s.cursor = ev.Position
			if e := newEvent(s.hub.types, ev); s.filter.matches(e) {
				out = append(out, e)
			}
		}
		if len(evs) < 100 {
			s.replaying = false // the log holds nothing more up to replayTo (retention may have pruned some)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := s.waiting
	s.waiting, s.spare = s.spare[:0], out
	if cap(s.waiting) > keptWaiting {
		s.waiting = nil // a burst's memory is given back
	}
	clear(s.waiting[:cap(s.waiting)]) // the events the subscriber took last are not kept alive
	return out, nil
}

// offer hands the subscription events the hub read, in commit order (called with the hub's lock held). It signals
// once, after all of them are waiting, so that one Take gets them together.
func (s *Subscription) offer(evs []*Event, buffer int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for _, e := range evs {
		if s.err != nil {
			return
		}
		if e.Position.Compare(s.seen) <= 0 || !s.filter.matches(e) {
			continue
		}
		if len(s.waiting) >= buffer {
			s.endLocked(ErrOverflow)
			s.hub.dropLocked(s)
			return
		}
		s.waiting = append(s.waiting, e)
		added = true
	}
	if added {
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
}

// end ends the subscription with err.
func (s *Subscription) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(err)
}

func (s *Subscription) endLocked(err error) {
	if s.err != nil {
		return
	}
	s.err, s.waiting, s.spare = err, nil, nil
	close(s.done)
}

// Close ends the subscription (the subscriber left).
func (s *Subscription) Close() {
	s.hub.remove(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.waiting, s.spare = nil, nil
		s.err = ErrClosed
		close(s.done)
	}
}
