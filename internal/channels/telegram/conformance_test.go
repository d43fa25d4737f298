package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/providertest"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestConformance(t *testing.T) {
	providertest.Conformance(t, providertest.Harness{
		Network:   conformanceNetwork,
		Addresses: []string{"123456789", "-1001234567890", "@Acme_Bot", " 42 ", "", "0", "@ab", "+15550100", "12a"},
		NotApplicable: map[providertest.Rule]string{
			providertest.RuleStatusesForward: "Telegram tells bots nothing of delivery or reading: a message ends at sent",
			providertest.RuleSinkAfterCommit: "the provider keeps no state of its own: Telegram holds the bot's " +
				"chats and messages",
			providertest.RuleLogoutRevokes: "the bot token is the instance's config: logout stops the bot's updates, " +
				"and only @BotFather revokes the token",
		},
	})
}

// conformanceNetwork is the fake Bot API with a bot per account, updates by long polling (the suite's engine has
// no public https URL), and Telegram's spacing of sends shortened to nothing.
func conformanceNetwork(t *testing.T, _ providertest.Env) providertest.Network {
	fake := telegramtest.Start(t)
	opts := Options{PollTimeout: 2 * time.Second, ChatInterval: time.Nanosecond, GroupInterval: time.Nanosecond,
		BotInterval: time.Nanosecond}
	var n atomic.Int64
	return providertest.Network{
		Provider: func() channels.Provider { return New(opts) },
		Account: func(t *testing.T) providertest.Account {
			k := n.Add(1)
			token := fake.AddBot(7_000_000_000+k, fmt.Sprintf("conformance%d_bot", k))
			p := &peer{fake: fake, token: token, user: telegramtest.User{ID: 500_000 + k, FirstName: "Peer"}}
			return providertest.Account{
				Config: map[string]any{"bot_token": token, "api_url": fake.URL, "inbound": "polling"},
				Peer:   p, LoseAnswer: func() { fake.LoseAnswers("sendMessage", 1) },
				Faults: faults(fake, token, p.Address(), 600_000+k),
			}
		},
		Stranger: "424242",
	}
}

// faults are the Bot API's refusals of a send and of a group call.
func faults(fake *telegramtest.Server, token, peer string, blocker int64) []providertest.Fault {
	send := func(ctx context.Context, sess channels.Session, chat string) error {
		_, err := sess.(channels.Sender).Send(ctx, channels.Outbound{MessageID: store.NewID("msg"), Chat: chat,
			Type: channels.TypeText, Text: "a send the network refuses"})
		return err
	}
	refuse := func(method string, f telegramtest.Failure) { fake.Fail(method, 1, f) }
	return []providertest.Fault{
		{Name: "a rate limit", Run: func(ctx context.Context, sess channels.Session) error {
			refuse("sendMessage", telegramtest.Failure{Status: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7})
			return send(ctx, sess, peer)
		}},
		{Name: "a token Telegram no longer accepts", Run: func(ctx context.Context, sess channels.Session) error {
			refuse("sendMessage", telegramtest.Failure{Status: 401, Description: "Unauthorized"})
			return send(ctx, sess, peer)
		}},
		{Name: "a server error", Run: func(ctx context.Context, sess channels.Session) error {
			refuse("sendMessage", telegramtest.Failure{Status: 500, Description: "Internal Server Error"})
			return send(ctx, sess, peer)
		}},
		{Name: "a person who blocked the bot", Run: func(ctx context.Context, sess channels.Session) error {
			fake.Message(token, telegramtest.User{ID: blocker, FirstName: "Blocker"}, "hi")
			fake.Block(token, blocker)
			return send(ctx, sess, strconv.FormatInt(blocker, 10))
		}},
		{Name: "a group the bot is not in", Run: func(ctx context.Context, sess channels.Session) error {
			refuse("getChat", telegramtest.Failure{Status: 403, Description: "Forbidden: bot is not a member of the supergroup chat"})
			_, err := sess.(channels.GroupManager).GetGroup(ctx, "-1001234567890")
			return err
		}},
	}
}

// peer is a Telegram user who wrote to the bot.
type peer struct {
	fake  *telegramtest.Server
	token string
	user  telegramtest.User
}

func (p *peer) Address() string { return strconv.FormatInt(p.user.ID, 10) }

// Send hands the user's message to the bot's pending updates (a webhook push, were one set).
func (p *peer) Send(_ context.Context, text string) error {
	update, _ := p.fake.Message(p.token, p.user, text)
	if status := p.fake.Push(p.token, update); status != 0 && status != 200 {
		return fmt.Errorf("the push of the update was answered %d", status)
	}
	return nil
}

func (p *peer) Received(context.Context) ([]providertest.Delivery, error) {
	var out []providertest.Delivery
	for _, c := range p.fake.Calls("sendMessage") {
		if c.Token == p.token && c.Params["chat_id"] == p.Address() && c.Status == 200 {
			out = append(out, providertest.Delivery{Text: c.Params["text"]})
		}
	}
	return out, nil
}

func (p *peer) Receipt(context.Context, string, string) error {
	return fmt.Errorf("Telegram sends bots no receipts: %w", errors.ErrUnsupported)
}
