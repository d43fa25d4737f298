package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Routes to a person through sandbox instances: the first channel meets its condition; a failed send fails over;
// a condition not met in time fails over; a step without a contact is skipped; a route with no step left fails,
// each with its event; and what a client can get wrong is refused with a code.
func TestRoutesFailOver(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read") // the event log too
		alice, bob, _, _ := e.talking("Alice", "Bob")
		carol := e.connected("Carol")
		dave := e.connected("Dave") // never wrote to Bob
		to := bob.Account.Address
		if res := e.post("/api/v1/instances/"+carol.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"hi from carol"}`, to)); res.StatusCode != 202 {
			t.Fatalf("carol's send: %d %s", res.StatusCode, res.body)
		}
		people := await.Until(t, "bob as one person on alice and carol", func() gen.PersonList {
			var l gen.PersonList
			e.get("/api/v1/people?address="+strings.ReplaceAll(to, "+", "%2B"), &l)
			return l
		}, func(l gen.PersonList) bool { return len(l.Data) == 1 && len(l.Data[0].Contacts) == 2 })
		person := people.Data[0].Id

		send := func(body string) gen.Route {
			t.Helper()
			res := e.post("/api/v1/people/"+person+"/messages", body)
			if res.StatusCode != 202 || res.Header.Get("Location") == "" {
				t.Fatalf("send to the person: %d %s", res.StatusCode, res.body)
			}
			var r gen.Route
			res.json(t, &r)
			return r
		}
		ended := func(r gen.Route) gen.Route {
			t.Helper()
			return await.Until(t, "route "+r.Id+" to end", func() gen.Route {
				var got gen.Route
				e.get("/api/v1/routes/"+r.Id, &got)
				return got
			}, func(r gen.Route) bool { return r.Status != gen.RouteStatusPending })
		}
		statuses := func(r gen.Route) string {
			var s []string
			for _, st := range r.Steps {
				s = append(s, string(st.Status))
			}
			return strings.Join(s, ",")
		}

		// 1. The first channel delivers: one message, carrying the route.
		r := send(fmt.Sprintf(`{"message":{"type":"text","text":"your order shipped"},"steps":[`+
			`{"instance_id":%q,"until":"delivered","within_seconds":30},{"instance_id":%q,"until":"sent","within_seconds":30}]}`, alice.Id, carol.Id))
		if r.Steps[0].Status != "active" || r.Steps[0].MessageId == nil {
			t.Fatalf("the first step did not start at once: %+v", r.Steps[0])
		}
		done := ended(r)
		if done.Status != "completed" || statuses(done) != "succeeded,waiting" || done.EndedAt == nil {
			t.Fatalf("route 1 = %s %s", done.Status, statuses(done))
		}
		var m gen.Message
		e.get("/api/v1/instances/"+alice.Id+"/messages/"+*done.Steps[0].MessageId, &m)
		if m.RouteId == nil || *m.RouteId != r.Id || deref(m.Text) != "your order shipped" || m.To.Address != to {
			t.Fatalf("the attempt = %+v", m)
		}

		// 2. Alice's send fails: Carol sends, by provider step (the person's contact on a sandbox instance other than
		// Alice's is Carol's, since Alice's step came first and failed — the provider step takes the first connected
		// instance with a contact, which may be Alice: so name Carol).
		e.post("/api/v1/instances/"+alice.Id+"/sandbox/fail-sends", `{"count":1,"code":"recipient_not_on_network"}`)
		r = send(fmt.Sprintf(`{"message":{"type":"text","text":"second"},"steps":[`+
			`{"instance_id":%q,"until":"sent","within_seconds":30},{"instance_id":%q,"until":"sent","within_seconds":30}]}`, alice.Id, carol.Id))
		done = ended(r)
		if done.Status != "completed" || statuses(done) != "failed,succeeded" ||
			!strings.Contains(deref(done.Steps[0].Reason), "recipient_not_on_network") {
			t.Fatalf("route 2 = %s %s %v", done.Status, statuses(done), deref(done.Steps[0].Reason))
		}

		// 3. Bob is offline: nothing is delivered within a second, so Carol's step sends; Dave has no contact of Bob
		// and is skipped.
		if res := e.post("/api/v1/instances/"+bob.Id+"/disconnect", ""); res.StatusCode != 200 {
			t.Fatalf("disconnect bob: %d %s", res.StatusCode, res.body)
		}
		e.status(bob.Id, "disconnected")
		r = send(fmt.Sprintf(`{"message":{"type":"text","text":"third"},"steps":[`+
			`{"instance_id":%q,"until":"delivered","within_seconds":1},{"instance_id":%q,"until":"sent","within_seconds":5},`+
			`{"provider":"sandbox","until":"sent","within_seconds":5}]}`, alice.Id, dave.Id))
		done = ended(r)
		// Alice timed out, Dave was skipped, and the provider step picked a sandbox instance with a contact of Bob.
		if done.Status != "completed" || statuses(done) != "timed_out,skipped,succeeded" ||
			deref(done.Steps[0].Reason) != "not delivered within 1 s" || !strings.Contains(deref(done.Steps[1].Reason), "no contact") ||
			done.Steps[2].InstanceId == nil || (*done.Steps[2].InstanceId != alice.Id && *done.Steps[2].InstanceId != carol.Id) {
			t.Fatalf("route 3 = %s %s %+v", done.Status, statuses(done), done.Steps)
		}

		// 4. Nothing left: the route fails, each step saying why.
		r = send(fmt.Sprintf(`{"message":{"type":"text","text":"fourth"},"steps":[`+
			`{"instance_id":%q,"until":"delivered","within_seconds":1}]}`, carol.Id))
		done = ended(r)
		if done.Status != "failed" || statuses(done) != "timed_out" {
			t.Fatalf("route 4 = %s %s", done.Status, statuses(done))
		}
		var evs gen.EventList
		e.get("/api/v1/events?type=route.failed", &evs)
		if len(evs.Data) != 1 {
			t.Fatalf("route.failed events: %d", len(evs.Data))
		}
		e.get("/api/v1/events?type=route.completed", &evs)
		if len(evs.Data) != 3 {
			t.Fatalf("route.completed events: %d", len(evs.Data))
		}
		var list gen.RouteList
		e.get("/api/v1/routes?person_id="+person+"&status=failed", &list)
		if len(list.Data) != 1 || list.Data[0].Id != r.Id {
			t.Fatalf("failed routes: %+v", list.Data)
		}

		// 5. Erin sends one message a minute and has just sent hers to Bob: the route's message waits in her send
		// queue when its step times out, so it is canceled there (Bob does not get it after Alice's), and
		// ?route_id= lists each instance's attempts.
		erin := e.connectedOnePerMinute("Erin")
		e.say(erin, to, "hi from erin")
		await.Until(t, "bob as a person on erin too", func() int {
			var p gen.Person
			e.get("/api/v1/people/"+person, &p)
			return len(p.Contacts)
		}, func(n int) bool { return n == 3 })
		r = send(fmt.Sprintf(`{"message":{"type":"text","text":"fifth"},"steps":[`+
			`{"instance_id":%q,"until":"sent","within_seconds":1},{"instance_id":%q,"until":"sent","within_seconds":30}]}`, erin.Id, alice.Id))
		done = ended(r)
		if done.Status != "completed" || statuses(done) != "timed_out,succeeded" {
			t.Fatalf("route 5 = %s %s", done.Status, statuses(done))
		}
		var attempts gen.MessageList
		e.get("/api/v1/instances/"+erin.Id+"/messages?route_id="+r.Id, &attempts)
		if len(attempts.Data) != 1 || attempts.Data[0].Id != *done.Steps[0].MessageId || attempts.Data[0].Status != gen.MessageStatusCanceled {
			t.Fatalf("erin's attempts of route 5: %+v", attempts.Data)
		}
		e.get("/api/v1/instances/"+alice.Id+"/messages?route_id="+r.Id, &attempts)
		if len(attempts.Data) != 1 || attempts.Data[0].Id != *done.Steps[1].MessageId {
			t.Fatalf("alice's attempts of route 5: %+v", attempts.Data)
		}

		// Refused: a person or route of nobody here, steps that name both or neither, an instance not in the
		// workspace, a provider that does not exist, a condition the provider cannot report, content that is missing.
		step := fmt.Sprintf(`{"instance_id":%q,"until":"sent","within_seconds":5}`, alice.Id)
		e.post("/api/v1/people/per_01JDAD4A1B2C3D4E5F6G7H8J9K/messages", `{"message":{"type":"text","text":"x"},"steps":[`+step+`]}`).
			problem(t, 404, "not_found")
		e.do(request{path: "/api/v1/routes/rte_01JDAD5A1B2C3D4E5F6G7H8J9K", key: e.apiKey}).problem(t, 404, "not_found")
		for body, want := range map[string][2]any{
			`{"message":{"type":"text","text":"x"},"steps":[{"until":"sent","within_seconds":5}]}`:                                                              {400, "validation_failed"},
			fmt.Sprintf(`{"message":{"type":"text","text":"x"},"steps":[{"instance_id":%q,"provider":"sandbox","until":"sent","within_seconds":5}]}`, alice.Id): {400, "validation_failed"},
			`{"message":{"type":"text","text":"x"},"steps":[{"instance_id":"ins_01JDAD0A1B2C3D4E5F6G7H8J9K","until":"sent","within_seconds":5}]}`:               {422, "reference_not_found"},
			`{"message":{"type":"text","text":"x"},"steps":[{"provider":"nowhere","until":"sent","within_seconds":5}]}`:                                         {400, "validation_failed"},
			`{"message":{"type":"text","text":"x"},"steps":[{"provider":"bare","until":"delivered","within_seconds":5}]}`:                                       {422, "capability_not_supported"},
			`{"message":{"type":"text"},"steps":[` + step + `]}`:                                                                                                {400, "validation_failed"},
			`{"message":{"type":"text","text":"x"},"steps":[]}`:                                                                                                 {400, "validation_failed"},
			`{"message":{"type":"text","text":"x"},"steps":[{"provider":"sandbox","until":"sent","within_seconds":0}]}`:                                         {400, "validation_failed"},
		} {
			e.post("/api/v1/people/"+person+"/messages", body).problem(t, want[0].(int), want[1].(string))
		}

		// Another workspace sees neither the person nor the route.
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPost, path: "/api/v1/people/" + person + "/messages", key: otherKey,
			body: `{"message":{"type":"text","text":"x"},"steps":[` + step + `]}`}).problem(t, 404, "not_found")
		e.do(request{path: "/api/v1/routes/" + r.Id, key: otherKey}).problem(t, 404, "not_found")
		// A key limited to Carol sees the person (through Carol's contact) but cannot send through Alice.
		limited, _ := createKey(t, db, e.ws.ID, &store.NewAPIKey{InstanceIDs: []string{carol.Id}}, "messaging:write")
		e.do(request{method: http.MethodPost, path: "/api/v1/people/" + person + "/messages", key: limited,
			body: `{"message":{"type":"text","text":"x"},"steps":[` + step + `]}`}).problem(t, 422, "reference_not_found")
	})
}
