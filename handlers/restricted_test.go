package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A network that restricts an account for a time (a temporary ban) shows the instance restricted with the
// network's reason and the end; a message accepted meanwhile waits in the queue, and once the restriction ends the
// instance connects again by itself and sends it.
func TestRestrictedInstanceWaitsAndComesBack(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		alice, bob := e.connected("Alice"), e.connected("Bob")

		before := time.Now()
		res := e.post("/api/v1/instances/"+alice.Id+"/sandbox/restrict",
			`{"seconds":4,"reason":"too many messages to people who do not have this number"}`)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("restrict: %d %s", res.StatusCode, res.body)
		}
		restricted := e.status(alice.Id, "restricted")
		if !strings.Contains(restricted.StatusReason, "too many messages") {
			t.Errorf("status_reason %q, want the network's reason", restricted.StatusReason)
		}
		if r := restricted.Reconnect; r == nil || r.NextAt == nil || r.Attempt != 0 ||
			r.NextAt.Before(before.Add(4*time.Second)) || r.NextAt.After(time.Now().Add(4*time.Second)) {
			t.Errorf("reconnect = %+v, want the restriction's end four seconds after the control", r)
		}

		// Accepted while restricted: it waits.
		m := e.say(restricted, bob.Account.Address, "after the ban")
		var now gen.Message
		e.get("/api/v1/instances/"+alice.Id+"/messages/"+m.Id, &now)
		if now.Status != "queued" {
			t.Errorf("a message sent while restricted is %s, want queued", now.Status)
		}

		// The end comes: connected again without a connect call, and the message goes out.
		back := e.status(alice.Id, "connected")
		if back.Reconnect != nil {
			t.Errorf("connected with reconnect %+v", back.Reconnect)
		}
		e.received(bob, "after the ban")

		// The moves are events: connected → restricted with the reason, then back.
		var evs gen.EventList
		e.get("/api/v1/events?type=instance.status_changed&limit=100", &evs)
		var moves []string
		for _, ev := range evs.Data {
			p, err := ev.Data.AsInstanceStatusChangedEvent()
			if err != nil {
				t.Fatal(err)
			}
			if p.InstanceId == alice.Id {
				moves = append(moves, string(p.PreviousStatus)+"→"+string(p.Status))
				if p.Status == "restricted" && !strings.Contains(p.Reason, "too many messages") {
					t.Errorf("restricted event reason %q", p.Reason)
				}
			}
		}
		if got := strings.Join(moves, " "); !strings.Contains(got, "connected→restricted") {
			t.Errorf("alice's moves (newest first) %q, want connected→restricted", got)
		}
	})
}

// The restrict control is refused where it cannot apply: a bad duration, an instance not connected, another
// workspace's instance; and a refused control changes nothing.
func TestRestrictRefusals(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		alice := e.connected("Alice")
		path := "/api/v1/instances/" + alice.Id + "/sandbox/restrict"
		for _, body := range []string{`{}`, `{"seconds":0}`, `{"seconds":86401}`, `{"seconds":5,"reason":""}`,
			`{"seconds":5,"until":"tomorrow"}`} {
			e.post(path, body).problem(t, 400, "validation_failed")
		}
		idle := e.instance("sandbox", `{"auto_pair":true}`)
		e.post("/api/v1/instances/"+idle.Id+"/sandbox/restrict", `{"seconds":5}`).problem(t, 409, "instance_not_connected")
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPost, path: path, key: otherKey, body: `{"seconds":5}`}).problem(t, 404, "not_found")
		var still gen.Instance
		e.get("/api/v1/instances/"+alice.Id, &still)
		if still.Status != "connected" {
			t.Errorf("alice is %s after refused controls", still.Status)
		}
	})
}
