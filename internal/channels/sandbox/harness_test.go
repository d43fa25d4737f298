package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// event is one call a session made to its sink.
type event struct {
	kind     string // state, qr, connected, inbound, receipt, group, contact
	status   channels.Status
	reason   string
	qr       string
	party    channels.Party
	creds    []byte
	inbound  channels.Inbound
	receipt  channels.Receipt
	group    channels.Group
	change   string
	presence channels.Presence
	vote     channels.PollVote
	call     channels.IncomingCall
	// media holds the bytes of an inbound attachment, read while the sink had it.
	media []byte
}

func (e event) String() string {
	switch e.kind {
	case "state":
		return fmt.Sprintf("state %s (%s)", e.status, e.reason)
	case "inbound":
		return fmt.Sprintf("inbound %s from %s in %s: %q", e.inbound.Type, e.inbound.From.Address, e.inbound.Chat, e.inbound.Text)
	case "receipt":
		return fmt.Sprintf("receipt %s %s", e.receipt.ProviderID, e.receipt.Status)
	case "group":
		return fmt.Sprintf("group %s %s", e.group.Address, e.change)
	}
	return e.kind
}

// recorder is a Sink that records every call.
type recorder struct {
	mu     sync.Mutex
	events []event
	// reject is the answer to calls.
	reject bool
	// atConnected, when set, runs inside every report that the instance is connected, before it returns.
	atConnected func()
}

func (r *recorder) add(e event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) State(_ context.Context, s channels.Status, reason string) error {
	if s == channels.StatusConnected && r.atConnected != nil {
		r.atConnected()
	}
	return r.add(event{kind: "state", status: s, reason: reason})
}
func (r *recorder) QR(_ context.Context, code string, _ time.Time) error {
	return r.add(event{kind: "qr", qr: code})
}
func (r *recorder) Connected(_ context.Context, p channels.Party, creds []byte) error {
	if r.atConnected != nil {
		r.atConnected()
	}
	return r.add(event{kind: "connected", party: p, creds: creds})
}
func (r *recorder) Inbound(ctx context.Context, m channels.Inbound) error {
	e := event{kind: "inbound", inbound: m}
	if m.Media != nil && m.Media.Open != nil {
		rc, err := m.Media.Open(ctx)
		if err != nil {
			return err
		}
		defer rc.Close()
		if e.media, err = io.ReadAll(rc); err != nil {
			return err
		}
	}
	return r.add(e)
}
func (r *recorder) Receipt(_ context.Context, rc channels.Receipt) error {
	return r.add(event{kind: "receipt", receipt: rc})
}
func (r *recorder) GroupChanged(_ context.Context, g channels.Group, change string) error {
	return r.add(event{kind: "group", group: g, change: change})
}
func (r *recorder) ContactChanged(_ context.Context, p channels.Party) error {
	return r.add(event{kind: "contact", party: p})
}

func (r *recorder) Presence(_ context.Context, p channels.Presence) error {
	return r.add(event{kind: "presence", presence: p})
}

func (r *recorder) PollVote(_ context.Context, v channels.PollVote) error {
	return r.add(event{kind: "vote", vote: v})
}

func (r *recorder) ChatOrganized(context.Context, string, channels.ChatOrganization) error {
	return r.add(event{kind: "organized"})
}

func (r *recorder) LabelChanged(context.Context, channels.NetworkLabel) error {
	return r.add(event{kind: "label"})
}

func (r *recorder) ChatLabelled(context.Context, string, string, bool) error {
	return r.add(event{kind: "labelled"})
}

func (r *recorder) Call(_ context.Context, c channels.IncomingCall) (channels.CallAnswer, error) {
	r.mu.Lock()
	reject := r.reject
	r.mu.Unlock()
	return channels.CallAnswer{Reject: reject}, r.add(event{kind: "call", call: c})
}

// of returns the recorded events of a kind.
func (r *recorder) of(kind string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// wait waits until the sink recorded n events of a kind, and returns them.
func (r *recorder) wait(t *testing.T, kind string, n int) []event {
	t.Helper()
	return await.Until(t, fmt.Sprintf("%d %s events", n, kind), func() []event { return r.of(kind) },
		func(es []event) bool { return len(es) >= n })
}

// waitFor waits until the sink recorded an event that ok accepts.
func (r *recorder) waitFor(t *testing.T, what string, ok func(event) bool) event {
	t.Helper()
	var found event
	await.Until(t, what, func() []event {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]event(nil), r.events...)
	}, func(es []event) bool {
		for _, e := range es {
			if ok(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// sessions is the runtime in memory: Do runs a command on the session registered for the instance.
type sessions struct {
	mu   sync.Mutex
	live map[string]*session
	// done counts the wake-ups each instance was sent.
	done map[string]int
}

func (s *sessions) Start(context.Context, string) error { return nil }
func (s *sessions) Stop(context.Context, string) error  { return nil }
func (s *sessions) Do(ctx context.Context, id string, c channels.Command) (json.RawMessage, error) {
	s.mu.Lock()
	sess := s.live[id]
	s.done[id]++
	s.mu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("instance %s: %w", id, channels.ErrNotConnected)
	}
	return sess.Handle(ctx, c)
}

func (s *sessions) set(id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess == nil {
		delete(s.live, id)
	} else {
		s.live[id] = sess
	}
}

// network is a sandbox provider over a test database with its in-memory runtime: sessions holds this process's
// sessions, and reach is the runtime its sessions are opened with (sessions, or a cluster of processes).
type network struct {
	t        *testing.T
	db       *store.DB
	p        *Provider
	sessions *sessions
	reach    channels.Sessions
}

func newNetwork(t *testing.T, db *store.DB, opts Options) *network {
	if opts.Poll == 0 {
		opts.Poll = time.Hour // so that a test passes by wake-ups and timers alone, never thanks to a poll
	}
	rt := &sessions{live: map[string]*session{}, done: map[string]int{}}
	return &network{t: t, db: db, p: New(db.Sandbox, opts), sessions: rt, reach: rt}
}

// instance is one instance of the network with its sink and its running session.
type instance struct {
	n      *network
	id     string
	config map[string]any
	sink   *recorder
	sess   *session
	cancel context.CancelFunc
	done   chan error
	number string
}

// open opens a session for a new instance (Run not started).
func (n *network) open(config map[string]any) *instance {
	n.t.Helper()
	in := &instance{n: n, id: store.NewID("ins"), config: config, sink: &recorder{}}
	in.reopen(nil)
	return in
}

// reopen opens a new session for the instance, as the runtime does after a restart.
func (in *instance) reopen(creds []byte) {
	in.n.t.Helper()
	s, err := in.n.p.Open(channels.Instance{ID: in.id, WorkspaceID: "ws_test", Config: in.config, Credentials: creds,
		Runtime: in.n.reach}, in.sink)
	if err != nil {
		in.n.t.Fatalf("open: %v", err)
	}
	in.sess = s.(*session)
	in.n.sessions.set(in.id, in.sess)
}

// start runs the session until stop.
func (in *instance) start() {
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel, in.done = cancel, make(chan error, 1)
	go func() { in.done <- in.sess.Run(ctx) }()
	in.n.t.Cleanup(func() { in.stop() })
}

// stop cancels Run and returns what it returned (nil if it had returned already and was collected).
func (in *instance) stop() error {
	if in.cancel == nil {
		return nil
	}
	in.cancel()
	in.cancel = nil
	return <-in.done
}

// ended waits for Run to return on its own and returns its error.
func (in *instance) ended(t *testing.T) error {
	t.Helper()
	err := await.Receive(t, "Run to return", in.done)
	in.cancel()
	in.cancel = nil
	return err
}

// control runs a test control through the runtime, as the API does.
func (in *instance) control(c channels.Control) error {
	args, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = in.n.sessions.Do(context.Background(), in.id, channels.Command{Op: OpControl, Args: args})
	return err
}

// connected starts an instance that pairs at once and waits until it is connected.
func (n *network) connected(config map[string]any) *instance {
	n.t.Helper()
	if config == nil {
		config = map[string]any{}
	}
	config["auto_pair"] = true
	in := n.open(config)
	in.start()
	in.number = in.sink.wait(n.t, "connected", 1)[0].party.Address
	in.waitState(n.t, channels.StatusConnected)
	return in
}

func (in *instance) waitState(t *testing.T, s channels.Status) event {
	t.Helper()
	return in.sink.waitFor(t, "state "+string(s), func(e event) bool { return e.kind == "state" && e.status == s })
}

// send sends a text message and returns the provider id.
func (in *instance) send(t *testing.T, chat, text string) string {
	t.Helper()
	sent, err := in.sess.Send(context.Background(), channels.Outbound{MessageID: store.NewID("msg"), Chat: chat,
		Type: channels.TypeText, Text: text})
	if err != nil {
		t.Fatalf("send to %s: %v", chat, err)
	}
	return sent.ProviderID
}

// failureCode returns the code of err's *channels.Failure, or fails t.
func failureCode(t *testing.T, err error) string {
	t.Helper()
	var f *channels.Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a *channels.Failure, got %v", err)
	}
	return f.Code
}

// texts are the texts of the inbound messages a sink recorded, in order.
func (r *recorder) texts() []string {
	var out []string
	for _, e := range r.of("inbound") {
		out = append(out, e.inbound.Text)
	}
	return out
}

// receipts are the receipts of a message a sink recorded, statuses in order.
func (r *recorder) receiptsOf(id string) []string {
	var out []string
	for _, e := range r.of("receipt") {
		if e.receipt.ProviderID == id {
			out = append(out, e.receipt.Status)
		}
	}
	return out
}

// freeNumber draws a number no other test uses (the PostgreSQL database is shared by the tests of the binary).
func freeNumber() string { return numberPrefix + "1" + randomDigits(9) }
