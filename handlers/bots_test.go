package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/internal/bots"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// botEnv is the whole product over db as serve builds it — channel runtime and bots running — with one fake
// OpenAI-compatible upstream serving llama3.1, and a key of a sandbox workspace.
func botEnv(t *testing.T, db *store.DB) (*msgEnv, *llmtest.Server) {
	t.Helper()
	return botEnvWith(t, db, bots.Config{})
}

// botEnvWith is botEnv with the bot engine tuned by bc.
func botEnvWith(t *testing.T, db *store.DB, bc bots.Config) (*msgEnv, *llmtest.Server) {
	t.Helper()
	a, f := apptest.WithBots(t, db, app.Config{Bots: bc})
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

// neverAsked fails the test if a request to the upstream held text: a message no bot was to answer.
func neverAsked(t *testing.T, upstream *llmtest.Server, text string) {
	t.Helper()
	for _, r := range upstream.Requests() {
		if strings.Contains(fmt.Sprint(r["messages"]), text) {
			t.Fatalf("the upstream was asked about %q: %v", text, r)
		}
	}
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
		// While the bot worked, Alice saw Bob typing (the sandbox shows chat states).
		typing := await.Until(t, "Bob typing at Alice", func() []gen.PresenceUpdatedEvent { return e.presenceEvents(alice.Id) },
			func(evs []gen.PresenceUpdatedEvent) bool { return len(evs) > 0 })
		if typing[0].State != "typing" || !slices.Contains(typing[0].Contact.Addresses, bob.Account.Address) || typing[0].ChatId == nil ||
			*typing[0].ChatId != answer.ChatId {
			t.Errorf("Alice's first presence event = %+v", typing[0])
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
		neverAsked(t, upstream, "are you there?")
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
		var bl gen.BotList
		e.get("/api/v1/instances/"+carol.Id+"/bots", &bl)
		if len(bl.Data) != 1 || bl.Data[0].Id != carolBot.Id {
			t.Errorf("carol's bots = %+v", bl.Data)
		}
	})
}

// A message from an instance of this server that has a bot is a bot's: answering it could start a loop between two
// bots, so it is not answered.
func TestBotsIgnoreOtherBots(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, upstream := botEnv(t, db)
		alice, bob, carol := e.connected("Alice"), e.connected("Bob"), e.connected("Carol")
		e.createBot(bob, `{"name":"Bob's","kind":"model","model":{"model":"llama3.1"}}`)
		e.createBot(carol, `{"name":"Carol's","kind":"model","model":{"model":"llama3.1"}}`)
		e.say(carol, bob.Account.Address, "from one bot to another")
		e.received(bob, "from one bot to another")
		// A person's later message is answered: by then the earlier one was passed over.
		e.say(alice, bob.Account.Address, "from a person")
		e.received(alice, "echo: from a person")
		neverAsked(t, upstream, "from one bot")
	})
}

// workflow is a workflow service: it records each signed request and answers what the test chose.
type workflow struct {
	url      string
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	answer   func(body map[string]any) (int, string)
}

func newWorkflow(t *testing.T) *workflow {
	w := &workflow{}
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		w.mu.Lock()
		w.requests, w.bodies = append(w.requests, r), append(w.bodies, body)
		answer := w.answer
		w.mu.Unlock()
		status, out := answer(m)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, out)
	}))
	t.Cleanup(hs.Close)
	w.url = hs.URL + "/webhook/bot"
	return w
}

func (w *workflow) calls() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.requests) }

func TestWorkflowBot(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, _ := botEnvWith(t, db, bots.Config{Attempts: 2, RetryDelay: time.Millisecond})
		alice, bob := e.connected("Alice"), e.connected("Bob")
		flow := newWorkflow(t)
		flow.answer = func(body map[string]any) (int, string) {
			msg := body["message"].(map[string]any)
			if msg["text"] == "break" {
				return http.StatusInternalServerError, `{"error": "boom"}`
			}
			if msg["text"] == "agent please" {
				return http.StatusOK, `{"handoff": true}`
			}
			return http.StatusOK, fmt.Sprintf(`{"replies": ["got: %s", "history: %d"]}`, msg["text"], len(body["history"].([]any)))
		}
		bot := e.createBot(bob, fmt.Sprintf(`{"name":"n8n","kind":"workflow","workflow":{"url":%q},"trigger":{"type":"regex","pattern":"^[a-z ]+$"}}`, flow.url))
		if bot.SigningSecret == nil || !strings.HasPrefix(*bot.SigningSecret, "whsec_") || *bot.Workflow.TimeoutSeconds != 15 {
			t.Fatalf("bot = %+v", bot)
		}
		var again gen.Bot
		if e.get("/api/v1/instances/"+bob.Id+"/bots/"+bot.Id, &again); again.SigningSecret != nil {
			t.Error("the signing secret is shown again")
		}

		// Answered with two messages; the request verifies with the official Standard Webhooks library.
		e.say(alice, bob.Account.Address, "hello flow")
		e.received(alice, "got: hello flow")
		e.received(alice, "history: 1")
		wh, err := standardwebhooks.NewWebhook(*bot.SigningSecret)
		if err != nil {
			t.Fatal(err)
		}
		flow.mu.Lock()
		req, body := flow.requests[0], flow.bodies[0]
		flow.mu.Unlock()
		if err := wh.Verify(body, req.Header); err != nil {
			t.Errorf("the official library rejects the bot's request: %v", err)
		}

		// Text the trigger does not take is not sent to the workflow; a failing workflow is tried Attempts times,
		// then bot.failed.
		e.say(alice, bob.Account.Address, "NOT FOR THE BOT")
		e.say(alice, bob.Account.Address, "break")
		var evs gen.EventList
		await.Until(t, "bot.failed", func() int {
			e.get("/api/v1/events?type=bot.failed", &evs)
			return len(evs.Data)
		}, func(n int) bool { return n == 1 })
		failed, _ := evs.Data[0].Data.AsBotFailedEvent()
		if failed.Attempts != 2 || failed.Reason != "the workflow answered 500" || failed.BotId != bot.Id {
			t.Errorf("bot.failed = %+v", failed)
		}
		if n := flow.calls(); n != 3 {
			t.Errorf("the workflow got %d requests, want 1 + 2 tries", n)
		}

		// The workflow hands over.
		e.say(alice, bob.Account.Address, "agent please")
		await.Until(t, "bot.handoff", func() int {
			e.get("/api/v1/events?type=bot.handoff", &evs)
			return len(evs.Data)
		}, func(n int) bool { return n == 1 })
		handoff, _ := evs.Data[0].Data.AsBotHandoffEvent()
		if handoff.Reason != "workflow" || handoff.PausedUntil == nil {
			t.Errorf("bot.handoff = %+v", handoff)
		}
	})
}

func TestBotsAreTheirWorkspacesAndChecked(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, _ := botEnv(t, db)
		bob := e.connected("Bob")
		bot := e.createBot(bob, `{"name":"Bob's","kind":"model","model":{"model":"llama3.1"}}`)
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		for _, r := range []request{
			{path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id},
			{path: "/api/v1/instances/" + bob.Id + "/bots"},
			{method: http.MethodPatch, path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id, body: `{"enabled":false}`},
			{method: http.MethodDelete, path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id},
			{method: http.MethodPost, path: "/api/v1/instances/" + bob.Id + "/bots", body: `{"name":"x","kind":"model","model":{"model":"llama3.1"}}`},
		} {
			r.key = otherKey
			e.do(r).problem(t, http.StatusNotFound, "not_found")
		}
		for body, pointer := range map[string]string{
			`{"name":"x","kind":"model","model":{"model":"gpt-9"}}`:                                             "/model/model",
			`{"name":"x","kind":"model"}`:                                                                       "/model",
			`{"name":"x","kind":"workflow","workflow":{"url":"http://10.0.0.1/hook"}}`:                          "/workflow/url",
			`{"name":"x","kind":"model","model":{"model":"llama3.1"},"trigger":{"type":"regex","pattern":"("}}`: "/trigger/pattern",
			`{"name":"x","kind":"model","model":{"model":"llama3.1"},"trigger":{"type":"keyword"}}`:             "/trigger/pattern",
		} {
			p := e.post("/api/v1/instances/"+bob.Id+"/bots", body).problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["pointer"] != pointer {
				t.Errorf("%s: errors = %v, want %s", body, p.Errors, pointer)
			}
		}
		res := e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id, key: e.apiKey,
			body: `{"enabled":false,"replies_per_minute":2}`})
		var updated gen.Bot
		if res.json(t, &updated); !(!updated.Enabled && updated.RepliesPerMinute == 2 && updated.Model.Model == "llama3.1") {
			t.Errorf("updated = %d %s", res.StatusCode, res.body)
		}
		if res := e.do(request{method: http.MethodDelete, path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id, key: e.apiKey}); res.StatusCode != http.StatusNoContent {
			t.Errorf("delete: %d %s", res.StatusCode, res.body)
		}
		e.do(request{path: "/api/v1/instances/" + bob.Id + "/bots/" + bot.Id, key: e.apiKey}).problem(t, http.StatusNotFound, "not_found")
	})
}

// A bot answers at most replies_per_minute messages of a chat a minute.
func TestBotReplyLimitPerChat(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, upstream := botEnv(t, db)
		alice, bob, carol := e.connected("Alice"), e.connected("Bob"), e.connected("Carol")
		e.createBot(bob, `{"name":"Bob's","kind":"model","model":{"model":"llama3.1"},"replies_per_minute":1}`)
		e.createBot(carol, `{"name":"Carol's","kind":"model","model":{"model":"llama3.1"}}`)
		e.say(alice, bob.Account.Address, "first question")
		e.received(alice, "echo: first question")
		e.say(alice, bob.Account.Address, "second question")
		e.received(bob, "second question")
		// Carol's bot answering a later message shows that the second question was considered by then.
		e.say(alice, carol.Account.Address, "ping")
		e.received(alice, "echo: ping")
		neverAsked(t, upstream, "second question")
	})
}

// A model bot's tokens_per_day counts the tokens its upstream reported over 24 hours; once they are spent the bot
// answers nothing more, each unanswered message a failed run saying when tokens come free.
func TestBotTokensPerDay(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, upstream := botEnv(t, db)
		alice, bob := e.connected("Alice"), e.connected("Bob")
		perRun := llmtest.PromptTokens + llmtest.CompletionTokens
		b := e.createBot(bob, fmt.Sprintf(`{"name":"Thrifty","kind":"model","model":{"model":"llama3.1","tokens_per_day":%d}}`,
			perRun+1))
		if b.Model == nil || b.Model.TokensPerDay == nil || *b.Model.TokensPerDay != perRun+1 {
			t.Fatalf("tokens_per_day not kept: %+v", b.Model)
		}
		// The first two are admitted (the second on the tokens spent before it), which takes the bot past its limit.
		for _, q := range []string{"first question", "second question"} {
			e.say(alice, bob.Account.Address, q)
			e.received(alice, "echo: "+q)
		}
		e.say(alice, bob.Account.Address, "third question")
		third := e.received(bob, "third question")
		var got gen.Bot
		await.Until(t, "the third message's run", func() []gen.BotRun {
			e.get("/api/v1/instances/"+bob.Id+"/bots/"+b.Id, &got)
			return *got.RecentRuns
		}, func(runs []gen.BotRun) bool { return len(runs) == 3 && runs[0].Status == gen.BotRunStatusFailed })
		runs := *got.RecentRuns
		if runs[0].Reason == nil || !strings.Contains(*runs[0].Reason, fmt.Sprintf("tokens_per_day (%d) are spent: %d", perRun+1, 2*perRun)) ||
			runs[0].Tokens != 0 || runs[0].Attempts != 0 {
			t.Fatalf("the refused run: %+v (reason %v)", runs[0], runs[0].Reason)
		}
		for _, r := range runs[1:] {
			if r.Status != gen.BotRunStatusReplied || r.Tokens != perRun {
				t.Fatalf("an answered run: %+v", r)
			}
		}
		neverAsked(t, upstream, "third question")
		var evs gen.EventList
		await.Until(t, "bot.failed", func() int {
			e.get("/api/v1/events?type=bot.failed", &evs)
			return len(evs.Data)
		}, func(n int) bool { return n == 1 })
		if failed, _ := evs.Data[0].Data.AsBotFailedEvent(); failed.MessageId != third.Id || failed.Reason != *runs[0].Reason {
			t.Fatalf("bot.failed = %+v", failed)
		}
	})
}
