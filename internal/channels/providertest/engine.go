package providertest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

// This file is the suite's one adapter to the engine: the messaging service, the channel runtime and the store.
// The checks see instances, messages and sessions through the methods below, so that a change of how the engine
// is wired, or of its types, changes this file and not the checks.

// engine is the messaging service and the channel runtime over one database, as a serve process wires them, with
// the provider under test registered and every sink call of its sessions recorded.
type engine struct {
	db       *store.DB
	svc      *channels.Service
	hub      *hub.Hub
	net      Network
	provider channels.Provider
	hooks    *httptest.Server
	// calls are the sink calls of every session the runtime opened and of every push.
	calls recorder

	mu sync.Mutex
	// live is the last session the runtime opened for each instance.
	live map[string]*opened
	// observed are the errors the provider returned to the suite, for RuleFailureCodes; late the sink calls
	// sessions made after the runtime let go of them, and uncommitted what Network.Committed refused.
	observed    []observed
	late        []Call
	uncommitted []string
	// instances are those the checks created.
	instances []*instance
}

// observed is an error the provider returned: where it came from, and whether the call was a command (a call of
// the API carried to the session, where only a *channels.Failure or a sentinel of channels maps to a problem).
type observed struct {
	where   string
	err     error
	command bool
}

// opened is a session the runtime opened, the sink the runtime gave it, and whether the runtime let go of it.
type opened struct {
	sess    channels.Session
	sink    channels.Sink
	stopped atomic.Bool
}

// start runs the engine over db with the network of h until the test ends.
func start(t *testing.T, db *store.DB, h Harness) *engine {
	t.Helper()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &engine{db: db, live: map[string]*opened{}}
	e.hooks = httptest.NewServer(http.HandlerFunc(e.push))
	t.Cleanup(e.hooks.Close)
	// As a serve process wires them, one way: the provider, the records over it, the runtime over the records
	// (seen through ledger), the service over both.
	e.net = h.Network(t, Env{DB: db, HookURL: func(id string) string {
		return e.hooks.URL + "/hooks/channels/" + id
	}})
	e.provider = e.net.Provider()
	rec, err := channels.NewRecorder(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box,
		Logger: quiet, Providers: []channels.Provider{e.provider}})
	if err != nil {
		t.Fatal(err)
	}
	// A lease of 6 s gives sends 4 s (two thirds of it) and notices a lost lease within 2 s; no pacing, and a
	// short backoff, so that the checks wait on the network and not on the runtime's caution.
	e.hub = hub.New(db, ledger{Ledger: rec, e: e}, hub.Options{Owner: "conformance-" + rand.Text()[:8],
		Lease: 6 * time.Second, Rate: -1, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, Logger: quiet})
	if e.svc, err = channels.New(rec, e.hub); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// ledger is the service as the runtime's ledger, with the provider's sessions and sinks seen on their way.
type ledger struct {
	channels.Ledger
	e *engine
}

func (l ledger) Open(ctx context.Context, id string) (channels.Instance, channels.Provider, channels.Sink, error) {
	inst, p, sink, err := l.Ledger.Open(ctx, id)
	if err != nil {
		return inst, p, sink, err
	}
	return inst, opener{Provider: p, e: l.e}, l.e.tap(id, sink), nil
}

// opener opens the provider's sessions for the runtime and keeps each with the sink the runtime gave it.
type opener struct {
	channels.Provider
	e *engine
}

func (o opener) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	op := &opened{sink: sink}
	watch := &tap{instance: inst.ID, next: sink, seen: func(_ context.Context, c Call) {
		if op.stopped.Load() {
			o.e.mu.Lock()
			o.e.late = append(o.e.late, c)
			o.e.mu.Unlock()
		}
	}}
	sess, err := o.Provider.Open(inst, watch)
	if err != nil {
		return nil, err
	}
	op.sess = sess
	o.e.mu.Lock()
	o.e.live[inst.ID] = op
	o.e.mu.Unlock()
	return sess, nil
}

// tap puts the recording, and the network's check of its own commits, in front of an instance's sink.
func (e *engine) tap(id string, sink channels.Sink) channels.Sink {
	return &tap{instance: id, next: sink, done: e.calls.add, seen: func(ctx context.Context, c Call) {
		if e.net.Committed == nil {
			return
		}
		if err := e.net.Committed(ctx, c); err != nil {
			e.mu.Lock()
			e.uncommitted = append(e.uncommitted, fmt.Sprintf("%s: %v", c, err))
			e.mu.Unlock()
		}
	}}
}

// push is the hook URL: it applies a push as the service's Receive does, through the recorded sink.
func (e *engine) push(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/hooks/channels/")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	inst, p, sink, err := e.svc.Open(r.Context(), id)
	rcv, ok := p.(channels.PushReceiver)
	if err != nil || !ok {
		http.NotFound(w, r)
		return
	}
	ans, err := rcv.Receive(r.Context(), inst, e.tap(id, sink), channels.Push{Method: r.Method, Header: r.Header,
		Query: r.URL.Query(), Body: body})
	switch {
	case errors.Is(err, channels.ErrPushUnverified):
		http.Error(w, err.Error(), http.StatusUnauthorized)
	case errors.As(err, new(*channels.Failure)):
		// A verified push the provider cannot read: the service answers it 400.
		e.observe("a push to the hook URL", err, true)
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		e.observe("a push to the hook URL", err, true)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case ans.Challenge != "":
		_, _ = io.WriteString(w, ans.Challenge)
	default:
		_ = json.NewEncoder(w).Encode(ans)
	}
}

// observe keeps an error the provider returned, for RuleFailureCodes.
func (e *engine) observe(where string, err error, command bool) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed = append(e.observed, observed{where: where, err: err, command: command})
}

// instance is an instance of the provider in the engine, in a workspace of its own (so that what it records is
// told apart from the rest of the run), connected as a new account of the network.
type instance struct {
	e    *engine
	ws   string
	id   string
	acct Account
}

// connect creates an instance for a new account of the network, connects it through the runtime, and has its
// peer write to it first (a network may only let the account write to people who wrote before: Telegram's
// bots, WhatsApp's window).
func (e *engine) connect(t *testing.T) *instance {
	t.Helper()
	ctx := context.Background()
	ws, err := e.db.Workspaces.Create(ctx, "conformance")
	if err != nil {
		t.Fatal(err)
	}
	acct := e.net.Account(t)
	inst, err := e.svc.Create(ctx, ws.ID, channels.NewInstance{Name: "conformance",
		Provider: e.provider.Info().Name, Config: acct.Config})
	if err != nil {
		t.Fatalf("creating an instance with the account's config: %v", err)
	}
	i := &instance{e: e, ws: ws.ID, id: inst.ID, acct: acct}
	e.mu.Lock()
	e.instances = append(e.instances, i)
	e.mu.Unlock()
	if acct.Attach != nil {
		acct.Attach(inst.ID)
	}
	i.connect(t)
	i.introduce(t)
	return i
}

// connect asks the runtime to connect the instance and waits until it is connected; disconnect and logout end
// its session through the service.
func (i *instance) connect(t *testing.T) {
	t.Helper()
	i.change(t, i.e.svc.Connect, channels.StatusConnected)
}
func (i *instance) disconnect(t *testing.T) {
	t.Helper()
	i.change(t, i.e.svc.Disconnect, channels.StatusDisconnected)
}
func (i *instance) logout(t *testing.T) {
	t.Helper()
	i.change(t, i.e.svc.Logout, channels.StatusLoggedOut)
}

// change calls a method of the service on the instance and waits until the instance is in the status want.
func (i *instance) change(t *testing.T, call func(ctx context.Context, ws, id string) (store.Instance, error), want channels.Status) {
	t.Helper()
	if _, err := call(context.Background(), i.ws, i.id); err != nil {
		t.Fatal(err)
	}
	i.awaitStatus(t, want)
}

// introduce has the peer write to the account and waits until the instance recorded it.
func (i *instance) introduce(t *testing.T) {
	t.Helper()
	text := unique("hello from the peer")
	if err := i.acct.Peer.Send(context.Background(), text); err != nil {
		t.Fatalf("the peer's first message: %v", err)
	}
	i.e.calls.await(t, "the peer's first message to reach the sink", i.id, func(c Call) bool {
		return c.Kind == "inbound" && c.Inbound.Text == text && c.Err == nil
	})
}

// state is what the engine keeps of an instance.
type state struct {
	Status      channels.Status
	Reason      string
	Account     string // the account's address, "" without one
	Credentials []byte // unsealed
}

func (i *instance) state(t *testing.T) state {
	t.Helper()
	ctx := context.Background()
	inst, err := i.e.svc.Get(ctx, i.ws, i.id)
	if err != nil {
		t.Fatal(err)
	}
	s := state{Status: channels.Status(inst.Status), Reason: inst.StatusReason}
	if inst.Account != nil {
		s.Account = inst.Account.Address
	}
	opened, _, _, err := i.e.svc.Open(ctx, i.id)
	if err != nil {
		t.Fatal(err)
	}
	s.Credentials = opened.Credentials
	return s
}

func (i *instance) awaitStatus(t *testing.T, want channels.Status) state {
	t.Helper()
	return await.Until(t, fmt.Sprintf("instance %s to be %s", i.id, want), func() state { return i.state(t) },
		func(s state) bool { return s.Status == want })
}

// session returns the instance's live session, once the runtime holds it connected.
func (i *instance) session(t *testing.T) channels.Session {
	t.Helper()
	return i.opened(t).sess
}

func (i *instance) opened(t *testing.T) *opened {
	t.Helper()
	i.awaitStatus(t, channels.StatusConnected)
	return await.Until(t, "the runtime to hold the instance's session", func() *opened {
		i.e.mu.Lock()
		defer i.e.mu.Unlock()
		return i.e.live[i.id]
	}, func(o *opened) bool { return o != nil && o.sess != nil && i.e.holds(i.id) })
}

// sender is the live session as a Sender; every provider sends.
func (i *instance) sender(t *testing.T) channels.Sender {
	t.Helper()
	s, ok := i.session(t).(channels.Sender)
	if !ok {
		t.Fatalf("the provider's session is no channels.Sender")
	}
	return s
}

// raw is the instance as a provider's Open takes it, secrets and credentials unsealed.
func (i *instance) raw(t *testing.T) channels.Instance {
	t.Helper()
	inst, _, _, err := i.e.svc.Open(context.Background(), i.id)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// message is what the engine keeps of a message the instance sent.
type message struct {
	ID         string
	Status     string
	ProviderID string
	History    []string // statuses, in order
	Details    []string // of each step
	Failure    string   // its code, "" unless failed
}

// send sends a text to the peer through the service and the runtime's queue, and returns the message's ID.
func (i *instance) send(t *testing.T, text string) string {
	t.Helper()
	to := i.acct.Peer.Address()
	m, _, err := i.e.svc.Send(context.Background(), i.ws, i.id, channels.MessageDraft{Type: channels.TypeText, To: &to, Text: &text})
	if err != nil {
		t.Fatalf("sending through the service: %v", err)
	}
	return m.ID
}

func (i *instance) message(t *testing.T, id string) message {
	t.Helper()
	m, err := i.e.svc.GetMessage(context.Background(), i.ws, i.id, id)
	if err != nil {
		t.Fatal(err)
	}
	out := message{ID: m.ID, Status: m.Status}
	if m.ProviderMessageID != nil {
		out.ProviderID = *m.ProviderMessageID
	}
	if m.Failure != nil {
		out.Failure = m.Failure.Code
	}
	for _, h := range m.StatusHistory {
		out.History = append(out.History, h.Status)
		out.Details = append(out.Details, h.Detail)
	}
	return out
}

func (i *instance) awaitMessage(t *testing.T, id string, done func(message) bool) message {
	t.Helper()
	return await.Until(t, "message "+id, func() message { return i.message(t, id) }, done)
}

// failedMessages are the failure codes of the messages that failed, of every instance the checks created.
func (e *engine) failedMessages(t *testing.T) map[string]string {
	t.Helper()
	e.mu.Lock()
	instances := append([]*instance(nil), e.instances...)
	e.mu.Unlock()
	out := map[string]string{}
	for _, i := range instances {
		ms, _, err := e.svc.ListMessages(context.Background(), i.ws, i.id, store.MessageFilter{Status: "failed"},
			store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Failure != nil {
				out[m.ID] = m.Failure.Code
			}
		}
	}
	return out
}

// holds reports whether the runtime holds the instance's lease.
func (e *engine) holds(id string) bool {
	for _, h := range e.hub.Held() {
		if h == id {
			return true
		}
	}
	return false
}

// thief is the owner the suite takes leases over as, standing for another process.
const thief = "conformance-thief"

// loseLease makes the runtime lose the instance's lease to another process, waits until it let go of the
// session, and returns the session it had.
func (i *instance) loseLease(t *testing.T) *opened {
	t.Helper()
	op := i.opened(t)
	// Acquire takes a lease that ran out by its at: an hour ahead, the runtime's lease has.
	took, err := i.e.db.InstanceLeases.Acquire(context.Background(), thief, "", []string{i.id}, time.Now().Add(time.Hour), time.Hour)
	if err != nil || len(took) != 1 {
		t.Fatalf("taking the lease over: %v, %v", took, err)
	}
	await.Until(t, "the runtime to let go of the instance", func() bool { return i.e.holds(i.id) },
		func(held bool) bool { return !held })
	op.stopped.Store(true)
	return op
}

// returnLease gives the lease taken by loseLease up: the runtime takes the instance again.
func (i *instance) returnLease(t *testing.T) {
	t.Helper()
	if err := i.e.db.InstanceLeases.Release(context.Background(), thief, []string{i.id}); err != nil {
		t.Fatal(err)
	}
}

// trace is what the engine recorded of an instance: its status and account, its events and messages.
type trace struct {
	Status   channels.Status
	Account  string
	Events   int64
	Messages int64
}

func (i *instance) trace(t *testing.T) trace {
	t.Helper()
	ctx := context.Background()
	s := i.state(t)
	evs, err := i.e.db.Events.CountOf(ctx, i.ws)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := i.e.db.Messages.CountOf(ctx, i.id)
	if err != nil {
		t.Fatal(err)
	}
	return trace{Status: s.Status, Account: s.Account, Events: evs, Messages: ms}
}

// lateCalls are the sink calls sessions made after the runtime let go of them.
func (e *engine) lateCalls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.late...)
}

// errors are the errors the provider returned.
func (e *engine) errors() []observed {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]observed(nil), e.observed...)
}

// refusedCommits are the sink calls Network.Committed found made before the provider's commit.
func (e *engine) refusedCommits() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.uncommitted...)
}
