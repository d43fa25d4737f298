package xmpp

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/providertest"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestConformance(t *testing.T) {
	providertest.Conformance(t, providertest.Harness{
		Network: conformanceNetwork,
		Addresses: []string{"Alice@Example.ORG", "xmpp:bob@example.org?message", "carol@example.org/phone", "example.org",
			"", "@example.org", "a@b@c", "a@.."},
		NotApplicable: map[providertest.Rule]string{
			providertest.RuleRetryAnswerLost: "Prosody acknowledges a stanza on the stream that took it: the test " +
				"cannot make it take a message and lose the acknowledgement",
			providertest.RuleSinkAfterCommit: "the provider keeps no state of its own: the server holds the account's " +
				"messages, roster and rooms",
			providertest.RuleFailedTerminal: "XMPP reports no failure of a message once the server took it (a bounce " +
				"is logged, the message stays sent)",
			providertest.RuleLogoutRevokes: "the password is the instance's config: logout ends the session, and " +
				"only the account or the server's admin changes the password",
		},
	})
}

// conformanceNetwork is a real Prosody with two accounts per instance: the instance's and its peer's, whose plain
// client stands for a person's app.
func conformanceNetwork(t *testing.T, _ providertest.Env) providertest.Network {
	srv := prosodytest.Start(t)
	var n atomic.Int64
	return providertest.Network{
		Provider: func() channels.Provider { return New(Options{PingInterval: time.Hour}) },
		Account: func(t *testing.T) providertest.Account {
			k := n.Add(1)
			account := srv.Register(fmt.Sprintf("conformance%d", k), "secret-instance")
			peerAccount := srv.Register(fmt.Sprintf("peer%d", k), "secret-peer")
			return providertest.Account{Config: srv.Config(account, "secret-instance"),
				Peer: &conformancePeer{Client: srv.Dial(peerAccount, "secret-peer"), address: peerAccount, account: account}}
		},
		Stranger: "nobody@" + srv.Domain,
	}
}

// conformancePeer is a second account's plain client.
type conformancePeer struct {
	*prosodytest.Client
	address string
	account string // the instance's
}

func (p *conformancePeer) Address() string { return p.address }

func (p *conformancePeer) Send(ctx context.Context, text string) error {
	var body bytes.Buffer
	if err := xml.EscapeText(&body, []byte(text)); err != nil {
		return err
	}
	return p.Write(ctx, fmt.Sprintf(`<message to=%q id=%q type="chat"><body>%s</body></message>`, p.account,
		store.NewID("peer"), body.String()))
}

// Received lists the messages with a body the instance's account sent the peer.
func (p *conformancePeer) Received(context.Context) ([]providertest.Delivery, error) {
	var out []providertest.Delivery
	for _, s := range p.Client.Received() {
		from, err := jid.Parse(s.From)
		if s.Name == "message" && s.Body != "" && err == nil && from.Bare().String() == p.account {
			out = append(out, providertest.Delivery{ID: s.ID, Text: s.Body})
		}
	}
	return out, nil
}

// Receipt answers a message the peer received with a delivery receipt (XEP-0184) or a displayed marker
// (XEP-0333), to the connection that sent it, as soon as the message is there.
func (p *conformancePeer) Receipt(ctx context.Context, providerID, status string) error {
	var tmpl string
	switch status {
	case "delivered":
		tmpl = `<message to=%q id=%q><received xmlns="urn:xmpp:receipts" id=%q/></message>`
	case "read":
		tmpl = `<message to=%q id=%q type="chat"><displayed xmlns="urn:xmpp:chat-markers:0" id=%q/></message>`
	default:
		return fmt.Errorf("XMPP has no %s receipts: %w", status, errors.ErrUnsupported)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range p.Client.Received() {
			if s.Name == "message" && s.ID == providerID {
				return p.Write(ctx, fmt.Sprintf(tmpl, s.From, store.NewID("peer"), providerID))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the peer never received %s: %w", providerID, ctx.Err())
		case <-tick.C:
		}
	}
}
