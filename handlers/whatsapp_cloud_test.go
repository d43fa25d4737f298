package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud/cloudtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The WhatsApp Cloud provider against a fake Graph API that follows Meta's published contract: a refused token,
// Meta's URL check, pushes signed with the app secret (and forged, and aimed at another workspace's instance, and
// for another phone number), the customer-service window, templates (listed across pages, sent with parameters),
// every message type out, statuses out of order, a failure reported after the send, a rate-limit error retried,
// and read marks.
func TestWhatsAppCloudEndToEnd(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := cloudtest.Start(t)
		fake.AddTemplate(cloudtest.Template{Name: "order_shipped", Language: "en_US", Status: "APPROVED", Category: "UTILITY", Placeholders: 2})
		fake.AddTemplate(cloudtest.Template{Name: "welcome", Language: "en_US", Status: "APPROVED", Category: "MARKETING"})
		fake.AddTemplate(cloudtest.Template{Name: "welcome", Language: "de", Status: "PENDING", Category: "MARKETING"})
		e := newProviderEnv(t, db, "WhatsApp", whatsappcloud.New(whatsappcloud.Options{}))
		config := func(token, appSecret string) string {
			b, _ := json.Marshal(map[string]any{"phone_number_id": fake.PhoneID, "business_account_id": fake.WABAID,
				"access_token": token, "app_secret": appSecret, "verify_token": "verify-me-please", "base_url": fake.URL})
			return string(b)
		}
		connect := func(id string) {
			t.Helper()
			if res := e.post("/api/v1/instances/"+id+"/connect", ""); res.StatusCode != 200 {
				t.Fatalf("connect: %d %s", res.StatusCode, res.body)
			}
		}

		var info gen.Provider
		e.get("/api/v1/providers/whatsapp_cloud", &info)
		if !slices.Contains(info.Capabilities, "messages.template") || slices.Contains(info.Capabilities, "groups.create") ||
			slices.Contains(info.Capabilities, "contacts.lookup") || slices.Contains(info.Capabilities, "messages.edit") {
			t.Errorf("capabilities = %v", info.Capabilities)
		}

		bad := e.instance("whatsapp_cloud", config("EAAJnot-the-token-0123456789", fake.AppSecret))
		connect(bad.Id)
		if got := e.status(bad.Id, "failed"); !strings.Contains(got.StatusReason, "auth_failed") {
			t.Errorf("bad token: reason %q", got.StatusReason)
		}

		inst := e.instance("whatsapp_cloud", config(fake.Token, fake.AppSecret))
		connect(inst.Id)
		acc := e.status(inst.Id, "connected").Account
		if acc == nil || acc.Address != "+15550001111" || deref(acc.DisplayName) != "Acme Support" {
			t.Fatalf("account = %+v", acc)
		}
		hook := "/hooks/channels/" + inst.Id
		if inst.HookUrl == nil || *inst.HookUrl != publicURL+hook {
			t.Errorf("hook_url = %v", inst.HookUrl)
		}
		fake.Callback = e.url + hook

		// Meta's URL check: the verify token answers the challenge; a wrong one is refused.
		res := e.do(request{path: hook + "?hub.mode=subscribe&hub.verify_token=verify-me-please&hub.challenge=1158201444"})
		if res.StatusCode != 200 || string(res.body) != "1158201444" {
			t.Fatalf("verify: %d %q", res.StatusCode, res.body)
		}
		e.do(request{path: hook + "?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1"}).problem(t, 401, "signature_invalid")

		// The window: nobody wrote yet, so only a template goes out.
		e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"+15550100002","type":"text","text":"hi"}`).
			problem(t, 422, "conversation_window_closed")
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
		tpl := send(`{"to":"+15550100002","type":"template","template":{"name":"order_shipped","language":"en_US","parameters":["Ada","SB-1042"]}}`)
		if tpl.Template == nil || tpl.Template.Name != "order_shipped" {
			t.Errorf("template message = %+v", tpl.Template)
		}
		awaitMessage(e, inst.Id, tpl.Id, "sent")
		wrongCount := send(`{"to":"+15550100002","type":"template","template":{"name":"order_shipped","language":"en_US","parameters":["Ada"]}}`)
		if f := awaitMessage(e, inst.Id, wrongCount.Id, "failed").Failure; f == nil || f.Code != "template_rejected" {
			t.Errorf("a template with a parameter missing: %+v", f)
		}
		var templates gen.TemplateList
		e.get("/api/v1/instances/"+inst.Id+"/templates", &templates)
		if len(templates.Data) != 3 || templates.Data[0].Name != "order_shipped" || templates.Data[2].Status != "PENDING" {
			t.Errorf("templates (three, over two pages) = %+v", templates.Data)
		}

		// In: a signed push is stored before the 200; a forged one, and the other workspace's secret, are refused.
		body := fake.Notification(withMetadata(fake, cloudtest.Text("15550100002", "Ada", "wamid.IN1", "hello Acme")))
		res = e.do(request{method: http.MethodPost, path: hook, body: string(body),
			header: map[string]string{"X-Hub-Signature-256": cloudtest.Sign(body, fake.AppSecret)}})
		var pushed gen.ChannelPushResult
		if res.json(t, &pushed); res.StatusCode != 200 || pushed.Applied != 1 {
			t.Fatalf("push: %d %s", res.StatusCode, res.body)
		}
		other := e.workspace("Other")
		otherKey, _ := e.key(other.ID, "messaging:write")
		otherRes := e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: otherKey,
			body: `{"name":"other","provider":"whatsapp_cloud","config":` + config(fake.Token, "the-other-apps-secret-xyz") + `}`})
		var otherInst gen.Instance
		otherRes.json(t, &otherInst)
		forged := fake.Notification(withMetadata(fake, cloudtest.Text("15550100002", "Ada", "wamid.FORGED", "forged")))
		for _, try := range []struct{ path, secret string }{{hook, "not-the-secret"}, {hook, "the-other-apps-secret-xyz"},
			{"/hooks/channels/" + otherInst.Id, fake.AppSecret}} {
			e.do(request{method: http.MethodPost, path: try.path, body: string(forged),
				header: map[string]string{"X-Hub-Signature-256": cloudtest.Sign(forged, try.secret)}}).problem(t, 401, "signature_invalid")
		}
		e.do(request{method: http.MethodPost, path: hook, body: string(forged)}).problem(t, 401, "signature_invalid")
		// A push for another phone number of the same app is left to that number's instance.
		foreign := withMetadata(fake, cloudtest.Text("15550100002", "Ada", "wamid.FOREIGN", "not for this number"))
		foreign["metadata"].(map[string]any)["phone_number_id"] = "999999999"
		fb := fake.Notification(foreign)
		res = e.do(request{method: http.MethodPost, path: hook, body: string(fb),
			header: map[string]string{"X-Hub-Signature-256": cloudtest.Sign(fb, fake.AppSecret)}})
		if res.json(t, &pushed); res.StatusCode != 200 || pushed.Applied != 0 {
			t.Errorf("a push for another number: %d %s", res.StatusCode, res.body)
		}
		var msgs gen.MessageList
		e.get("/api/v1/instances/"+inst.Id+"/messages?direction=inbound", &msgs)
		var inbound []string
		for _, m := range msgs.Data {
			if m.Direction == "inbound" {
				inbound = append(inbound, deref(m.Text))
			}
		}
		if !slices.Equal(inbound, []string{"hello Acme"}) {
			t.Fatalf("inbound messages = %v", inbound)
		}
		in := msgs.Data[0]
		for _, m := range msgs.Data {
			if m.Direction == "inbound" {
				in = m
			}
		}

		// Within the window every type goes out, with the documented body.
		text := send(`{"to":"+1 555 010 0002","type":"text","text":"hi Ada","reply_to_message_id":"` + in.Id + `"}`)
		awaitMessage(e, inst.Id, text.Id, "sent")
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "receipt.pdf")
		_, _ = io.WriteString(fw, "%PDF-1.4 receipt")
		_ = mw.Close()
		up := e.do(request{method: http.MethodPost, path: "/api/v1/media", key: e.apiKey, body: buf.String(),
			header: map[string]string{"Content-Type": mw.FormDataContentType()}})
		var media gen.Media
		up.json(t, &media)
		for _, b := range []string{
			`{"to":"+15550100002","type":"media","media":{"media_id":"` + media.Id + `","caption":"your receipt"}}`,
			`{"to":"+15550100002","type":"location","location":{"latitude":52.52,"longitude":13.40,"name":"Office"}}`,
			`{"to":"+15550100002","type":"contact","contact":{"name":"Grace Hopper","phones":["+15550100003"]}}`,
			`{"to":"+15550100002","type":"reaction","target_message_id":"` + in.Id + `","emoji":"👍"}`,
		} {
			awaitMessage(e, inst.Id, send(b).Id, "sent")
		}
		sent := fake.Sent()
		var types []string
		for _, s := range sent {
			types = append(types, fmt.Sprint(s.Body["type"]))
		}
		if want := []string{"template", "text", "document", "location", "contacts", "reaction"}; !slices.Equal(types, want) {
			t.Errorf("types sent = %v, want %v", types, want)
		}
		if ctx, _ := sent[1].Body["context"].(map[string]any); ctx["message_id"] != "wamid.IN1" || sent[1].Body["to"] != "15550100002" {
			t.Errorf("the reply = %v", sent[1].Body)
		}
		if doc, _ := sent[2].Body["document"].(map[string]any); string(fake.Media(fmt.Sprint(doc["id"]))) != "%PDF-1.4 receipt" {
			t.Errorf("the document = %v", sent[2].Body)
		}
		if tb, _ := json.Marshal(sent[0].Body["template"]); !strings.Contains(string(tb), `"text":"SB-1042"`) {
			t.Errorf("the template = %s", tb)
		}

		// Statuses out of order: read, then a late delivered — it stays read, and the history only climbs.
		wamid := deref(awaitMessage(e, inst.Id, text.Id, "sent").ProviderMessageId)
		for _, st := range []string{"read", "delivered", "sent"} {
			if code := fake.Push(cloudtest.Status(wamid, st, "15550100002", 0)); code != 200 {
				t.Fatalf("status push: %d", code)
			}
		}
		read := awaitMessage(e, inst.Id, text.Id, "read")
		var history []string
		for _, h := range read.StatusHistory {
			history = append(history, string(h.Status))
		}
		if !slices.Equal(history, []string{"queued", "sending", "sent", "read"}) {
			t.Errorf("history = %v", history)
		}

		// Meta takes a message and reports later that it could not deliver it.
		late := send(`{"to":"+15550100002","type":"text","text":"will not arrive"}`)
		lateID := deref(awaitMessage(e, inst.Id, late.Id, "sent").ProviderMessageId)
		fake.Push(cloudtest.Status(lateID, "failed", "15550100002", 131026))
		if f := awaitMessage(e, inst.Id, late.Id, "failed").Failure; f == nil || f.Code != "recipient_not_on_network" || !strings.Contains(f.Detail, "131026") {
			t.Errorf("late failure = %+v", f)
		}

		// A throughput error is retried; a number without WhatsApp fails with its code.
		fake.Fail(1, cloudtest.Failure{Status: 400, Code: 130429, Message: "Rate limit hit"})
		awaitMessage(e, inst.Id, send(`{"to":"+15550100002","type":"text","text":"after the limit"}`).Id, "sent")
		fake.NotOnWhatsApp("15550100009")
		e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"+15550100009","type":"text","text":"hi"}`).
			problem(t, 422, "conversation_window_closed")
		nowa := send(`{"to":"+15550100009","type":"template","template":{"name":"welcome","language":"en_US"}}`)
		if f := awaitMessage(e, inst.Id, nowa.Id, "failed").Failure; f == nil || f.Code != "recipient_not_on_network" {
			t.Errorf("not on WhatsApp: %+v", f)
		}

		// Marking the chat read marks the person's newest message read at Meta.
		if res := e.post("/api/v1/instances/"+inst.Id+"/chats/"+in.ChatId+"/read", ""); res.StatusCode != 200 {
			t.Fatalf("mark read: %d %s", res.StatusCode, res.body)
		}
		if reads := fake.Reads(); !slices.Contains(reads, "wamid.IN1") {
			t.Errorf("reads = %v", reads)
		}

		// A day after the person's last message the window is closed again.
		if _, err := db.Bun().NewUpdate().Table("messages").Set("created_at = ?", time.Now().Add(-25*time.Hour)).
			Where("direction = 'inbound'").Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"+15550100002","type":"text","text":"still there?"}`).
			problem(t, 422, "conversation_window_closed")
		await.Equal(t, "no more sends", func() int { return len(fake.Sent()) }, 8)
	})
}

// withMetadata adds the account's metadata to a change value, as Meta's pushes carry it.
func withMetadata(fake *cloudtest.Server, value map[string]any) map[string]any {
	value["messaging_product"] = "whatsapp"
	value["metadata"] = map[string]any{"display_phone_number": "15550001111", "phone_number_id": fake.PhoneID}
	return value
}
