package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// presenceEvents returns the presence.updated events of an instance in the instance's order.
func (e *msgEnv) presenceEvents(instanceID string) []gen.PresenceUpdatedEvent {
	e.t.Helper()
	return instanceEvents(e, "presence.updated", instanceID, func(p gen.PresenceUpdatedEvent) (string, int64) {
		return p.InstanceId, p.Sequence
	})
}

// instanceEvents are the events of a type of one instance as their payloads, in the instance's order; key names a
// payload's instance and sequence.
func instanceEvents[T any](e *msgEnv, typ, instanceID string, key func(T) (string, int64)) []T {
	e.t.Helper()
	var l gen.EventList
	e.get("/api/v1/events?type="+typ+"&limit=100", &l)
	var out []T
	for _, ev := range l.Data {
		b, err := json.Marshal(ev.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		var p T
		if err := json.Unmarshal(b, &p); err != nil {
			e.t.Fatal(err)
		}
		if id, _ := key(p); id == instanceID {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b T) int {
		_, x := key(a)
		_, y := key(b)
		return int(x - y)
	})
	return out
}

// talking connects two sandbox instances and has the first write to the second, so each has the other as a
// contact in a chat. It returns both and the chat IDs on each side.
func (e *msgEnv) talking(a, b string) (gen.Instance, gen.Instance, string, string) {
	e.t.Helper()
	ia, ib := e.connected(a), e.connected(b)
	res := e.post("/api/v1/instances/"+ia.Id+"/messages",
		fmt.Sprintf(`{"to":%q,"type":"text","text":"hi"}`, ib.Account.Address))
	if res.StatusCode != 202 {
		e.t.Fatalf("send: %d %s", res.StatusCode, res.body)
	}
	var sent gen.Message
	res.json(e.t, &sent)
	in := await.Until(e.t, b+"'s inbox", func() gen.MessageList {
		var l gen.MessageList
		e.get("/api/v1/instances/"+ib.Id+"/messages?direction=inbound", &l)
		return l
	}, func(l gen.MessageList) bool { return len(l.Data) == 1 })
	return ia, ib, sent.ChatId, in.Data[0].ChatId
}

// Typing and availability go from one sandbox instance to the other as presence.updated events, the contact
// keeps the availability and when it was last seen, and the calls are refused where they cannot work.
func TestPresence(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read") // the event log too
		alice, bob, aliceChat, bobChat := e.talking("Alice", "Bob")

		var providers gen.ProviderList
		e.get("/api/v1/providers", &providers)
		for _, p := range providers.Data {
			if p.Name == "sandbox" {
				for _, c := range []gen.Capability{"chats.typing", "presence.send", "presence.receive"} {
					if !slices.Contains(p.Capabilities, c) {
						t.Errorf("the sandbox does not list %s: %v", c, p.Capabilities)
					}
				}
			}
		}

		res := e.post("/api/v1/instances/"+alice.Id+"/chats/"+aliceChat+"/presence", `{"state":"typing"}`)
		var shown gen.ChatPresence
		if res.json(t, &shown); res.StatusCode != 200 || shown.State != "typing" || shown.ChatId != aliceChat {
			t.Fatalf("typing: %d %s", res.StatusCode, res.body)
		}
		typing := await.Until(t, "bob sees alice typing", func() []gen.PresenceUpdatedEvent {
			return e.presenceEvents(bob.Id)
		}, func(evs []gen.PresenceUpdatedEvent) bool { return len(evs) == 1 })[0]
		if typing.State != "typing" || typing.ChatId == nil || *typing.ChatId != bobChat ||
			!slices.Contains(typing.Contact.Addresses, alice.Account.Address) || typing.Contact.Presence != nil {
			t.Fatalf("typing event = %+v", typing)
		}
		e.post("/api/v1/instances/"+alice.Id+"/chats/"+aliceChat+"/presence", `{"state":"recording"}`)
		e.post("/api/v1/instances/"+alice.Id+"/chats/"+aliceChat+"/presence", `{"state":"paused"}`)
		await.Until(t, "recording, then paused", func() []gen.PresenceUpdatedEvent {
			return e.presenceEvents(bob.Id)
		}, func(evs []gen.PresenceUpdatedEvent) bool {
			return len(evs) == 3 && evs[1].State == "recording" && evs[2].State == "paused"
		})

		// Availability: available, then unavailable with a last-seen time, kept on Bob's contact for Alice.
		do := func(availability string) {
			t.Helper()
			res := e.do(request{method: http.MethodPut, path: "/api/v1/instances/" + alice.Id + "/presence",
				key: e.apiKey, body: fmt.Sprintf(`{"availability":%q}`, availability)})
			var out gen.InstancePresence
			if res.json(t, &out); res.StatusCode != 200 || string(out.Availability) != availability {
				t.Fatalf("presence %s: %d %s", availability, res.StatusCode, res.body)
			}
		}
		do("available")
		do("unavailable")
		evs := await.Until(t, "bob sees alice come and go", func() []gen.PresenceUpdatedEvent {
			return e.presenceEvents(bob.Id)
		}, func(evs []gen.PresenceUpdatedEvent) bool { return len(evs) == 5 })
		if evs[3].State != "available" || evs[3].ChatId != nil || evs[4].State != "unavailable" ||
			evs[4].LastSeenAt == nil || evs[4].Contact.Presence == nil || *evs[4].Contact.Presence != "unavailable" {
			t.Fatalf("availability events = %+v, %+v", evs[3], evs[4])
		}
		var contact gen.Contact
		e.get("/api/v1/instances/"+bob.Id+"/contacts/"+evs[4].Contact.Id, &contact)
		if contact.Presence == nil || *contact.Presence != "unavailable" || contact.LastSeenAt == nil ||
			!contact.LastSeenAt.Equal(*evs[4].LastSeenAt) {
			t.Fatalf("contact = %+v", contact)
		}

		// A state the API does not know, and an unknown chat.
		e.post("/api/v1/instances/"+alice.Id+"/chats/"+aliceChat+"/presence", `{"state":"dancing"}`).
			problem(t, 400, "validation_failed")
		e.do(request{method: http.MethodPut, path: "/api/v1/instances/" + alice.Id + "/presence", key: e.apiKey,
			body: `{"availability":"busy"}`}).problem(t, 400, "validation_failed")
		e.post("/api/v1/instances/"+alice.Id+"/chats/cht_01JDAD2A1B2C3D4E5F6G7H8J9K/presence", `{"state":"typing"}`).
			problem(t, 404, "not_found")

		// Another workspace's key finds neither route's instance.
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/chats/" + aliceChat + "/presence",
			key: otherKey, body: `{"state":"typing"}`}).problem(t, 404, "not_found")
		e.do(request{method: http.MethodPut, path: "/api/v1/instances/" + alice.Id + "/presence", key: otherKey,
			body: `{"availability":"available"}`}).problem(t, 404, "not_found")

		// A provider without the capabilities refuses up front.
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.do(request{method: http.MethodPut, path: "/api/v1/instances/" + bare.Id + "/presence", key: e.apiKey,
			body: `{"availability":"available"}`}).problem(t, 422, "capability_not_supported")
		e.post("/api/v1/instances/"+bare.Id+"/chats/"+aliceChat+"/presence", `{"state":"typing"}`).
			problem(t, 422, "capability_not_supported")
	})
}
