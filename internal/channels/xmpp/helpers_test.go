package xmpp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
)

// recorder is a Sink that keeps everything a session reports.
type recorder struct {
	mu        sync.Mutex
	states    []string // "status reason"
	connected []channels.Party
	inbound   []channels.Inbound
	receipts  []channels.Receipt
	groups    []groupChange
	contacts  map[string]channels.Party
	presences []channels.Presence
	// failInbound makes the next Inbound calls fail, as a sink whose database is down.
	failInbound atomic.Int32
}

type groupChange struct {
	group  channels.Group
	change string
}

func newRecorder() *recorder { return &recorder{contacts: map[string]channels.Party{}} }

func (r *recorder) State(_ context.Context, s channels.Status, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, string(s)+" "+reason)
	return nil
}
func (r *recorder) QR(context.Context, string, time.Time) error {
	return errors.New("xmpp never pairs by QR")
}
func (r *recorder) Connected(_ context.Context, account channels.Party, _ []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connected = append(r.connected, account)
	return nil
}
func (r *recorder) Inbound(_ context.Context, m channels.Inbound) error {
	if r.failInbound.Add(-1) >= 0 {
		return errors.New("the database is down")
	}
	r.failInbound.Store(0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inbound = append(r.inbound, m)
	return nil
}
func (r *recorder) Receipt(_ context.Context, rc channels.Receipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.receipts = append(r.receipts, rc)
	return nil
}
func (r *recorder) GroupChanged(_ context.Context, g channels.Group, change string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups, groupChange{g, change})
	return nil
}
func (r *recorder) Presence(_ context.Context, p channels.Presence) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.presences = append(r.presences, p)
	return nil
}

func (r *recorder) PollVote(context.Context, channels.PollVote) error { return nil }
func (r *recorder) ChatOrganized(context.Context, string, channels.ChatOrganization) error {
	return nil
}
func (r *recorder) LabelChanged(context.Context, channels.NetworkLabel) error { return nil }
func (r *recorder) ChatLabelled(context.Context, string, string, bool) error  { return nil }
func (r *recorder) Call(context.Context, channels.IncomingCall) (channels.CallAnswer, error) {
	return channels.CallAnswer{}, nil
}

func (r *recorder) ContactChanged(_ context.Context, p channels.Party) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contacts[p.Address] = p
	return nil
}

func (r *recorder) connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.connected)
}

func (r *recorder) lastState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return ""
	}
	return r.states[len(r.states)-1]
}

// inboundWhere waits for an inbound message that match accepts.
func (r *recorder) inboundWhere(t testing.TB, what string, match func(channels.Inbound) bool) channels.Inbound {
	t.Helper()
	return await.Until(t, what, func() channels.Inbound {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range r.inbound {
			if match(m) {
				return m
			}
		}
		return channels.Inbound{}
	}, func(m channels.Inbound) bool { return m.ProviderID != "" })
}

func (r *recorder) hasReceipt(id, status string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rc := range r.receipts {
		if rc.ProviderID == id && rc.Status == status {
			return true
		}
	}
	return false
}

func (r *recorder) contact(addr string) channels.Party {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.contacts[addr]
}

func (r *recorder) groupChange(addr, change string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.groups {
		if g.group.Address == addr && g.change == change {
			return true
		}
	}
	return false
}

// running is a session whose Run goes on in the background until the test ends.
type running struct {
	*session
	sink   *recorder
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, with err
	err    error
}

func openSession(t testing.TB, p *Provider, id string, cfg map[string]any) *running {
	t.Helper()
	return runSession(t, p, channels.Instance{ID: id, WorkspaceID: "ws_test", Config: cfg}, newRecorder())
}

// reopen opens the instance's next session and runs it, as the runtime does for every reconnect (a new session,
// the same sink).
func (r *running) reopen(t testing.TB) *running {
	t.Helper()
	return runSession(t, r.p, r.inst, r.sink)
}

func runSession(t testing.TB, p *Provider, inst channels.Instance, sink *recorder) *running {
	t.Helper()
	s, err := p.Open(inst, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{session: s.(*session), sink: sink, cancel: cancel, done: make(chan struct{})}
	go func() { r.err = s.Run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

// ended waits for Run to return and returns its error.
func (r *running) ended(t testing.TB) error {
	t.Helper()
	await.Receive(t, "Run to return", r.done)
	return r.err
}

// connect starts a session and waits until it reports connected.
func connect(t testing.TB, p *Provider, id string, cfg map[string]any) *running {
	t.Helper()
	r := openSession(t, p, id, cfg)
	await.Until(t, "the session to connect", func() int {
		select {
		case <-r.done:
			t.Fatalf("Run returned %v (states %v)", r.err, r.sink.states)
		default:
		}
		return r.sink.connections()
	}, func(n int) bool { return n > 0 })
	return r
}

// peer is a second account driven by a plain XMPP client, as a person's app would.
type peer struct {
	*prosodytest.Client
	t testing.TB
}

func dialPeer(t testing.TB, srv *prosodytest.Server, account, password string) *peer {
	t.Helper()
	return &peer{Client: srv.Dial(account, password), t: t}
}

func (p *peer) send(raw string) {
	p.t.Helper()
	p.Send(raw)
}

// message waits for a message match accepts.
func (p *peer) message(what string, match func(inMessage) bool) inMessage {
	p.t.Helper()
	var m inMessage
	p.Wait(what, func(s prosodytest.Stanza) bool {
		var got inMessage
		if s.Name != "message" || s.Decode(&got) != nil || !match(got) {
			return false
		}
		m = got
		return true
	})
	return m
}

func (p *peer) presence(what string, match func(inPresence) bool) inPresence {
	p.t.Helper()
	var pr inPresence
	p.Wait(what, func(s prosodytest.Stanza) bool {
		var got inPresence
		if s.Name != "presence" || s.Decode(&got) != nil || !match(got) {
			return false
		}
		pr = got
		return true
	})
	return pr
}

func body(m inMessage) string {
	if m.Body == nil {
		return ""
	}
	return *m.Body
}
