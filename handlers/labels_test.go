package handlers_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Labels through the sandbox: created, listed, renamed, put on a chat and taken off (each a chat.updated, a repeat
// none), the chat list filtered by one, deleted (its chat loses it); refused on a provider without labels, and
// not found across instances and workspaces.
func TestLabels(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read") // the event log too
		alice, bob, chat, _ := e.talking("Alice", "Bob")
		base := "/api/v1/instances/" + alice.Id
		do := func(method, path, body string) *response {
			return e.do(request{method: method, path: path, key: e.apiKey, body: body})
		}
		res := e.post(base+"/labels", `{"name":"Follow up","color":3}`)
		if res.StatusCode != 201 {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		var l gen.Label
		res.json(t, &l)
		if l.Name != "Follow up" || l.Color != 3 || l.InstanceId != alice.Id {
			t.Fatalf("label = %+v", l)
		}
		var list gen.LabelList
		e.get(base+"/labels", &list)
		if len(list.Data) != 1 || list.Data[0].Id != l.Id {
			t.Fatalf("labels = %+v", list.Data)
		}
		res = do(http.MethodPatch, base+"/labels/"+l.Id, `{"name":"Waiting"}`)
		res.json(t, &l)
		if res.StatusCode != 200 || l.Name != "Waiting" || l.Color != 3 {
			t.Fatalf("rename: %d %s", res.StatusCode, res.body)
		}

		chatEvents := func() int {
			return len(instanceEvents(e, "chat.updated", alice.Id, func(ev gen.ChatUpdatedEvent) (string, int64) {
				return ev.InstanceId, 0
			}))
		}
		before := chatEvents()
		labelPath := base + "/chats/" + chat + "/labels/" + l.Id
		var c gen.Chat
		res = do(http.MethodPut, labelPath, "")
		res.json(t, &c)
		if res.StatusCode != 200 || c.Labels == nil || !slices.Equal(*c.Labels, []string{l.Id}) {
			t.Fatalf("label the chat: %d %s", res.StatusCode, res.body)
		}
		do(http.MethodPut, labelPath, "") // again: no change, no event
		if n := chatEvents(); n != before+1 {
			t.Errorf("chat.updated events: %d after labelling twice, want %d", n, before+1)
		}
		var chats gen.ChatList
		e.get(base+"/chats?label="+l.Id, &chats)
		if len(chats.Data) != 1 || chats.Data[0].Id != chat {
			t.Fatalf("chats with the label = %+v", chats.Data)
		}
		res = do(http.MethodDelete, labelPath, "")
		res.json(t, &c)
		if res.StatusCode != 200 || c.Labels == nil || len(*c.Labels) != 0 {
			t.Fatalf("unlabel: %d %s", res.StatusCode, res.body)
		}
		e.get(base+"/chats?label="+l.Id, &chats)
		if len(chats.Data) != 0 {
			t.Fatalf("chats with the label after taking it off = %+v", chats.Data)
		}

		// Deleted: the chat that carried it loses it, with its chat.updated.
		do(http.MethodPut, labelPath, "")
		before = chatEvents()
		if res := do(http.MethodDelete, base+"/labels/"+l.Id, ""); res.StatusCode != 204 {
			t.Fatalf("delete: %d %s", res.StatusCode, res.body)
		}
		e.get(base+"/chats/"+chat, &c)
		if c.Labels == nil || len(*c.Labels) != 0 || chatEvents() != before+1 {
			t.Fatalf("the chat after the label was deleted: %+v (%d events, want %d)", c.Labels, chatEvents(), before+1)
		}
		do(http.MethodGet, base+"/labels/"+l.Id, "").problem(t, 404, "not_found")

		// Refused: a label of another instance on this chat; another workspace; a provider without labels; a bad name.
		res = e.post("/api/v1/instances/"+bob.Id+"/labels", `{"name":"Bob's"}`)
		var bobs gen.Label
		res.json(t, &bobs)
		do(http.MethodPut, base+"/chats/"+chat+"/labels/"+bobs.Id, "").problem(t, 404, "not_found")
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPost, path: base + "/labels", key: otherKey, body: `{"name":"x"}`}).problem(t, 404, "not_found")
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bob.Id + "/labels/" + bobs.Id, key: otherKey,
			body: `{"name":"x"}`}).problem(t, 404, "not_found")
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.post("/api/v1/instances/"+bare.Id+"/labels", `{"name":"x"}`).problem(t, 422, "capability_not_supported")
		for _, body := range []string{`{"name":""}`, `{"name":" padded "}`, `{"name":"x","color":20}`, `{}`} {
			e.post(base+"/labels", body).problem(t, 400, "validation_failed")
		}
		do(http.MethodPatch, base+"/labels/"+bobs.Id, `{"name":"x"}`).problem(t, 404, "not_found")
		if res := do(http.MethodPatch, "/api/v1/instances/"+bob.Id+"/labels/"+bobs.Id, fmt.Sprintf(`{"color":%d}`, 7)); res.StatusCode != 200 {
			t.Fatalf("recolor: %d %s", res.StatusCode, res.body)
		}
	})
}
