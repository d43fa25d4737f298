package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A poll goes from one sandbox instance to another, the receiver votes (and changes its vote), the sender gets
// poll.voted for each and the message shows the tallies; bad polls and votes are refused with a code.
func TestPolls(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read") // the event log too
		alice, bob, _, _ := e.talking("Alice", "Bob")

		res := e.post("/api/v1/instances/"+alice.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"poll",`+
			`"poll":{"question":"Lunch?","options":["Pizza","Sushi","Salad"],"multiple_choice":true}}`, bob.Account.Address))
		if res.StatusCode != 202 {
			t.Fatalf("send poll: %d %s", res.StatusCode, res.body)
		}
		var poll gen.Message
		res.json(t, &poll)
		if poll.Type != "poll" || poll.Poll == nil || len(poll.Poll.Options) != 3 || poll.Poll.Voters != 0 {
			t.Fatalf("queued poll = %+v", poll)
		}
		in := await.Until(t, "bob's poll", func() gen.MessageList {
			var l gen.MessageList
			e.get("/api/v1/instances/"+bob.Id+"/messages?direction=inbound", &l)
			return l
		}, func(l gen.MessageList) bool { return len(l.Data) == 2 })
		received := in.Data[0]
		if received.Type != "poll" || received.Poll == nil || received.Poll.Question != "Lunch?" ||
			!received.Poll.MultipleChoice || received.Poll.Options[1].Text != "Sushi" {
			t.Fatalf("received poll = %+v", received)
		}

		vote := func(body string) *response {
			return e.post("/api/v1/instances/"+bob.Id+"/sandbox/poll-votes", body)
		}
		if res := vote(fmt.Sprintf(`{"message_id":%q,"options":[0,2]}`, received.Id)); res.StatusCode != 200 {
			t.Fatalf("vote: %d %s", res.StatusCode, res.body)
		}
		voted := await.Until(t, "alice's poll results", func() gen.Message {
			var m gen.Message
			e.get("/api/v1/instances/"+alice.Id+"/messages/"+poll.Id, &m)
			return m
		}, func(m gen.Message) bool { return m.Poll.Voters == 1 })
		if tallyOf(voted) != "Pizza=1 Sushi=0 Salad=1" || voted.Poll.Votes[0].Voter.Address != bob.Account.Address ||
			voted.Poll.Votes[0].Voter.ContactId == nil {
			t.Fatalf("results = %s, %+v", tallyOf(voted), voted.Poll.Votes)
		}
		// A changed vote replaces the first.
		vote(fmt.Sprintf(`{"message_id":%q,"options":[1]}`, received.Id))
		voted = await.Until(t, "the changed vote", func() gen.Message {
			var m gen.Message
			e.get("/api/v1/instances/"+alice.Id+"/messages/"+poll.Id, &m)
			return m
		}, func(m gen.Message) bool { return m.Poll.Options[1].Votes == 1 })
		if tallyOf(voted) != "Pizza=0 Sushi=1 Salad=0" || voted.Poll.Voters != 1 || len(voted.Poll.Votes) != 1 {
			t.Fatalf("results after the change = %s, %+v", tallyOf(voted), voted.Poll.Votes)
		}
		var l gen.EventList
		e.get("/api/v1/events?type=poll.voted", &l)
		var evs []gen.PollVotedEvent
		for _, ev := range l.Data {
			b, _ := json.Marshal(ev.Data)
			var p gen.PollVotedEvent
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, p)
		}
		if len(evs) != 2 {
			t.Fatalf("poll.voted events = %+v", evs)
		}
		for _, ev := range evs {
			if ev.MessageId != poll.Id || ev.InstanceId != alice.Id || ev.Voter.Address != bob.Account.Address {
				t.Errorf("event = %+v", ev)
			}
			if len(ev.Options) == 1 && (ev.Options[0].Text != "Sushi" || ev.Poll.Options[1].Votes != 1) {
				t.Errorf("the changed vote's event = %+v", ev)
			}
		}

		// Refused: too many or too few options, twice the same, a poll without its type, votes that do not fit.
		base := "/api/v1/instances/" + alice.Id + "/messages"
		to := bob.Account.Address
		thirteen := `"1","2","3","4","5","6","7","8","9","10","11","12","13"`
		e.post(base, fmt.Sprintf(`{"to":%q,"type":"poll","poll":{"question":"q","options":[%s]}}`, to, thirteen)).
			problem(t, 400, "validation_failed")
		e.post(base, fmt.Sprintf(`{"to":%q,"type":"poll","poll":{"question":"q","options":["a"]}}`, to)).
			problem(t, 400, "validation_failed")
		e.post(base, fmt.Sprintf(`{"to":%q,"type":"poll","poll":{"question":"q","options":["a","a"]}}`, to)).
			problem(t, 400, "validation_failed")
		e.post(base, fmt.Sprintf(`{"to":%q,"type":"poll"}`, to)).problem(t, 400, "validation_failed")
		e.post(base, fmt.Sprintf(`{"to":%q,"type":"text","text":"x","poll":{"question":"q","options":["a","b"]}}`, to)).
			problem(t, 400, "validation_failed")
		vote(fmt.Sprintf(`{"message_id":%q,"options":[5]}`, received.Id)).problem(t, 400, "validation_failed")
		vote(fmt.Sprintf(`{"message_id":%q,"options":[0]}`, in.Data[1].Id)).problem(t, 400, "validation_failed")

		// Another workspace sees neither the poll nor the vote route's instance; a provider without polls refuses.
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{path: "/api/v1/instances/" + alice.Id + "/messages/" + poll.Id, key: otherKey}).problem(t, 404, "not_found")
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + bob.Id + "/sandbox/poll-votes", key: otherKey,
			body: fmt.Sprintf(`{"message_id":%q,"options":[0]}`, received.Id)}).problem(t, 404, "not_found")
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.post("/api/v1/instances/"+bare.Id+"/messages", `{"to":"bob","type":"poll","poll":{"question":"q","options":["a","b"]}}`).
			problem(t, 422, "capability_not_supported")
	})
}
