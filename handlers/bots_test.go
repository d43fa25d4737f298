package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// botEnv is the whole product over db as serve builds it — channel runtime and bots running — with one fake
// OpenAI-compatible upstream serving llama3.1, and a key of a sandbox workspace.
func botEnv(t *testing.T, db *store.DB) (*msgEnv, *llmtest.Server) {
	t.Helper()
	f := llmtest.New(t, "sk-upstream", "llama3.1")
	a := apptest.New(t, db, app.Config{Egress: apptest.Loopback,
		ModelUpstreams: []llm.Upstream{{Name: "local", BaseURL: f.URL, APIKey: "sk-upstream"}},
		// Unpaced (pacing has its own tests), with a short lease so that a test's end frees it.
		Channels: hub.Options{Rate: -1, Lease: 3 * time.Second}})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = a.Runtime.Run(ctx); done <- struct{}{} }()
	go func() { _ = a.Bots.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { stop(); <-done; <-done })
	e := &msgEnv{env: newAppEnv(t, a, handlers.Config{KeyRateLimit: 1 << 20, WorkspaceRateLimit: 1 << 20}), channels: a.Messaging}
	e.ws = e.workspace("Sandbox")
	e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
	return e, f
}

// say sends a text from one instance to an address and returns the message.
func (e *msgEnv) say(from gen.Instance, to, text string) gen.Message {
	e.t.Helper()
	res := e.post("/api/v1/instances/"+from.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":%q}`, to, text))
	if res.StatusCode != http.StatusAccepted {
		e.t.Fatalf("send: %d %s", res.StatusCode, res.body)
	}
	var m gen.Message
	res.json(e.t, &m)
	return m
}

// received waits until an instance received a text and returns it.
func (e *msgEnv) received(inst gen.Instance, text string) gen.Message {
	e.t.Helper()
	var found gen.Message
	await.Until(e.t, inst.Account.Address+" receives "+text, func() bool {
		var l gen.MessageList
		e.get("/api/v1/instances/"+inst.Id+"/messages?direction=inbound&limit=100", &l)
		for _, m := range l.Data {
			if m.Text != nil && *m.Text == text {
				found = m
				return true
			}
		}
		return false
	}, func(ok bool) bool { return ok })
	return found
}

func (e *msgEnv) createBot(inst gen.Instance, body string) gen.Bot {
	e.t.Helper()
	res := e.post("/api/v1/instances/"+inst.Id+"/bots", body)
	if res.StatusCode != http.StatusCreated {
		e.t.Fatalf("create bot: %d %s", res.StatusCode, res.body)
	}
	var b gen.Bot
	res.json(e.t, &b)
	return b
}

func TestModelBotAnswersAndHandsOverToAHuman(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, upstream := botEnv(t, db)
		alice, bob, carol := e.connected("Alice"), e.connected("Bob"), e.connected("Carol")
		bot := e.createBot(bob, `{"name":"Front desk","kind":"model",
			"model":{"model":"llama3.1","system_prompt":"You answer in one sentence.","memory":4},
			"handoff":{"keyword":"human","minutes":0}}`)
		if bot.Kind != "model" || !bot.Enabled || bot.Trigger.Type != "all" || bot.RepliesPerMinute != 6 || bot.SigningSecret != nil {
			t.Fatalf("bot = %+v", bot)
		}
		carolBot := e.createBot(carol, `{"name":"Carol's","kind":"model","model":{"model":"llama3.1"}}`)

		// Alice writes to Bob; Bob's bot answers through the upstream, and the answer reaches Alice.
		e.say(alice, bob.Account.Address, "hello Bob")
		answer := e.received(alice, "echo: hello Bob")
		if answer.From.Address != bob.Account.Address {
			t.Errorf("answer from %s", answer.From.Address)
		}
		call := upstream.Requests()[0]
		msgs := call["messages"].([]any)
		if call["model"] != "llama3.1" || len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "You answer in one sentence." {
			t.Errorf("upstream request = %v", call)
		}
		// Bob's reply is an ordinary outbound message, marked as the bot's.
		var sent gen.MessageList
		e.get("/api/v1/instances/"+bob.Id+"/messages?direction=outbound", &sent)
		if len(sent.Data) != 1 || sent.Data[0].Metadata["bot_id"] != bot.Id {
			t.Fatalf("bob's outbound = %+v", sent.Data)
		}
		chat := sent.Data[0].ChatId
		var evs gen.EventList
		e.get("/api/v1/events?type=bot.replied", &evs)
		if len(evs.Data) != 1 {
			t.Fatalf("bot.replied events = %d", len(evs.Data))
		}

		// "human" pauses the bots of the chat until resumed, and says so.
		e.say(alice, bob.Account.Address, "Human ")
		await.Until(t, "bot.handoff", func() int {
			e.get("/api/v1/events?type=bot.handoff", &evs)
			return len(evs.Data)
		}, func(n int) bool { return n == 1 })
		// While paused, nothing is answered. Carol's bot answering a later message shows that the bots have
		// considered Bob's message by then (they take messages in the order they arrived).
		e.say(alice, bob.Account.Address, "are you there?")
		e.received(bob, "are you there?")
		e.say(alice, carol.Account.Address, "ping")
		e.received(alice, "echo: ping")
		for _, r := range upstream.Requests() {
			if strings.Contains(fmt.Sprint(r["messages"]), "are you there?") {
				t.Fatalf("the paused chat was answered: %v", r)
			}
		}
		var got gen.Bot
		e.get("/api/v1/instances/"+bob.Id+"/bots/"+bot.Id, &got)
		if runs := *got.RecentRuns; len(runs) != 2 || runs[0].Status != "handoff" || runs[1].Status != "replied" ||
			runs[1].ReplyMessageId == nil || *runs[1].ReplyMessageId != sent.Data[0].Id {
			t.Fatalf("runs = %+v", runs)
		}

		// Resumed by hand, the bot answers again.
		var state gen.ChatBotState
		res := e.post("/api/v1/instances/"+bob.Id+"/chats/"+chat+"/bot", `{"action":"resume"}`)
		if res.json(t, &state); res.StatusCode != http.StatusOK || state.Paused {
			t.Fatalf("resume: %d %s", res.StatusCode, res.body)
		}
		e.say(alice, bob.Account.Address, "back?")
		e.received(alice, "echo: back?")

		// Paused by hand, for a while.
		res = e.post("/api/v1/instances/"+bob.Id+"/chats/"+chat+"/bot", `{"action":"pause","minutes":30}`)
		if res.json(t, &state); !state.Paused || state.PausedUntil == nil || *state.Reason != "manual" {
			t.Fatalf("pause: %d %s", res.StatusCode, res.body)
		}
		_ = carolBot
	})
}
