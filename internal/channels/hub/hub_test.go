package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fakeNet is a network for the runtime's tests: sessions connect at once (or fail as told), and sends are recorded
// in the order the network received them.
type fakeNet struct {
	mu sync.Mutex
	// sent holds the sends received, per chat, in order (a retried send appears once per attempt); resent whether
	// each attempt of a message came marked as a Resend.
	sent   map[string][]string
	resent map[string][]bool
	// inFlight counts the sends running per chat; overlap records a chat that ever had two at once.
	inFlight map[string]int
	overlap  []string
	// failures are the outcomes of the next sends of a message ID, consumed one per attempt.
	failures map[string][]error
	// runErr, when set, is what Run returns at once for an instance (after reporting connecting).
	runErr map[string]error
	// opens counts the sessions opened per instance.
	opens map[string]int
	// sendDelay slows every send down (to see overlap).
	sendDelay time.Duration
}

func newFakeNet() *fakeNet {
	return &fakeNet{sent: map[string][]string{}, resent: map[string][]bool{}, inFlight: map[string]int{}, failures: map[string][]error{},
		runErr: map[string]error{}, opens: map[string]int{}}
}

func (n *fakeNet) sends(chat string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.sent[chat])
}

func (n *fakeNet) failNext(messageID string, errs ...error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures[messageID] = append(n.failures[messageID], errs...)
}

type fakeProvider struct{ net *fakeNet }

func (p fakeProvider) Info() channels.Info {
	return channels.Info{Name: "fake", Title: "Fake", Capabilities: []channels.Capability{channels.CapText},
		AuthMethods: []channels.AuthMethod{channels.AuthToken}, ConfigSchema: map[string]any{"type": "object"}}
}
func (fakeProvider) NormalizeAddress(raw string) (string, error) { return raw, nil }
func (fakeProvider) ValidateConfig(map[string]any) error         { return nil }
func (p fakeProvider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	return &fakeSession{net: p.net, id: inst.ID, sink: sink}, nil
}

// pacedProvider is the fake network under another name, whose network punishes bursts: one message a minute.
type pacedProvider struct{ fakeProvider }

func (p pacedProvider) Info() channels.Info {
	i := p.fakeProvider.Info()
	i.Name = "paced"
	return i
}
func (pacedProvider) DefaultPacing() channels.Pacing { return channels.Pacing{Rate: 1, Burst: 1} }

type fakeSession struct {
	net  *fakeNet
	id   string
	sink channels.Sink
}

func (s *fakeSession) Run(ctx context.Context) error {
	s.net.mu.Lock()
	s.net.opens[s.id]++
	runErr := s.net.runErr[s.id]
	s.net.mu.Unlock()
	if err := s.sink.State(ctx, channels.StatusConnecting, "connecting"); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if err := s.sink.Connected(ctx, channels.Party{Address: "acct-" + s.id}, []byte("creds")); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func (s *fakeSession) Logout(context.Context) error { return nil }

func (s *fakeSession) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	n := s.net
	n.mu.Lock()
	n.sent[m.Chat] = append(n.sent[m.Chat], m.MessageID)
	n.resent[m.MessageID] = append(n.resent[m.MessageID], m.Resend)
	if n.inFlight[m.Chat]++; n.inFlight[m.Chat] > 1 {
		n.overlap = append(n.overlap, m.Chat)
	}
	var err error
	if fs := n.failures[m.MessageID]; len(fs) > 0 {
		err, n.failures[m.MessageID] = fs[0], fs[1:]
	}
	delay := n.sendDelay
	n.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	n.mu.Lock()
	n.inFlight[m.Chat]--
	n.mu.Unlock()
	if err != nil {
		return channels.Sent{}, err
	}
	// The fake network cannot recognise a repeat.
	return channels.Sent{ProviderID: "p-" + m.MessageID, PossibleRepeat: m.MayRepeat()}, nil
}

// Handle answers the test op "fake.echo" with its args, or fails with the Failure they describe.
func (s *fakeSession) Handle(_ context.Context, c channels.Command) (json.RawMessage, error) {
	if c.Op != "fake.echo" {
		return nil, channels.ErrUnsupported
	}
	var a struct {
		Fail string `json:"fail"`
	}
	_ = json.Unmarshal(c.Args, &a)
	if a.Fail != "" {
		return nil, &channels.Failure{Code: a.Fail, Detail: "asked to fail", RetryAfter: 2 * time.Second}
	}
	return json.RawMessage(fmt.Sprintf(`{"instance":%q,"args":%s}`, s.id, c.Args)), nil
}

// env is a messaging service over a database with the fake network, and the workspace the tests use.
type env struct {
	t   *testing.T
	db  *store.DB
	rec *channels.Recorder
	// svc is the service over the runtime started last (the API of the process it stands for).
	svc *channels.Service
	net *fakeNet
	ws  string
}

func newEnv(t *testing.T, db *store.DB) *env {
	t.Helper()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet()
	rec, err := channels.NewRecorder(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box,
		Providers: []channels.Provider{fakeProvider{net: n}, pacedProvider{fakeProvider{net: n}}}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := db.Workspaces.Create(context.Background(), "hub")
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, db: db, rec: rec, net: n, ws: ws.ID}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs a hub until the test ends (or stop is called) and builds the service over it.
func (e *env) start(opts Options) (h *Hub, stop func()) {
	e.t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.Lease == 0 {
		opts.Lease = 2 * time.Second
	}
	if opts.Rate == 0 {
		opts.Rate = -1
	}
	h = New(e.db, e.rec, opts)
	e.serve(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return h, stop
}

// serve builds the service over h, as the process that runs h builds its API.
func (e *env) serve(h *Hub) {
	e.t.Helper()
	svc, err := channels.New(e.rec, h)
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

func (e *env) instance(name string) store.Instance {
	e.t.Helper()
	inst, err := e.svc.Create(context.Background(), e.ws, channels.NewInstance{Name: name, Provider: "fake"})
	if err != nil {
		e.t.Fatal(err)
	}
	return inst
}

func (e *env) connect(id string) {
	e.t.Helper()
	if _, err := e.svc.Connect(context.Background(), e.ws, id); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) status(id string, want channels.Status) store.Instance {
	e.t.Helper()
	return await.Until(e.t, "instance "+id+" "+string(want), func() store.Instance {
		i, err := e.svc.Get(context.Background(), e.ws, id)
		if err != nil {
			e.t.Fatal(err)
		}
		return i
	}, func(i store.Instance) bool { return channels.Status(i.Status) == want })
}

func (e *env) send(instanceID, to, text string) store.Message {
	e.t.Helper()
	m, _, err := e.svc.Send(context.Background(), e.ws, instanceID, channels.MessageDraft{Type: channels.TypeText, To: &to, Text: &text})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) message(instanceID, id string) store.Message {
	e.t.Helper()
	m, err := e.svc.GetMessage(context.Background(), e.ws, instanceID, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) awaitStatus(instanceID, id, want string) store.Message {
	e.t.Helper()
	return await.Until(e.t, "message "+id+" "+want, func() store.Message { return e.message(instanceID, id) },
		func(m store.Message) bool { return m.Status == want })
}

func TestSendsInOrderPerChatOneAtATime(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.net.sendDelay = 2 * time.Millisecond
		e.start(Options{})
		inst := e.instance("a")
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)

		chats := []string{"chat-1", "chat-2", "chat-3"}
		want := map[string][]string{}
		var last store.Message
		for i := range 45 {
			chat := chats[i%len(chats)]
			last = e.send(inst.ID, chat, fmt.Sprint("m", i))
			want[chat] = append(want[chat], last.ID)
		}
		for chat, ids := range want {
			for _, id := range ids {
				e.awaitStatus(inst.ID, id, "sent")
			}
			if got := e.net.sends(chat); !slices.Equal(got, ids) {
				t.Errorf("%s: the network received %v, want %v", chat, got, ids)
			}
		}
		if len(e.net.overlap) > 0 {
			t.Errorf("chats with two sends at once: %v", e.net.overlap)
		}
		m := e.message(inst.ID, last.ID)
		if m.ProviderMessageID == nil || *m.ProviderMessageID != "p-"+last.ID {
			t.Errorf("provider id = %v", m.ProviderMessageID)
		}
		var statuses []string
		for _, h := range m.StatusHistory {
			statuses = append(statuses, h.Status)
		}
		if !slices.Equal(statuses, []string{"queued", "sending", "sent"}) {
			t.Errorf("history = %v", statuses)
		}
		st, err := e.svc.QueueStats(context.Background(), e.ws, inst.ID)
		if err != nil || st.Depth != 0 || st.InFlight != 0 {
			t.Errorf("stats = %+v, %v", st, err)
		}
	})
}

func TestRetriesKeepTheChatsOrder(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{})
		// Messages queued while the instance is offline, with the outcomes of their sends arranged: the network asks
		// to wait, then a transient error, then takes it; the next message of the chat waits all along.
		e2 := e.instance("b")
		m1 := e.send(e2.ID, "chat", "one")
		m2 := e.send(e2.ID, "chat", "two")
		e.net.failNext(m1.ID, &channels.Failure{Code: "rate_limited", Retryable: true, RetryAfter: 50 * time.Millisecond},
			errors.New("connection reset"))
		m3 := e.send(e2.ID, "other", "three")
		e.net.failNext(m3.ID, &channels.Failure{Code: "recipient_not_on_network", Detail: "no such account"})
		e.connect(e2.ID)
		e.awaitStatus(e2.ID, m2.ID, "sent")
		if got := e.net.sends("chat"); !slices.Equal(got[len(got)-4:], []string{m1.ID, m1.ID, m1.ID, m2.ID}) {
			t.Errorf("chat sends = %v, want m1 three times then m2", got)
		}
		// Every attempt after the first is a Resend, and a network that cannot recognise the repeat leaves a note
		// on the sent step; a message sent at the first attempt has none.
		e.net.mu.Lock()
		resent := slices.Clone(e.net.resent[m1.ID])
		e.net.mu.Unlock()
		if !slices.Equal(resent, []bool{false, true, true}) {
			t.Errorf("m1's attempts were resends %v, want [false true true]", resent)
		}
		if h := e.message(e2.ID, m1.ID).StatusHistory; !strings.Contains(h[len(h)-1].Detail, "may have it twice") {
			t.Errorf("m1's sent step %+v says nothing of a possible repeat", h[len(h)-1])
		}
		if h := e.message(e2.ID, m2.ID).StatusHistory; h[len(h)-1].Detail != "" {
			t.Errorf("m2, sent at once, has the detail %q", h[len(h)-1].Detail)
		}
		failed := e.awaitStatus(e2.ID, m3.ID, "failed")
		if failed.Failure == nil || failed.Failure.Code != "recipient_not_on_network" {
			t.Errorf("failure = %+v", failed.Failure)
		}
		var q []store.SendItem
		if err := db.Bun().NewSelect().Model(&q).Scan(context.Background()); err != nil || len(q) != 0 {
			t.Errorf("queue left %d items (%v)", len(q), err)
		}
	})
}

func TestTransientFailuresFailTheMessageAfterMaxAttempts(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{MaxAttempts: 2})
		inst := e.instance("a")
		m := e.send(inst.ID, "chat", "doomed")
		e.net.failNext(m.ID, errors.New("boom 1"), errors.New("boom 2"))
		e.connect(inst.ID)
		got := e.awaitStatus(inst.ID, m.ID, "failed")
		if got.Failure == nil || got.Failure.Code != "network_error" || !strings.Contains(got.Failure.Detail, "boom 2") {
			t.Errorf("failure = %+v", got.Failure)
		}
	})
}

func TestCancelAndPurgeWhileDisconnected(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{})
		inst := e.instance("a")
		var ms []store.Message
		for i := range 4 {
			ms = append(ms, e.send(inst.ID, "chat", fmt.Sprint(i)))
		}
		st, err := e.svc.QueueStats(context.Background(), e.ws, inst.ID)
		if err != nil || st.Depth != 4 || st.Oldest == nil {
			t.Fatalf("stats = %+v, %v", st, err)
		}
		if m, err := e.svc.Cancel(context.Background(), e.ws, inst.ID, ms[1].ID); err != nil || m.Status != "canceled" {
			t.Fatalf("cancel = %s, %v", m.Status, err)
		}
		if _, err := e.svc.Cancel(context.Background(), e.ws, inst.ID, ms[1].ID); err == nil {
			t.Fatal("a second cancel succeeded")
		}
		ids, err := e.svc.Purge(context.Background(), e.ws, inst.ID)
		if err != nil || !slices.Equal(ids, []string{ms[0].ID, ms[2].ID, ms[3].ID}) {
			t.Fatalf("purge = %v, %v", ids, err)
		}
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		last := e.send(inst.ID, "chat", "after")
		e.awaitStatus(inst.ID, last.ID, "sent")
		if got := e.net.sends("chat"); !slices.Equal(got, []string{last.ID}) {
			t.Errorf("sent = %v, want only the message after the purge", got)
		}
		for _, m := range ms {
			if s := e.message(inst.ID, m.ID).Status; s != "canceled" {
				t.Errorf("%s is %s", m.ID, s)
			}
		}
	})
}

func TestPacingHoldsSendsBack(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{Rate: 1, Burst: 2})
		inst := e.instance("a")
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		var ms []store.Message
		for i := range 4 {
			ms = append(ms, e.send(inst.ID, fmt.Sprint("chat-", i), "x"))
		}
		e.awaitStatus(inst.ID, ms[0].ID, "sent")
		e.awaitStatus(inst.ID, ms[1].ID, "sent")
		// The burst is spent: at one a minute the next may go out 42 s later at the soonest.
		st, err := e.svc.QueueStats(context.Background(), e.ws, inst.ID)
		if err != nil || st.Depth != 2 || st.Rate != 1 || st.Burst != 2 {
			t.Fatalf("stats = %+v, %v", st, err)
		}
		for _, m := range ms[2:] {
			if s := e.message(inst.ID, m.ID).Status; s != "queued" {
				t.Errorf("%s is %s, want still queued", m.ID, s)
			}
		}
	})
}

func TestPacerTokensAndJitter(t *testing.T) {
	p := newPacer(60, 3)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if _, ok := p.admit(t0); !ok {
			t.Fatalf("send %d of the burst refused", i)
		}
	}
	next, ok := p.admit(t0)
	if ok || next.Before(t0.Add(700*time.Millisecond)) || next.After(t0.Add(1300*time.Millisecond)) {
		t.Fatalf("after the burst: %v %v, want refused until 0.7–1.3 s later", ok, next.Sub(t0))
	}
	if !p.ready(next) || p.ready(next.Add(-time.Millisecond)) {
		t.Fatal("ready does not keep to the jittered time admit gave")
	}
	if _, ok := p.admit(next); !ok {
		t.Fatal("refused at the time it gave")
	}
	// The jitter is drawn anew for every wait: twenty waits are not all the same.
	waits := map[time.Duration]bool{}
	at := next
	for range 20 {
		n, ok := p.admit(at)
		if ok {
			t.Fatal("admitted with an empty bucket")
		}
		waits[n.Sub(at)] = true
		if _, ok := p.admit(n); !ok {
			t.Fatal("refused at the time it gave")
		}
		at = n
	}
	if len(waits) < 10 {
		t.Errorf("%d distinct waits in 20: the sends tick like a machine", len(waits))
	}
	p.pause(t0.Add(time.Hour))
	if until, ok := p.admit(t0.Add(time.Minute)); ok || !until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("paused: %v %v", ok, until)
	}
	off := newPacer(0, 1)
	for range 100 {
		if _, ok := off.admit(t0); !ok {
			t.Fatal("rate 0 paced")
		}
	}
}

func TestBackoffThenGiveUp(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{BackoffBase: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Budget: 3})
		inst := e.instance("a")
		e.net.runErr[inst.ID] = errors.New("server unreachable")
		e.connect(inst.ID)
		failed := e.status(inst.ID, channels.StatusFailed)
		if !strings.Contains(failed.StatusReason, "gave up after 3 failed attempts in a row: server unreachable") {
			t.Errorf("reason = %q", failed.StatusReason)
		}
		e.net.mu.Lock()
		opens := e.net.opens[inst.ID]
		e.net.mu.Unlock()
		if opens != 4 {
			t.Errorf("opened %d times, want 4 (the first and three retries)", opens)
		}
		// Each retry showed reconnecting with its attempt and time.
		var evs []store.Event
		if err := db.Bun().NewSelect().Model(&evs).Where("type = ?", "instance.status_changed").OrderExpr("id").Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		var moves []string
		for _, ev := range evs {
			var p gen.InstanceStatusChangedEvent
			if err := json.Unmarshal(ev.Data, &p); err != nil {
				t.Fatal(err)
			}
			moves = append(moves, string(p.Status))
		}
		if !slices.Contains(moves, "reconnecting") || moves[len(moves)-1] != "failed" {
			t.Errorf("moves = %v", moves)
		}
		// A connect starts again from zero.
		delete(e.net.runErr, inst.ID)
		e.connect(inst.ID)
		if i := e.status(inst.ID, channels.StatusConnected); i.ReconnectAttempt != 0 {
			t.Errorf("attempt = %d after connecting", i.ReconnectAttempt)
		}
	})
}

func TestOneOwnerAndTakeover(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		a, stopA := e.start(Options{Owner: "a", Lease: time.Second, Stagger: 100 * time.Millisecond})
		var ids []string
		for i := range 6 {
			inst := e.instance(fmt.Sprint("i", i))
			ids = append(ids, inst.ID)
			e.connect(inst.ID)
		}
		for _, id := range ids {
			e.status(id, channels.StatusConnected)
		}
		b, _ := e.start(Options{Owner: "b", Lease: time.Second, Stagger: 100 * time.Millisecond})
		// b finds nothing free while a renews, through passes that span more than a lease.
		since := time.Now()
		await.Until(t, "b's passes over a lease", func() int64 { return b.passes.Load() },
			func(n int64) bool { return n >= 3 && time.Since(since) > 1200*time.Millisecond })
		if got := b.Held(); len(got) != 0 {
			t.Fatalf("b holds %v while a is alive", got)
		}
		sort.Strings(ids)
		if got := a.Held(); !slices.Equal(got, ids) {
			t.Fatalf("a holds %v", got)
		}
		// A command reaches a's sessions through the database, failures keep their code.
		res, err := b.Do(context.Background(), ids[0], channels.Command{Op: "fake.echo", Args: json.RawMessage(`{"x":1}`)})
		if err != nil || !strings.Contains(string(res), ids[0]) {
			t.Fatalf("remote command = %s, %v", res, err)
		}
		_, err = b.Do(context.Background(), ids[0], channels.Command{Op: "fake.echo", Args: json.RawMessage(`{"fail":"nope"}`)})
		var f *channels.Failure
		if !errors.As(err, &f) || f.Code != "nope" || f.RetryAfter != 2*time.Second {
			t.Fatalf("remote failure = %v", err)
		}
		if _, err := b.Do(context.Background(), ids[0], channels.Command{Op: "groups.get"}); !errors.Is(err, channels.ErrUnsupported) {
			t.Fatalf("remote unsupported = %v", err)
		}
		// a stops: b takes every instance, each is connected again, and b sends their messages.
		stopA()
		await.Until(t, "b holds every instance", b.Held, func(h []string) bool { return slices.Equal(h, ids) })
		for _, id := range ids {
			e.status(id, channels.StatusConnected)
		}
		m := e.send(ids[0], "chat", "after the takeover")
		e.awaitStatus(ids[0], m.ID, "sent")
	})
}

func TestStopAndStartAcrossProcesses(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		a, _ := e.start(Options{Owner: "a"})
		inst := e.instance("x")
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		// The API of another process (b) disconnects and connects it; a still holds it.
		b := New(db, e.rec, Options{Owner: "b", Logger: quiet()})
		e.serve(b)
		if _, err := e.svc.Disconnect(context.Background(), e.ws, inst.ID); err != nil {
			t.Fatal(err)
		}
		if i := e.status(inst.ID, channels.StatusDisconnected); i.Credentials == nil {
			t.Error("disconnect dropped the credentials")
		}
		await.Until(t, "a lets go of the instance", a.Held, func(h []string) bool { return len(h) == 0 })
		e.serve(a)
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		if _, err := e.svc.Logout(context.Background(), e.ws, inst.ID); err != nil {
			t.Fatal(err)
		}
		if i := e.status(inst.ID, channels.StatusLoggedOut); i.Credentials != nil || i.Account != nil {
			t.Error("logout kept the credentials")
		}
	})
}

func TestInstancePacingOverridesTheDefault(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		h, _ := e.start(Options{Rate: 1, Burst: 1, Renew: 100 * time.Millisecond})
		inst, err := e.svc.Create(context.Background(), e.ws, channels.NewInstance{Name: "fast", Provider: "fake",
			Pacing: &channels.Pacing{Rate: 0, Burst: 1}})
		if err != nil {
			t.Fatal(err)
		}
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		var last store.Message
		for i := range 5 {
			last = e.send(inst.ID, "chat", fmt.Sprint(i))
		}
		e.awaitStatus(inst.ID, last.ID, "sent")
		st, err := e.svc.QueueStats(context.Background(), e.ws, inst.ID)
		if err != nil || st.Rate != 0 {
			t.Fatalf("stats = %+v, %v", st, err)
		}
		// Slowed down while connected: the next upkeep pass applies it.
		if _, err := e.svc.Update(context.Background(), e.ws, inst.ID, channels.InstanceUpdate{Pacing: &channels.Pacing{Rate: 1, Burst: 1}}); err != nil {
			t.Fatal(err)
		}
		passes := h.passes.Load()
		await.Until(t, "two upkeep passes", h.passes.Load, func(n int64) bool { return n >= passes+2 })
		first, second := e.send(inst.ID, "chat", "a"), e.send(inst.ID, "chat", "b")
		e.awaitStatus(inst.ID, first.ID, "sent")
		if s := e.message(inst.ID, second.ID).Status; s != "queued" {
			t.Errorf("after slowing down to one a minute, the second message is %s", s)
		}
	})
}

// A provider's default pacing holds where the instance has none of its own, even with the server's pacing off; the
// instance's own pacing still wins.
func TestProviderPacingOverridesTheServerDefault(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{Rate: -1, Renew: 100 * time.Millisecond})
		ctx := context.Background()
		paced, err := e.svc.Create(ctx, e.ws, channels.NewInstance{Name: "careful", Provider: "paced"})
		if err != nil {
			t.Fatal(err)
		}
		own, err := e.svc.Create(ctx, e.ws, channels.NewInstance{Name: "own", Provider: "paced",
			Pacing: &channels.Pacing{Rate: 0, Burst: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string][2]int{paced.ID: {1, 1}, own.ID: {0, 1}} {
			if st, err := e.svc.QueueStats(ctx, e.ws, id); err != nil || st.Rate != want[0] || st.Burst != want[1] {
				t.Errorf("queue stats of %s = %+v, %v; want rate %d, burst %d", id, st, err, want[0], want[1])
			}
		}
		for _, id := range []string{paced.ID, own.ID} {
			e.connect(id)
			e.status(id, channels.StatusConnected)
		}
		var last store.Message
		for i := range 3 {
			last = e.send(own.ID, "chat", fmt.Sprint(i))
		}
		e.awaitStatus(own.ID, last.ID, "sent")
		first, second := e.send(paced.ID, "chat", "a"), e.send(paced.ID, "chat", "b")
		e.awaitStatus(paced.ID, first.ID, "sent")
		if s := e.message(paced.ID, second.ID).Status; s != "queued" {
			t.Errorf("at the provider's one a minute, the second message is %s", s)
		}
	})
}

// A session the network restricted for a time is not a failure: the instance shows restricted until the end, no
// process opens it earlier (not the one that saw it, nor one that takes it over meanwhile), and it connects again by
// itself when the restriction ends.
func TestRestrictionWaitsForItsEndAcrossATakeover(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		_, stopA := e.start(Options{Owner: "a", Lease: time.Second, Stagger: 100 * time.Millisecond, Budget: 1})
		inst := e.instance("banned")
		until := time.Now().Add(4 * time.Second)
		e.net.mu.Lock()
		e.net.runErr[inst.ID] = &channels.Restriction{Until: until, Reason: "the network banned the account for a while"}
		e.net.mu.Unlock()
		e.connect(inst.ID)
		r := e.status(inst.ID, channels.StatusRestricted)
		if r.StatusReason != "the network banned the account for a while" || r.ReconnectNextAt == nil ||
			!r.ReconnectNextAt.Equal(until.UTC().Truncate(time.Microsecond)) {
			t.Errorf("restricted with reason %q until %v, want the network's reason until %v", r.StatusReason,
				r.ReconnectNextAt, until)
		}
		e.net.mu.Lock()
		delete(e.net.runErr, inst.ID)
		e.net.mu.Unlock()

		// Another process takes the instance over while it is restricted: it waits for the end too.
		stopA()
		b, _ := e.start(Options{Owner: "b", Lease: time.Second, Stagger: 100 * time.Millisecond})
		await.Until(t, "b holds the instance", b.Held, func(h []string) bool { return slices.Contains(h, inst.ID) })
		if i := e.status(inst.ID, channels.StatusRestricted); i.ReconnectNextAt == nil || !i.ReconnectNextAt.Equal(*r.ReconnectNextAt) {
			t.Errorf("after the takeover: until %v, want %v", i.ReconnectNextAt, r.ReconnectNextAt)
		}
		e.status(inst.ID, channels.StatusConnected)
		if time.Now().Before(until) {
			t.Errorf("connected before the restriction ended")
		}
		e.net.mu.Lock()
		opens := e.net.opens[inst.ID]
		e.net.mu.Unlock()
		if opens != 2 {
			t.Errorf("opened %d times, want 2 (the restricted session, then one at the end)", opens)
		}
		m := e.send(inst.ID, "chat", "after the restriction")
		e.awaitStatus(inst.ID, m.ID, "sent")
	})
}

// Every send that pacing spaced from the one before says so on its sending step: how long after it went and the
// jitter of the wait (within the pacer's ±30 % of a token's 2 s); one that went out of the burst has no such detail.
func TestPacedSendsRecordTheirWait(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.start(Options{Rate: 30, Burst: 1}) // a token every 2 s: the second send is claimed well before it
		inst := e.instance("a")
		e.connect(inst.ID)
		e.status(inst.ID, channels.StatusConnected)
		var ms []store.Message
		for i := range 2 {
			ms = append(ms, e.send(inst.ID, fmt.Sprint("chat-", i), "x"))
		}
		for i, m := range ms {
			sent := e.awaitStatus(inst.ID, m.ID, "sent")
			var detail string
			for _, st := range sent.StatusHistory {
				if st.Status == "sending" {
					detail = st.Detail
				}
			}
			if i == 0 {
				if detail != "" {
					t.Errorf("the first send (the burst) has the detail %q", detail)
				}
				continue
			}
			var spacing, jitter float64
			if _, err := fmt.Sscanf(detail, "paced: sent %f s after the instance's previous send (jitter %f s)", &spacing, &jitter); err != nil {
				t.Errorf("send %d: sending detail %q: %v", i, detail, err)
				continue
			}
			if spacing < 1.3 || jitter < -0.61 || jitter > 0.61 {
				t.Errorf("send %d: %.1f s after the first with a jitter of %+.2f s; want 2 s ± 30 %%", i, spacing, jitter)
			}
		}
	})
}
