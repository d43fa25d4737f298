//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/providertest"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestConformance(t *testing.T) {
	providertest.Conformance(t, providertest.Harness{
		Network: conformanceNetwork,
		Addresses: []string{"+1 (555) 010-0002", "15550100002", "15550100002@s.whatsapp.net",
			"15550100002:12@s.whatsapp.net", "120363025246125486@g.us", "120363025246125486@G.US",
			"123456789012345@lid", "", "+0123456789", "12345", "someone@example.com"},
		NotApplicable: map[providertest.Rule]string{
			providertest.RuleFailedTerminal: "WhatsApp reports no failure of a message it took: its receipts are " +
				"delivered, read and played",
		},
	})
}

var numbers atomic.Int64

// conformanceNetwork is the fake WhatsApp of fake_test.go: each account's phone scans the QR code its instance
// shows, and a peer account writes to it.
func conformanceNetwork(t *testing.T, env providertest.Env) providertest.Network {
	n := newNetwork()
	devices := NewDevices(env.DB)
	return providertest.Network{
		Provider: func() channels.Provider {
			p := New(env.DB, Options{NewClient: n.NewClient})
			p.devices = devices // one process's container per database, as a serve process has
			return p
		},
		Account: func(t *testing.T) providertest.Account {
			me := n.add(fmt.Sprintf("1555%07d", numbers.Add(1)), "Conformance")
			peer := n.add(fmt.Sprintf("4930%07d", numbers.Add(1)), "Peer")
			n.mu.Lock()
			n.scanning = append(n.scanning, me)
			n.mu.Unlock()
			return providertest.Account{Config: map[string]any{}, Peer: &peerPhone{n: n, me: peer, to: me},
				LoseAnswer: func() { n.mu.Lock(); me.loseAnswer = true; n.mu.Unlock() }}
		},
		Stranger: "+15559999999",
		// The device is in whatsmeow's store before the instance hears it is connected: a crash after the report
		// never leaves credentials that name no device.
		Committed: func(ctx context.Context, c providertest.Call) error {
			if c.Kind != "connected" {
				return nil
			}
			var creds credentials
			if err := json.Unmarshal(c.Credentials, &creds); err != nil {
				return err
			}
			jid, err := types.ParseJID(creds.JID)
			if err != nil {
				return err
			}
			ok, err := devices.Paired(ctx, jid)
			if err == nil && !ok {
				err = errors.New("the device reported connected is not in the device store")
			}
			return err
		},
	}
}

// peerPhone is the WhatsApp app of another account, writing to the instance's account.
type peerPhone struct {
	n      *network
	me, to *account
}

func (p *peerPhone) Address() string { return "+" + p.me.phone }

// Send writes as WhatsApp delivers to a linked device now: the sender by LID, with the phone number beside it.
func (p *peerPhone) Send(_ context.Context, text string) error {
	p.n.mu.Lock()
	p.n.next++
	id := fmt.Sprintf("3A%018d", p.n.next)
	p.n.mu.Unlock()
	p.n.deliver(p.to, &events.Message{Info: types.MessageInfo{ID: id, Timestamp: time.Now(), PushName: p.me.name,
		MessageSource: types.MessageSource{Chat: p.me.jid(), Sender: p.me.jid(), SenderAlt: p.me.pn(),
			AddressingMode: types.AddressingModeLID}},
		Message: &waE2E.Message{Conversation: proto.String(text)}})
	return nil
}

func (p *peerPhone) Received(context.Context) ([]providertest.Delivery, error) {
	p.n.mu.Lock()
	defer p.n.mu.Unlock()
	var out []providertest.Delivery
	for _, m := range p.me.received {
		text := m.msg.GetConversation()
		if text == "" {
			text = m.msg.GetExtendedTextMessage().GetText()
		}
		out = append(out, providertest.Delivery{ID: m.id, Text: text})
	}
	return out, nil
}

func (p *peerPhone) Receipt(_ context.Context, providerID, status string) error {
	kind := types.ReceiptTypeDelivered
	switch status {
	case "delivered":
	case "read":
		kind = types.ReceiptTypeRead
	default:
		return fmt.Errorf("WhatsApp has no %q receipt", status)
	}
	p.n.deliver(p.to, &events.Receipt{MessageSource: types.MessageSource{Chat: p.me.pn(), Sender: p.me.pn()},
		MessageIDs: []types.MessageID{providerID}, Timestamp: time.Now(), Type: kind})
	return nil
}
