package handlers_test

import (
	"fmt"
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

// A poll through the Bot API: sendPoll (not anonymous, so that answers name their voter), then poll_answer updates
// by long polling — which name only the poll's ID — are the voter's choice on the message: a vote, a changed vote,
// a retraction, and an answer to a poll of another bot that changes nothing.
func TestTelegramPolls(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := telegramtest.Start(t)
		e := newProviderEnv(t, db, "Polls", telegram.New(telegram.Options{PollTimeout: time.Second, BotInterval: time.Millisecond}))
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		token := fake.AddBot(7301, "PollBot")
		inst := e.instance("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q,"inbound":"polling"}`, token, fake.URL))
		if res := e.post("/api/v1/instances/"+inst.Id+"/connect", ""); res.StatusCode != 200 {
			t.Fatalf("connect: %d %s", res.StatusCode, res.body)
		}
		e.status(inst.Id, "connected")
		ada := telegramtest.User{ID: 601, FirstName: "Ada", Username: "ada"}
		hello, _ := fake.Message(token, ada, "hi")
		fake.Push(token, hello)

		res := e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"601","type":"poll",`+
			`"poll":{"question":"Lunch?","options":["Pizza","Sushi","Salad"],"multiple_choice":true}}`)
		if res.StatusCode != 202 {
			t.Fatalf("send a poll: %d %s", res.StatusCode, res.body)
		}
		var poll gen.Message
		res.json(t, &poll)
		awaitMessage(e, inst.Id, poll.Id, "sent")
		calls := fake.Calls("sendPoll")
		if len(calls) != 1 || calls[0].Params["is_anonymous"] != "false" || calls[0].Params["allows_multiple_answers"] != "true" ||
			!strings.Contains(calls[0].Params["options"], `"Salad"`) {
			t.Fatalf("sendPoll calls = %+v", calls)
		}
		pollID := sentPollID(t, fake, token)

		results := func(want string) gen.Message {
			t.Helper()
			return await.Until(t, "the poll's results "+want, func() gen.Message {
				var m gen.Message
				e.get("/api/v1/instances/"+inst.Id+"/messages/"+poll.Id, &m)
				return m
			}, func(m gen.Message) bool { return tallyOf(m) == want })
		}
		fake.Push(token, fake.PollAnswer(token, ada, pollID, 0, 2))
		voted := results("Pizza=1 Sushi=0 Salad=1")
		if voted.Poll.Voters != 1 || voted.Poll.Votes[0].Voter.Address != "601" || voted.Poll.Votes[0].Voter.ContactId == nil {
			t.Fatalf("votes = %+v", voted.Poll.Votes)
		}
		fake.Push(token, fake.PollAnswer(token, ada, pollID, 1))
		results("Pizza=0 Sushi=1 Salad=0")
		fake.Push(token, fake.PollAnswer(token, ada, pollID)) // taken back
		if m := results("Pizza=0 Sushi=0 Salad=0"); m.Poll.Voters != 0 {
			t.Errorf("voters after the retraction = %d", m.Poll.Voters)
		}
		votes := instanceEvents(e, "poll.voted", inst.Id, func(v gen.PollVotedEvent) (string, int64) { return v.InstanceId, v.Sequence })
		if len(votes) != 3 {
			t.Errorf("poll.voted events = %d, want 3", len(votes))
		}

		// An answer to a poll the instance never sent changes nothing.
		fake.Push(token, map[string]any{"poll_answer": map[string]any{"poll_id": "5000000000000000999",
			"user": map[string]any{"id": 601, "is_bot": false, "first_name": "Ada"}, "option_ids": []int{0}}})
		hello2, _ := fake.Message(token, ada, "after the stray answer")
		fake.Push(token, hello2)
		await.Until(t, "the message after the stray answer", func() int {
			var l gen.MessageList
			e.get("/api/v1/instances/"+inst.Id+"/messages?direction=inbound", &l)
			return len(l.Data)
		}, func(n int) bool { return n == 2 })
		if m := results("Pizza=0 Sushi=0 Salad=0"); m.Poll.Voters != 0 {
			t.Errorf("a stray answer counted: %+v", m.Poll)
		}
	})
}

// sentPollID is the ID the fake gave the last poll it sent.
func sentPollID(t *testing.T, fake *telegramtest.Server, token string) string {
	t.Helper()
	id := fake.LastPollID(token)
	if id == "" {
		t.Fatal("the fake sent no poll")
	}
	return id
}

func tallyOf(m gen.Message) string {
	if m.Poll == nil {
		return ""
	}
	var s []string
	for _, o := range m.Poll.Options {
		s = append(s, fmt.Sprintf("%s=%d", o.Text, o.Votes))
	}
	return strings.Join(s, " ")
}
