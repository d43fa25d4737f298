package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/providertest"
	"github.com/switchboard/switchboard/store"
)

func TestConformance(t *testing.T) {
	providertest.Conformance(t, providertest.Harness{
		Network: conformanceNetwork,
		Addresses: []string{"+999 555 0101", "0099955501 01", "(+999) 555-0101", "tel:+999.555.0101", " +99900000000 ",
			"123456789012345678@G.Sandbox", "+49 30 1234567", "999 555 0101", "12@g.sandbox", ""},
		NotApplicable: map[providertest.Rule]string{
			providertest.RuleRetryAnswerLost: "the sandbox network answers a send in the call that stores it: " +
				"there is no answer to lose between the two",
			providertest.RuleFailedTerminal: "the sandbox reports delivered and read receipts only; a send it " +
				"refuses fails at once",
		},
	})
}

// conformanceNetwork is the sandbox in the suite's database. Receipts come only when the suite's peers report
// them, and peers are sessions this test runs itself beside the suite's runtime.
func conformanceNetwork(t *testing.T, env providertest.Env) providertest.Network {
	rt := &routing{peers: map[string]*session{}}
	opts := Options{Delivered: NoReceipt, Read: NoReceipt, Poll: time.Hour}
	peers := New(env.DB.Sandbox, opts)
	return providertest.Network{
		Provider: func() channels.Provider { return routed{Provider: New(env.DB.Sandbox, opts), rt: rt} },
		Account: func(t *testing.T) providertest.Account {
			number := freeNumber()
			p := startPeer(t, peers, rt, number)
			return providertest.Account{Config: map[string]any{"auto_pair": true, "number": number}, Peer: p,
				Attach: func(id string) { p.instance = id }}
		},
		Stranger:  freeNumber(),
		Committed: committed(env.DB),
	}
}

// committed checks that what a session reports is in the sandbox's own records already: the pairing of an account
// it reports connected, the message a message or a receipt is about, the group it reports changed.
func committed(db *store.DB) func(ctx context.Context, c providertest.Call) error {
	return func(ctx context.Context, c providertest.Call) error {
		var err error
		switch c.Kind {
		case "connected":
			var creds credentials
			if json.Unmarshal(c.Credentials, &creds) != nil {
				return fmt.Errorf("credentials that are not the sandbox's")
			}
			acc, aerr := db.Sandbox.AccountOf(ctx, db.Reader(), c.Instance)
			if aerr == nil && (acc.Number != c.Party.Address || acc.TokenHash == nil || *acc.TokenHash != hashToken(creds.Token)) {
				aerr = errors.New("the account's number or token is not the one reported")
			}
			err = aerr
		case "inbound":
			_, err = db.Sandbox.Message(ctx, db.Reader(), c.Inbound.ProviderID)
		case "receipt":
			_, err = db.Sandbox.Message(ctx, db.Reader(), c.Receipt.ProviderID)
		case "group":
			if c.Change != channels.GroupLeft {
				_, err = db.Sandbox.Group(ctx, db.Reader(), c.Group.Address)
			}
		}
		return err
	}
}

// routing carries commands to the suite's runtime, except those for the peers this test runs itself. It learns
// the runtime from the sessions the runtime opens (routed).
type routing struct {
	mu      sync.Mutex
	runtime channels.Sessions
	peers   map[string]*session
}

func (r *routing) Start(ctx context.Context, id string) error { return r.suite().Start(ctx, id) }
func (r *routing) Stop(ctx context.Context, id string) error  { return r.suite().Stop(ctx, id) }

func (r *routing) Do(ctx context.Context, id string, c channels.Command) (json.RawMessage, error) {
	r.mu.Lock()
	p := r.peers[id]
	r.mu.Unlock()
	if p != nil {
		return p.Handle(ctx, c)
	}
	return r.suite().Do(ctx, id, c)
}

// suite is the suite's runtime: the runtime opens the suite's instance before any command can be carried to it.
func (r *routing) suite() channels.Sessions {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runtime == nil {
		return channels.NoRuntime
	}
	return r.runtime
}

// routed is the sandbox whose sessions wake through routing, so that the suite's sessions reach the peers too.
type routed struct {
	*Provider
	rt *routing
}

func (p routed) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	p.rt.mu.Lock()
	if inst.Runtime != nil && inst.Runtime != channels.Sessions(p.rt) {
		p.rt.runtime = inst.Runtime
	}
	p.rt.mu.Unlock()
	inst.Runtime = p.rt
	return p.Provider.Open(inst, sink)
}

// peer is another instance of the sandbox network, paired with a number of its own, talking to the account.
type peer struct {
	sess     *session
	sink     *recorder
	sessions channels.Sessions
	number   string
	account  string // the number the instance pairs with
	// instance is the instance's ID, whose session takes the receipt controls.
	instance string
}

func startPeer(t *testing.T, p *Provider, rt *routing, account string) *peer {
	t.Helper()
	number := freeNumber()
	sink := &recorder{}
	s, err := p.Open(channels.Instance{ID: store.NewID("ins"), WorkspaceID: "ws_peer",
		Config: map[string]any{"auto_pair": true, "number": number}, Runtime: rt}, sink)
	if err != nil {
		t.Fatal(err)
	}
	sess := s.(*session)
	rt.mu.Lock()
	rt.peers[sess.inst.ID] = sess
	rt.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sess.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	sink.wait(t, "connected", 1)
	return &peer{sess: sess, sink: sink, sessions: rt, number: number, account: account}
}

func (p *peer) Address() string { return p.number }

func (p *peer) Send(ctx context.Context, text string) error {
	_, err := p.sess.Send(ctx, channels.Outbound{MessageID: store.NewID("msg"), Chat: p.account,
		Type: channels.TypeText, Text: text})
	return err
}

func (p *peer) Received(context.Context) ([]providertest.Delivery, error) {
	var out []providertest.Delivery
	for _, e := range p.sink.of("inbound") {
		out = append(out, providertest.Delivery{ID: e.inbound.ProviderID, Text: e.inbound.Text})
	}
	return out, nil
}

// Receipt is the receipt control on the instance's session: the network reports what the peer's app would.
func (p *peer) Receipt(ctx context.Context, providerID, status string) error {
	if status != statusDelivered && status != statusRead {
		return fmt.Errorf("the sandbox reports no %s receipts: %w", status, errors.ErrUnsupported)
	}
	args, err := json.Marshal(channels.Control{Kind: "receipt", MessageID: providerID, Status: status})
	if err != nil {
		return err
	}
	_, err = p.sessions.Do(ctx, p.instance, channels.Command{Op: OpControl, Args: args})
	return err
}
