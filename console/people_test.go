package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The people pages and the instance page's contacts and polls: Bob is written to by two instances, so he is one
// person with two channels; his availability shows on the contact; a poll shows its results with the voter; a
// search by address finds him; another workspace's member gets 404 for him.
func TestPeoplePages(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc := newChannels(t, db)
		e := newEnv(t, db, console.Config{Channels: svc})
		b := e.browser()
		b.newUser(t, "people")
		ws := b.newWorkspace(t, "People")
		connected := func(name string) store.Instance { return connectedSandbox(t, svc, ws.ID, name) }
		alice, bob, carol := connected("Alice"), connected("Bob"), connected("Carol")
		to := bob.Account.Address
		text := "hello"
		if _, _, err := svc.Send(ctx, ws.ID, carol.ID, channels.MessageDraft{To: &to, Type: channels.TypeText, Text: &text}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Send(ctx, ws.ID, alice.ID, channels.MessageDraft{To: &to, Type: channels.TypePoll,
			Poll: &store.MessagePoll{Question: "Lunch?", Options: []string{"Pizza", "Sushi"}}}); err != nil {
			t.Fatal(err)
		}

		// Bob votes and comes online, as his sandbox instance does it.
		received := await.Until(t, "bob's poll", func() []store.Message {
			ms, _, _ := svc.ListMessages(ctx, ws.ID, bob.ID, store.MessageFilter{}, store.Page{Limit: 10})
			return ms
		}, func(ms []store.Message) bool { return len(ms) == 2 })
		for _, m := range received {
			if m.Type == "poll" {
				if err := svc.Control(ctx, ws.ID, bob.ID, channels.Control{Kind: "poll_vote", MessageID: m.ID, Options: []int{1}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := svc.SetPresence(ctx, ws.ID, bob.ID, true); err != nil {
			t.Fatal(err)
		}

		page := await.Until(t, "the poll's results and bob's presence on alice's page", func() *resp {
			return b.get(t, "/user/channels/"+alice.ID)
		}, func(r *resp) bool {
			return strings.Contains(r.body, `data-poll-voters="1"`) && strings.Contains(r.body, `data-presence="available"`)
		})
		page.wantText(t, "Lunch?")
		if !strings.Contains(page.body, `<li data-option-votes="1"><span>Sushi</span>`) {
			t.Fatalf("the poll's results are not shown:\n%s", page.body)
		}
		contacts, _, err := svc.ListContacts(ctx, ws.ID, alice.ID, nil, store.Page{Limit: 5})
		if err != nil || len(contacts) != 1 || contacts[0].PersonID == nil {
			t.Fatalf("alice's contacts: %+v %v", contacts, err)
		}
		person := *contacts[0].PersonID
		if !strings.Contains(page.body, `href="/user/people/`+person+`"`) {
			t.Fatal("the contact does not link to its person")
		}

		// The person: one, with Alice's and Carol's contacts of Bob.
		pp := b.get(t, "/user/people/"+person)
		pp.wantStatus(t, 200)
		pp.wantText(t, "2 channels")
		for _, s := range []string{`href="/user/channels/` + alice.ID + `"`, `href="/user/channels/` + carol.ID + `"`,
			"<code>" + strings.ReplaceAll(to, "+", "&#43;") + "</code>"} {
			if !strings.Contains(pp.body, s) {
				t.Fatalf("the person page has no %s:\n%s", s, pp.body)
			}
		}
		list := b.get(t, "/user/people?address="+url.QueryEscape(to))
		if !strings.Contains(list.body, `id="`+person+`"`) || strings.Count(list.body, `<tr id="per_`) != 1 {
			t.Fatalf("the search by address:\n%s", list.body)
		}
		b.get(t, "/user/people?address=%2B0000000").wantText(t, "Nobody has the address")

		// Another workspace's member sees no such person.
		other := e.browser()
		other.newUser(t, "other")
		other.newWorkspace(t, "Elsewhere")
		other.get(t, "/user/people/"+person).wantStatus(t, 404)
		if strings.Contains(other.get(t, "/user/people").body, person) {
			t.Fatal("another workspace lists the person")
		}
	})
}

// Sending to a person from the console: the channels checked are the route's steps; the route shows on the page
// with each step's outcome; a form without text or channels is refused with a reason.
func TestSendToPersonPage(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc := newChannels(t, db)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = svc.RunRoutes(ctx) }()
		t.Cleanup(func() { stop(); <-done })
		e := newEnv(t, db, console.Config{Channels: svc})
		b := e.browser()
		b.newUser(t, "router")
		ws := b.newWorkspace(t, "Routes")
		connected := func(name string) store.Instance { return connectedSandbox(t, svc, ws.ID, name) }
		alice, bob := connected("Alice"), connected("Bob")
		to, text := bob.Account.Address, "hi"
		if _, _, err := svc.Send(ctx, ws.ID, alice.ID, channels.MessageDraft{To: &to, Type: channels.TypeText, Text: &text}); err != nil {
			t.Fatal(err)
		}
		contacts := await.Until(t, "alice's contact of bob", func() []store.Contact {
			cs, _, _ := svc.ListContacts(ctx, ws.ID, alice.ID, nil, store.Page{Limit: 5})
			return cs
		}, func(cs []store.Contact) bool { return len(cs) == 1 && cs[0].PersonID != nil })
		person := *contacts[0].PersonID
		path := "/user/people/" + person

		b.get(t, path).wantText(t, "Nothing sent to this person with failover yet.")
		b.postCSRF(t, path+"/send", url.Values{"text": {" "}, "channel": {alice.ID}, "until": {"sent"}, "within": {"30"}}).
			wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, path+"/send", url.Values{"text": {"x"}, "until": {"sent"}, "within": {"30"}}).
			wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, path+"/send", url.Values{"text": {"Your order <shipped>"}, "channel": {alice.ID}, "until": {"delivered"}, "within": {"30"}}).
			wantRedirect(t, path+"?done=sent")
		page := await.Until(t, "the route completed on the page", func() *resp { return b.get(t, path) },
			func(r *resp) bool { return strings.Contains(r.body, `data-route-status="completed"`) })
		page.wantText(t, "Your order <shipped>")
		if strings.Contains(page.body, "<shipped>") {
			t.Fatal("the message text is not escaped")
		}
		if !strings.Contains(page.body, `data-step-status="succeeded"`) {
			t.Fatalf("the route's step is not shown:\n%s", page.body)
		}
	})
}

// connectedSandbox creates a sandbox instance of the workspace that pairs at once, and waits until it is connected.
func connectedSandbox(t *testing.T, svc *channels.Service, workspaceID, name string) store.Instance {
	t.Helper()
	inst, err := svc.Create(ctx, workspaceID, channels.NewInstance{Name: name, Provider: "sandbox",
		Config: map[string]any{"auto_pair": true, "display_name": name}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Connect(ctx, workspaceID, inst.ID); err != nil {
		t.Fatal(err)
	}
	return await.Until(t, name+" connected", func() store.Instance {
		i, _ := svc.Get(ctx, workspaceID, inst.ID)
		return i
	}, func(i store.Instance) bool { return i.Status == "connected" })
}
