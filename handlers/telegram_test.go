package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// publicURL stands for the server's public https URL in the Telegram tests: the fake reroutes its pushes from it to
// the test server, as a TLS-terminating proxy would.
const publicURL = "https://switchboard.test"

// The Telegram provider against a fake Bot API server that follows the published contract: a refused token, webhook
// registration with a secret, pushes (verified, forged, and aimed at another workspace's instance), every message
// type out, 429 retry_after obeyed exactly, a blocked user, an unknown chat, per-chat pacing, the capabilities bots
// lack, inbound media, and long polling acknowledging only what was stored.
func TestTelegramEndToEnd(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := telegramtest.Start(t)
		const pace = 400 * time.Millisecond
		e := newProviderEnv(t, db, "Telegram", telegram.New(telegram.Options{PublicURL: publicURL, PollTimeout: time.Second,
			ChatInterval: pace, GroupInterval: pace, BotInterval: time.Millisecond, WebhookCheck: 200 * time.Millisecond}))
		fake.Reroute = func(u string) string { return strings.Replace(u, publicURL, e.url, 1) }
		config := func(token, inbound string) string {
			return fmt.Sprintf(`{"bot_token":%q,"api_url":%q,"inbound":%q}`, token, fake.URL, inbound)
		}
		connect := func(id string) {
			t.Helper()
			if res := e.post("/api/v1/instances/"+id+"/connect", ""); res.StatusCode != 200 {
				t.Fatalf("connect: %d %s", res.StatusCode, res.body)
			}
		}

		// What bots cannot do is visible before the first call.
		var info gen.Provider
		e.get("/api/v1/providers/telegram", &info)
		for _, c := range []gen.Capability{"receipts.delivered", "receipts.read", "groups.create", "contacts.lookup"} {
			if slices.Contains(info.Capabilities, c) {
				t.Errorf("telegram lists %s", c)
			}
		}

		// A token Telegram refuses fails for good, with the reason.
		bad := e.instance("telegram", config("123456:AAHnot-a-real-token-0123456789", "auto"))
		connect(bad.Id)
		if got := e.status(bad.Id, "failed"); !strings.Contains(got.StatusReason, "auth_failed") {
			t.Errorf("bad token: reason %q", got.StatusReason)
		}

		token := fake.AddBot(7001, "AcmeBot")
		inst := e.instance("telegram", config(token, "auto"))
		if shown, _ := json.Marshal(inst); strings.Contains(string(shown), token) {
			t.Fatal("the bot token is shown back")
		}
		connect(inst.Id)
		acc := e.status(inst.Id, "connected").Account
		if acc == nil || acc.Address != "7001" {
			t.Fatalf("account = %+v", acc)
		}
		hook, secret := await.Until(t, "the webhook", func() [2]string {
			h, s := fake.Webhook(token)
			return [2]string{h, s}
		}, func(v [2]string) bool { return v[0] != "" })[0], ""
		_, secret = fake.Webhook(token)
		if hook != publicURL+"/hooks/channels/"+inst.Id || len(secret) < 32 {
			t.Fatalf("webhook %q secret %d chars", hook, len(secret))
		}

		// In: a verified push is stored before the 200 (through the spec-validated client here).
		ada := telegramtest.User{ID: 501, FirstName: "Ada", Username: "Ada_L"}
		upd, _ := fake.Message(token, ada, "hello bot")
		res := e.do(request{method: http.MethodPost, path: "/hooks/channels/" + inst.Id, body: string(fake.Update(upd)),
			header: map[string]string{"X-Telegram-Bot-Api-Secret-Token": secret}})
		if res.StatusCode != 200 {
			t.Fatalf("push: %d %s", res.StatusCode, res.body)
		}
		var msgs gen.MessageList
		e.get("/api/v1/instances/"+inst.Id+"/messages", &msgs)
		if len(msgs.Data) != 1 || deref(msgs.Data[0].Text) != "hello bot" || msgs.Data[0].From.Address != "501" {
			t.Fatalf("messages after the push = %+v", msgs.Data)
		}
		var contacts gen.ContactList
		e.get("/api/v1/instances/"+inst.Id+"/contacts", &contacts)
		if len(contacts.Data) != 1 || !slices.Contains(contacts.Data[0].Addresses, "@ada_l") {
			t.Errorf("contacts = %+v", contacts.Data)
		}

		// Typing and recording are the Bot API's chat actions; paused has none (an action ends by itself).
		for _, st := range []string{"typing", "recording", "paused"} {
			if res := e.post("/api/v1/instances/"+inst.Id+"/chats/"+msgs.Data[0].ChatId+"/presence",
				`{"state":"`+st+`"}`); res.StatusCode != 200 {
				t.Fatalf("chat state %s: %d %s", st, res.StatusCode, res.body)
			}
		}
		var actions []string
		for _, c := range fake.Calls("sendChatAction") {
			actions = append(actions, c.Params["chat_id"]+" "+c.Params["action"])
		}
		if !slices.Equal(actions, []string{"501 typing", "501 record_voice"}) {
			t.Errorf("chat actions %v", actions)
		}

		// A forged push, and pushes across workspaces, are refused and change nothing.
		other := newWorkspaceInstance(t, e, fake)
		_, otherSecret := fake.Webhook(other.token)
		forged, _ := fake.Message(token, ada, "forged")
		for _, try := range []struct{ instance, secret string }{{inst.Id, "not-the-secret"}, {inst.Id, otherSecret},
			{other.id, secret}, {inst.Id, ""}} {
			res := e.do(request{method: http.MethodPost, path: "/hooks/channels/" + try.instance, body: string(fake.Update(forged)),
				header: map[string]string{"X-Telegram-Bot-Api-Secret-Token": try.secret}})
			res.problem(t, 401, "signature_invalid")
		}
		e.get("/api/v1/instances/"+inst.Id+"/messages", &msgs)
		if len(msgs.Data) != 1 {
			t.Errorf("a forged push was stored: %d messages", len(msgs.Data))
		}
		res = e.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9K", body: "{}"})
		res.problem(t, 404, "not_found")
		// A verified push that is not an Update is refused with a problem, not a 5xx.
		e.do(request{method: http.MethodPost, path: "/hooks/channels/" + inst.Id, body: `["not an update"]`,
			header: map[string]string{"X-Telegram-Bot-Api-Secret-Token": secret}}).problem(t, 400, "validation_failed")

		// Out: each type reaches the Bot API with its method.
		send := func(body string) gen.Message {
			t.Helper()
			res := e.post("/api/v1/instances/"+inst.Id+"/messages", body)
			if res.StatusCode != 202 {
				t.Fatalf("send %s: %d %s", body, res.StatusCode, res.body)
			}
			var m gen.Message
			res.json(t, &m)
			return m
		}
		text := send(`{"to":"501","type":"text","text":"hi Ada","reply_to_message_id":"` + msgs.Data[0].Id + `"}`)
		sent := awaitMessage(e, inst.Id, text.Id, "sent")
		var history []string
		for _, h := range sent.StatusHistory {
			history = append(history, string(h.Status))
		}
		if !slices.Equal(history, []string{"queued", "sending", "sent"}) || sent.ProviderMessageId == nil {
			t.Errorf("history %v, provider id %v", history, sent.ProviderMessageId)
		}
		if c := fake.Calls("sendMessage"); len(c) != 1 || c[0].Params["text"] != "hi Ada" || !strings.Contains(c[0].Params["reply_parameters"], `"message_id"`) {
			t.Errorf("sendMessage calls = %+v", c)
		}
		for _, tc := range []struct{ body, method string }{
			{`{"to":"501","type":"location","location":{"latitude":52.52,"longitude":13.40}}`, "sendLocation"},
			{`{"to":"501","type":"contact","contact":{"name":"Grace Hopper","phones":["+15550100"]}}`, "sendContact"},
			{`{"to":"501","type":"reaction","target_message_id":"` + text.Id + `","emoji":"👍"}`, "setMessageReaction"},
			{`{"to":"501","type":"edit","target_message_id":"` + text.Id + `","text":"hi Ada!"}`, "editMessageText"},
			{`{"to":"501","type":"delete","target_message_id":"` + text.Id + `"}`, "deleteMessage"},
		} {
			m := send(tc.body)
			awaitMessage(e, inst.Id, m.Id, "sent")
			if len(fake.Calls(tc.method)) != 1 {
				t.Errorf("%s: %d calls", tc.method, len(fake.Calls(tc.method)))
			}
		}
		// Per-chat pacing: those went out at least the chat interval apart (chat actions are no messages and do not
		// count towards Telegram's limits).
		var ats []time.Time
		for _, c := range fake.Calls("") {
			if c.Params["chat_id"] == "501" && c.Status == 200 && c.Method != "sendChatAction" {
				ats = append(ats, c.At)
			}
		}
		for i := 1; i < len(ats); i++ {
			if gap := ats[i].Sub(ats[i-1]); gap < pace-20*time.Millisecond {
				t.Errorf("sends %d and %d to one chat %v apart; the pace is %v", i-1, i, gap, pace)
			}
		}

		// 429 with retry_after: the next attempt waits exactly that long.
		fake.Fail("sendMessage", 1, telegramtest.Failure{Status: 429, Description: "Too Many Requests: retry after 2", RetryAfter: 2})
		limited := send(`{"to":"501","type":"text","text":"after the flood wait"}`)
		awaitMessage(e, inst.Id, limited.Id, "sent")
		calls := fake.Calls("sendMessage")
		if n := len(calls); n != 3 || calls[n-1].At.Sub(calls[n-2].At) < 2*time.Second {
			t.Errorf("the retry after 429 came %v after it (want ≥ 2s), %d calls", calls[n-1].At.Sub(calls[n-2].At), n)
		}

		// A user who blocked the bot, and a chat the bot never saw: failed, with codes clients can act on.
		bob := telegramtest.User{ID: 502, FirstName: "Bob"}
		fake.Message(token, bob, "")
		fake.Block(token, 502)
		blocked := awaitMessage(e, inst.Id, send(`{"to":"502","type":"text","text":"hi Bob"}`).Id, "failed")
		unknown := awaitMessage(e, inst.Id, send(`{"to":"999","type":"text","text":"hi?"}`).Id, "failed")
		if blocked.Failure == nil || blocked.Failure.Code != "recipient_blocked" || unknown.Failure == nil || unknown.Failure.Code != "recipient_not_on_network" {
			t.Errorf("failures: blocked %+v, unknown %+v", blocked.Failure, unknown.Failure)
		}

		// Bots cannot create groups: refused before anything is queued.
		e.post("/api/v1/instances/"+inst.Id+"/groups", `{"subject":"Team","participants":["501"]}`).problem(t, 422, "capability_not_supported")

		// Inbound media is fetched from Telegram and kept.
		if st := fake.Push(token, fake.Photo(token, ada, "a cat", []byte("\xff\xd8\xff\xe0 jpeg bytes"))); st != 200 {
			t.Fatalf("photo push: %d", st)
		}
		photo := await.Until(t, "the photo", func() *gen.Message {
			e.get("/api/v1/instances/"+inst.Id+"/messages", &msgs)
			for _, m := range msgs.Data {
				if m.Type == "media" {
					return &m
				}
			}
			return nil
		}, func(m *gen.Message) bool { return m != nil })
		if photo.Media == nil || deref(photo.Media.Caption) != "a cat" {
			t.Errorf("photo = %+v", photo.Media)
		}

		// Out: media is uploaded with the method of its kind.
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "cat.png")
		_, _ = fw.Write([]byte("\x89PNG\r\n\x1a\n a cat"))
		_ = mw.Close()
		up := e.do(request{method: http.MethodPost, path: "/api/v1/media", key: e.apiKey, body: buf.String(),
			header: map[string]string{"Content-Type": mw.FormDataContentType()}})
		var media gen.Media
		up.json(t, &media)
		awaitMessage(e, inst.Id, send(`{"to":"501","type":"media","media":{"media_id":"`+media.Id+`","caption":"yours"}}`).Id, "sent")
		if c := fake.Calls("sendPhoto"); len(c) != 1 || string(c[0].Files["photo"]) != "\x89PNG\r\n\x1a\n a cat" || c[0].Params["caption"] != "yours" {
			t.Errorf("sendPhoto calls = %+v", c)
		}

		// In: an edit names the message it changes; a button press is a message with the button's data.
		var before gen.MessageList
		e.get("/api/v1/instances/"+inst.Id+"/messages", &before)
		var first gen.Message
		for _, m := range before.Data {
			if deref(m.Text) == "hello bot" {
				first = m
			}
		}
		orig := upd["message"].(map[string]any)
		edit := map[string]any{"edited_message": map[string]any{"message_id": orig["message_id"], "from": orig["from"],
			"chat": orig["chat"], "date": orig["date"], "edit_date": time.Now().Unix(), "text": "hello bot (edited)"}}
		press := map[string]any{"callback_query": map[string]any{"id": "4382", "from": orig["from"], "data": "order:42",
			"chat_instance": "-1", "message": map[string]any{"message_id": 1, "date": time.Now().Unix(),
				"chat": orig["chat"], "text": "pick one"}}}
		for _, u := range []map[string]any{edit, press} {
			if st := fake.Push(token, u); st != 200 {
				t.Fatalf("push: %d", st)
			}
		}
		var after gen.MessageList // decoded fresh: a reused list keeps members the new page omits
		e.get("/api/v1/instances/"+inst.Id+"/messages", &after)
		var edited, pressed *gen.Message
		for i, m := range after.Data {
			switch {
			case m.Type == "edit" && m.Direction == "inbound":
				edited = &after.Data[i]
			case deref(m.Text) == "order:42":
				pressed = &after.Data[i]
			}
		}
		if edited == nil || deref(edited.TargetMessageId) != first.Id || deref(edited.Text) != "hello bot (edited)" || pressed == nil {
			t.Errorf("edit %+v, button press %+v", edited, pressed)
		}

		// Groups: the bot added to one makes it the instance's; it is read, renamed, shared and left through the API.
		fake.AddGroup(token, -1001234, "Team", 501, 502)
		botUser := map[string]any{"id": 7001, "is_bot": true, "first_name": "AcmeBot"}
		fake.Push(token, map[string]any{"my_chat_member": map[string]any{"chat": map[string]any{"id": -1001234, "type": "supergroup", "title": "Team"},
			"from": orig["from"], "date": time.Now().Unix(), "old_chat_member": map[string]any{"status": "left", "user": botUser},
			"new_chat_member": map[string]any{"status": "member", "user": botUser}}})
		var groups gen.GroupList
		e.get("/api/v1/instances/"+inst.Id+"/groups", &groups)
		if len(groups.Data) != 1 || groups.Data[0].Subject != "Team" {
			t.Fatalf("groups = %+v", groups.Data)
		}
		gp := "/api/v1/instances/" + inst.Id + "/groups/" + groups.Data[0].Id
		var group gen.Group
		e.get(gp, &group)
		if group.Address != "-1001234" || group.Subject != "Team" {
			t.Errorf("group = %+v", group)
		}
		var invite gen.GroupInvite
		e.get(gp+"/invite", &invite)
		if !strings.HasPrefix(invite.Invite, "https://t.me/+") {
			t.Errorf("invite = %q", invite.Invite)
		}
		var changed gen.ParticipantsChangeResult
		res = e.post(gp+"/participants", `{"action":"remove","participants":["502"]}`)
		if res.json(t, &changed); res.StatusCode != 200 || len(changed.Data) != 1 || !changed.Data[0].Ok ||
			len(fake.Calls("banChatMember")) != 1 || len(fake.Calls("unbanChatMember")) != 1 {
			t.Errorf("remove: %d %s", res.StatusCode, res.body)
		}
		res = e.post(gp+"/participants", `{"action":"add","participants":["503"]}`)
		if res.json(t, &changed); res.StatusCode != 200 || changed.Data[0].Ok || changed.Data[0].Error == nil ||
			changed.Data[0].Error.Code != "capability_not_supported" {
			t.Errorf("add: %d %s", res.StatusCode, res.body)
		}
		if res := e.post(gp+"/leave", ""); res.StatusCode >= 300 || len(fake.Calls("leaveChat")) != 1 {
			t.Errorf("leave: %d %s", res.StatusCode, res.body)
		}

		// Long polling: updates arrive by getUpdates and are confirmed only once stored.
		ptoken := fake.AddBot(7003, "PollBot")
		polled := e.instance("telegram", config(ptoken, "polling"))
		connect(polled.Id)
		e.status(polled.Id, "connected")
		for i := range 3 {
			u, _ := fake.Message(ptoken, ada, fmt.Sprintf("polled %d", i))
			fake.Push(ptoken, u)
		}
		await.Until(t, "three polled messages", func() int {
			var l gen.MessageList
			e.get("/api/v1/instances/"+polled.Id+"/messages", &l)
			return len(l.Data)
		}, func(n int) bool { return n == 3 })
		await.Equal(t, "the updates confirmed", func() int { return fake.Pending(ptoken) }, 0)
		if h, _ := fake.Webhook(ptoken); h != "" {
			t.Errorf("a polling bot has a webhook: %s", h)
		}

		// A webhook deleted behind the session's back is set again at its next check.
		fake.DropWebhook(token)
		await.Until(t, "the webhook set again", func() string { h, _ := fake.Webhook(token); return h }, func(h string) bool { return h == hook })

		// Disconnect drops the webhook: Telegram keeps the updates until the bot connects again.
		e.post("/api/v1/instances/"+inst.Id+"/disconnect", "")
		e.status(inst.Id, "disconnected")
		await.Until(t, "the webhook deleted", func() string { h, _ := fake.Webhook(token); return h }, func(h string) bool { return h == "" })
	})
}

func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

type workspaceInstance struct{ id, token string }

// newWorkspaceInstance connects a Telegram bot of a second workspace.
func newWorkspaceInstance(t *testing.T, e *msgEnv, fake *telegramtest.Server) workspaceInstance {
	t.Helper()
	ws := e.workspace("Other")
	key, _ := e.key(ws.ID, "messaging:write")
	token := fake.AddBot(7002, "OtherBot")
	body, _ := json.Marshal(map[string]any{"name": "other", "provider": "telegram",
		"config": map[string]any{"bot_token": token, "api_url": fake.URL}})
	res := e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: key, body: string(body)})
	if res.StatusCode != 201 {
		t.Fatalf("other instance: %d %s", res.StatusCode, res.body)
	}
	var inst gen.Instance
	res.json(t, &inst)
	e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + inst.Id + "/connect", key: key})
	await.Until(t, "the other webhook", func() string { h, _ := fake.Webhook(token); return h }, func(h string) bool { return h != "" })
	return workspaceInstance{id: inst.Id, token: token}
}
