package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A chat is archived, pinned and muted (until a time, or until unmuted) through PATCH; each change is a
// chat.updated event and a repeat is none; the chat list filters by each; refusals change nothing.
func TestChatOrganization(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		alice, _, chat, _ := e.talking("Alice", "Bob")
		path := "/api/v1/instances/" + alice.Id + "/chats/" + chat
		patch := func(body string) *response {
			return e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: body})
		}
		updates := func() int {
			return len(instanceEvents(e, "chat.updated", alice.Id, func(c gen.ChatUpdatedEvent) (string, int64) {
				return c.InstanceId, 0
			}))
		}
		list := func(query string) int {
			var l gen.ChatList
			e.get("/api/v1/instances/"+alice.Id+"/chats?"+query, &l)
			return len(l.Data)
		}
		var c gen.Chat
		before := updates()
		res := patch(`{"archived":true}`)
		if res.StatusCode != 200 {
			t.Fatalf("archive: %d %s", res.StatusCode, res.body)
		}
		res.json(t, &c)
		if c.Archived == nil || !*c.Archived || *c.Pinned || *c.Muted {
			t.Fatalf("archived chat %+v", c)
		}
		if got := updates(); got != before+1 {
			t.Errorf("%d chat.updated after archiving, want %d", got, before+1)
		}
		patch(`{"archived":true}`).json(t, &c)
		if got := updates(); got != before+1 {
			t.Errorf("archiving again made an event (%d, want %d)", got, before+1)
		}

		until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
		patch(`{"pinned":true,"muted":true,"muted_until":"`+until.Format(time.RFC3339)+`"}`).json(t, &c)
		if !*c.Pinned || !*c.Muted || c.MutedUntil == nil || !c.MutedUntil.Equal(until) {
			t.Fatalf("pinned and muted chat %+v", c)
		}
		for q, want := range map[string]int{"archived=true": 1, "archived=false": 0, "pinned=true": 1, "pinned=false": 0,
			"muted=true": 1, "muted=false": 0, "archived=true&muted=true&unread=false": 1} {
			if got := list(q); got != want {
				t.Errorf("?%s: %d chats, want %d", q, got, want)
			}
		}
		c = gen.Chat{}
		patch(`{"muted":true}`).json(t, &c)
		if !*c.Muted || c.MutedUntil != nil {
			t.Errorf("muted until unmuted: %+v", c)
		}
		c = gen.Chat{}
		patch(`{"muted":false,"archived":false}`).json(t, &c)
		if *c.Muted || c.MutedUntil != nil || *c.Archived || list("muted=false") != 1 || list("archived=false") != 1 {
			t.Errorf("unmuted and unarchived: %+v", c)
		}

		// Archiving unpins (as WhatsApp does); asking for both at once is refused.
		c = gen.Chat{}
		patch(`{"archived":true}`).json(t, &c)
		if !*c.Archived || *c.Pinned {
			t.Errorf("archiving a pinned chat: %+v", c)
		}
		patch(`{"archived":true,"pinned":true}`).problem(t, 400, "validation_failed")
		patch(`{"archived":false,"pinned":true}`).json(t, &c)

		// Refusals.
		for _, body := range []string{`{}`, `{"archived":"yes"}`, `{"starred":true}`,
			`{"muted":true,"muted_until":"` + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + `"}`,
			`{"muted_until":"` + until.Format(time.RFC3339) + `"}`} {
			patch(body).problem(t, 400, "validation_failed")
		}
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPatch, path: path, key: otherKey, body: `{"pinned":false}`}).problem(t, 404, "not_found")
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + alice.Id + "/chats/cht_01JDAD2A1B2C3D4E5F6G7H8J9K",
			key: e.apiKey, body: `{"pinned":true}`}).problem(t, 404, "not_found")
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bare.Id + "/chats/" + chat, key: e.apiKey,
			body: `{"archived":true}`}).problem(t, 422, "capability_not_supported")
		if res := e.post("/api/v1/instances/"+alice.Id+"/disconnect", ""); res.StatusCode != 200 {
			t.Fatalf("disconnect: %d %s", res.StatusCode, res.body)
		}
		patch(`{"pinned":false}`).problem(t, 409, "instance_not_connected")
		e.get(path, &c)
		if !*c.Pinned {
			t.Error("a refused change was recorded")
		}
	})
}
