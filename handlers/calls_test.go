package handlers_test

import (
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// callEvents are the call.received events of an instance, oldest first.
func (e *msgEnv) callEvents(instanceID string) []gen.CallReceivedEvent {
	e.t.Helper()
	return instanceEvents(e, "call.received", instanceID, func(c gen.CallReceivedEvent) (string, int64) {
		return c.InstanceId, c.Sequence
	})
}

// Every incoming call is a call.received event with the caller's contact; an instance set to decline calls
// declines each at once and, with a message, queues it to the caller as its own message, which the caller gets.
func TestCallsAreRecordedAndDeclined(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		alice, bob := e.connected("Alice"), e.connected("Bob")
		call := func(body string) {
			t.Helper()
			if res := e.post("/api/v1/instances/"+alice.Id+"/sandbox/calls", body); res.StatusCode != http.StatusOK {
				t.Fatalf("call: %d %s", res.StatusCode, res.body)
			}
		}
		calls := func(n int) []gen.CallReceivedEvent {
			t.Helper()
			return await.Until(t, "call.received events", func() []gen.CallReceivedEvent { return e.callEvents(alice.Id) },
				func(cs []gen.CallReceivedEvent) bool { return len(cs) >= n })
		}

		// Nothing set: recorded, not declined.
		call(`{"from":"` + bob.Account.Address + `"}`)
		first := calls(1)[0]
		if first.Rejected || first.MessageId != nil || first.Call.Video || first.Call.From.Address != bob.Account.Address ||
			first.Call.From.ContactId == nil || *first.Call.From.ContactId != first.Contact.Id || first.Call.Id == "" {
			t.Errorf("first call %+v", first)
		}

		// Decline with a message.
		res := e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + alice.Id, key: e.apiKey,
			body: `{"calls":{"reject":true,"message":"Calls are not answered here; please write."}}`})
		if res.StatusCode != 200 {
			t.Fatalf("set calls: %d %s", res.StatusCode, res.body)
		}
		var set gen.Instance
		res.json(t, &set)
		if set.Calls == nil || !set.Calls.Reject || set.Calls.Message == nil {
			t.Errorf("instance calls %+v", set.Calls)
		}
		call(`{"from":"` + bob.Account.Address + `","video":true}`)
		second := calls(2)[1]
		if !second.Rejected || !second.Call.Video || second.MessageId == nil {
			t.Fatalf("declined call %+v", second)
		}
		got := e.received(bob, "Calls are not answered here; please write.")
		if got.From.Address != alice.Account.Address {
			t.Errorf("the caller got the message from %s", got.From.Address)
		}
		var sent gen.Message
		e.get("/api/v1/instances/"+alice.Id+"/messages/"+*second.MessageId, &sent)
		if sent.Direction != "outbound" || sent.Text == nil || *sent.Text != "Calls are not answered here; please write." {
			t.Errorf("the message to the caller %+v", sent)
		}

		// Decline without a message.
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + alice.Id, key: e.apiKey,
			body: `{"calls":{"reject":true}}`}).json(t, &set)
		call(`{"from":"` + bob.Account.Address + `"}`)
		if third := calls(3)[2]; !third.Rejected || third.MessageId != nil {
			t.Errorf("declined without a message: %+v", third)
		}
	})
}

// Refusals: bad settings and controls, another workspace's instance, and declining calls on a network that cannot.
func TestCallRefusals(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		alice := e.connected("Alice")
		patch := func(id, body string) *response {
			return e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + id, key: e.apiKey, body: body})
		}
		for _, body := range []string{`{"calls":{}}`, `{"calls":{"reject":true,"message":""}}`,
			`{"calls":{"reject":"yes"}}`, `{"calls":{"reject":true,"ring":3}}`} {
			patch(alice.Id, body).problem(t, 400, "validation_failed")
		}
		for _, body := range []string{`{}`, `{"from":""}`, `{"from":"+1","video":1}`} {
			e.post("/api/v1/instances/"+alice.Id+"/sandbox/calls", body).problem(t, 400, "validation_failed")
		}
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/sandbox/calls", key: otherKey,
			body: `{"from":"+15550100999"}`}).problem(t, 404, "not_found")
		idle := e.instance("sandbox", `{"auto_pair":true}`)
		e.post("/api/v1/instances/"+idle.Id+"/sandbox/calls", `{"from":"+15550100999"}`).problem(t, 409, "instance_not_connected")

		bare := e.instance("bare", `{"token":"abcd"}`)
		patch(bare.Id, `{"calls":{"reject":true}}`).problem(t, 422, "capability_not_supported")
		e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: e.apiKey,
			body: `{"name":"b","provider":"bare","config":{"token":"abcd"},"calls":{"reject":true}}`}).
			problem(t, 422, "capability_not_supported")
		if res := patch(bare.Id, `{"calls":{"reject":false}}`); res.StatusCode != 200 {
			t.Errorf("not declining on a network that cannot decline: %d %s", res.StatusCode, res.body)
		}
	})
}
