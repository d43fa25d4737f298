package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// Listener is what LISTEN on one channel reports; nil functions are skipped.
type Listener struct {
	// Channel is the PostgreSQL notification channel.
	Channel string
	// Connected is called each time the connection is (re)established and listening on Channel. Notifications may
	// have been missed while it was down: whatever they would have announced must be assumed.
	Connected func()
	// Notified is called with the payload of each notification.
	Notified func(payload string)
	// Disconnected is called when a listening connection is lost: until the next Connected, notifications can go
	// unheard.
	Disconnected func()
}

// Backoff between attempts to (re)connect a listener.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen LISTENs on the channels of ls (one Listener per channel), all on one PostgreSQL connection of its own, until
// ctx ends, reconnecting with backoff (100 ms doubling to 5 s, reset once listening on every channel), and reports to
// each Listener. On SQLite, which has no notifications, it returns at once and reports nothing.
func (db *DB) Listen(ctx context.Context, ls ...Listener) {
	if db.dialect != Postgres {
		return
	}
	listen(ctx, db.url, ls...)
}

// listen is Listen on the PostgreSQL database at url. It is the one place with LISTEN; jackc's pgxlisten runs the
// loop (connect, LISTEN on every channel, hand each notification to its channel's handler, start over when the
// connection fails), and three of its hooks give a Listener its meaning:
//
//   - Connected: pgxlisten calls a handler's HandleBacklog on every connection, once LISTEN on its channel is in
//     place.
//   - Disconnected: pgxlisten tells of a failed connection only through LogError. The handlers here never return
//     errors, so each LogError is the end of a connection (or of an attempt to make one): the channels that were
//     listening are told.
//   - Backoff: pgxlisten waits a fixed ReconnectDelay between connections; a negative one makes it reconnect at
//     once, and Connect waits the growing delay itself.
func listen(ctx context.Context, url string, ls ...Listener) {
	if len(ls) == 0 {
		return
	}
	s := &listenState{url: url, channels: len(ls)}
	pl := &pgxlisten.Listener{Connect: s.connect, LogError: s.lost, ReconnectDelay: -1}
	for _, l := range ls {
		pl.Handle(l.Channel, listenHandler{l: l, s: s})
	}
	_ = pl.Listen(ctx) // returns only once ctx ends
}

// listenState is what listen keeps between pgxlisten's calls, all made by the goroutine running Listen.
type listenState struct {
	url      string
	channels int
	// wait is the delay before the next connection attempt: none before the first.
	wait time.Duration
	// listening are the Listeners told Connected on the current connection.
	listening []Listener
}

func (s *listenState) connect(ctx context.Context) (*pgx.Conn, error) {
	wait := s.wait
	s.wait = min(max(2*wait, listenBackoffMin), listenBackoffMax)
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	return pgx.Connect(ctx, s.url)
}

func (s *listenState) lost(context.Context, error) {
	for _, l := range s.listening {
		callIfSet(l.Disconnected)
	}
	s.listening = nil
}

// listenHandler hands one channel's events to its Listener.
type listenHandler struct {
	l Listener
	s *listenState
}

// Without HandleBacklog, pgxlisten would never report Connected.
var _ pgxlisten.BacklogHandler = listenHandler{}

func (h listenHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.s.listening = append(h.s.listening, h.l)
	if len(h.s.listening) == h.s.channels {
		h.s.wait = listenBackoffMin
	}
	callIfSet(h.l.Connected)
	return nil
}

func (h listenHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	if h.l.Notified != nil {
		h.l.Notified(n.Payload)
	}
	return nil
}

func callIfSet(f func()) {
	if f != nil {
		f()
	}
}
