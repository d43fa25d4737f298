package whatsappcloud

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/providertest"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud/cloudtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestConformance(t *testing.T) {
	providertest.Conformance(t, providertest.Harness{
		Network: conformanceNetwork,
		Addresses: []string{"+1 (555) 010-0002", "15550100002", "+49 30 1234567", "+15550100002", "", "+0123456789",
			"12345", "+1555abc0100"},
		NotApplicable: map[providertest.Rule]string{
			providertest.RuleSinkAfterCommit: "the provider keeps no state of its own: Meta holds the number's messages",
			providertest.RuleLogoutRevokes: "the access token is the instance's config: it is revoked in Meta's " +
				"business settings, not by a session",
		},
	})
}

// The peer's number, and a number without WhatsApp.
const (
	peerNumber     = "15550100002"
	strangerNumber = "15550199999"
)

// conformanceNetwork is a fake Graph API per account (the fake has one phone number), pushing to the instance's
// hook URL.
func conformanceNetwork(t *testing.T, env providertest.Env) providertest.Network {
	return providertest.Network{
		Provider: func() channels.Provider { return New(Options{}) },
		Account: func(t *testing.T) providertest.Account {
			fake := cloudtest.Start(t)
			fake.NotOnWhatsApp(strangerNumber)
			return providertest.Account{
				Config: map[string]any{"phone_number_id": fake.PhoneID, "business_account_id": fake.WABAID,
					"access_token": fake.Token, "app_secret": fake.AppSecret, "verify_token": "conformance-verify",
					"base_url": fake.URL},
				Peer:       &peer{fake: fake},
				Attach:     func(id string) { fake.Callback = env.HookURL(id) },
				LoseAnswer: fake.LoseAnswer,
				Faults:     faults(fake),
			}
		},
		Stranger: "+" + strangerNumber,
	}
}

// faults are Meta's refusals of a send, and a push that verifies but is no notification.
func faults(fake *cloudtest.Server) []providertest.Fault {
	send := func(ctx context.Context, sess channels.Session, m channels.Outbound) error {
		m.MessageID, m.Chat = store.NewID("msg"), "+"+peerNumber
		if m.Type == "" {
			m.Type, m.Text = channels.TypeText, "a send the network refuses"
		}
		_, err := sess.(channels.Sender).Send(ctx, m)
		return err
	}
	refused := func(name string, f cloudtest.Failure) providertest.Fault {
		return providertest.Fault{Name: name, Run: func(ctx context.Context, sess channels.Session) error {
			fake.Fail(1, f)
			return send(ctx, sess, channels.Outbound{})
		}}
	}
	return []providertest.Fault{
		refused("a rate limit", cloudtest.Failure{Status: 400, Code: 130429, Message: "Rate limit hit"}),
		refused("a server error", cloudtest.Failure{Status: 500, Code: 131000, Message: "Something went wrong"}),
		refused("a closed window", cloudtest.Failure{Status: 400, Code: 131047, Message: "Re-engagement message"}),
		refused("a token Meta no longer accepts", cloudtest.Failure{Status: 401, Code: 190, Message: "Invalid OAuth access token"}),
		{Name: "a template the account does not have", Run: func(ctx context.Context, sess channels.Session) error {
			return send(ctx, sess, channels.Outbound{Type: channels.TypeTemplate,
				Template: &channels.Template{Name: "no_such_template", Language: "en_US"}})
		}},
		// The suite's hook URL keeps what the provider answers the push.
		{Name: "a verified push that is no notification", Run: func(context.Context, channels.Session) error {
			fake.PushRaw([]byte(`["not", "a", "notification"]`))
			return nil
		}},
	}
}

// peer is a WhatsApp user who wrote to the business number.
type peer struct{ fake *cloudtest.Server }

func (p *peer) Address() string { return "+" + peerNumber }

func (p *peer) Send(_ context.Context, text string) error {
	return p.push(cloudtest.Text(peerNumber, "Peer", "wamid.in"+store.NewID(""), text))
}

func (p *peer) Received(context.Context) ([]providertest.Delivery, error) {
	var out []providertest.Delivery
	for _, s := range p.fake.Sent() {
		if text, ok := s.Body["text"].(map[string]any); ok && s.Body["to"] == peerNumber {
			body, _ := text["body"].(string)
			out = append(out, providertest.Delivery{ID: s.ID, Text: body})
		}
	}
	return out, nil
}

// Receipt pushes Meta's status of a message; a failed one carries the code of a number without WhatsApp.
func (p *peer) Receipt(_ context.Context, providerID, status string) error {
	code := 0
	if status == "failed" {
		code = 131026
	}
	return p.push(cloudtest.Status(providerID, status, peerNumber, code))
}

func (p *peer) push(value map[string]any) error {
	if status := p.fake.Push(value); status != http.StatusOK {
		return fmt.Errorf("the hook URL answered the push %d", status)
	}
	return nil
}
