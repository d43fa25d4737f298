package xmpp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

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
	sink := newRecorder()
	s, err := p.Open(channels.Instance{ID: id, WorkspaceID: "ws_test", Config: cfg}, sink)
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
	t    testing.TB
	jid  jid.JID
	xs   *xmpp.Session
	mu   sync.Mutex
	msgs []inMessage
	pres []inPresence
	// autoReceipts answers receipt requests, as a person's app does.
	autoReceipts bool
}

func dialPeer(t testing.TB, srv *prosodytest.Server, account, password string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(srv.CAPEM))
	origin := jid.MustParse(account + "/phone")
	xs, err := xmpp.NewClientSession(ctx, origin, conn,
		xmpp.StartTLS(&tls.Config{ServerName: srv.Domain, RootCAs: pool}),
		xmpp.SASL("", password, sasl.ScramSha1),
		bindResource(origin, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, jid: origin, xs: xs}
	go func() {
		_ = xs.Serve(xmpp.HandlerFunc(func(r xmlstream.TokenReadEncoder, start *xml.StartElement) error {
			d := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), r))
			switch start.Name.Local {
			case "message":
				var m inMessage
				if d.Decode(&m) == nil {
					p.mu.Lock()
					p.msgs = append(p.msgs, m)
					receipts := p.autoReceipts
					p.mu.Unlock()
					if receipts && m.Request != nil && m.ID != "" {
						// As a person's app does: the receipt goes out as the message arrives.
						return r.Encode(outMessage{ID: newID(), To: m.From, Type: m.Type, Received: &xmlNSID{nsReceipts, m.ID}})
					}
				}
			case "presence":
				var pr inPresence
				if d.Decode(&pr) == nil {
					p.mu.Lock()
					p.pres = append(p.pres, pr)
					p.mu.Unlock()
				}
			}
			return nil
		}))
	}()
	t.Cleanup(func() { xs.Close(); conn.Close() })
	p.send(`<presence/>`)
	return p
}

// send writes one raw stanza to the peer's stream.
func (p *peer) send(raw string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.xs.Send(ctx, xml.NewDecoder(strings.NewReader(raw))); err != nil {
		p.t.Fatalf("peer send %s: %v", raw, err)
	}
}

// message waits for a message match accepts.
func (p *peer) message(what string, match func(inMessage) bool) inMessage {
	p.t.Helper()
	return await.Until(p.t, what, func() inMessage {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, m := range p.msgs {
			if match(m) {
				return m
			}
		}
		return inMessage{}
	}, func(m inMessage) bool { return m.XMLName.Local != "" })
}

func (p *peer) presence(what string, match func(inPresence) bool) inPresence {
	p.t.Helper()
	return await.Until(p.t, what, func() inPresence {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.pres {
			if match(pr) {
				return pr
			}
		}
		return inPresence{}
	}, func(pr inPresence) bool { return pr.XMLName.Local != "" })
}

func body(m inMessage) string {
	if m.Body == nil {
		return ""
	}
	return *m.Body
}
