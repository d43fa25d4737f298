package handlers_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Two instances of a workspace that both talk to a third number have one person with two contacts; linking and
// splitting by hand move contacts between people; keys limited to instances and other workspaces see only theirs.
func TestPeople(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		alice, bob, carol := e.connected("Alice"), e.connected("Bob"), e.connected("Carol")
		e.say(alice, carol.Account.Address, "hi from alice")
		e.say(bob, carol.Account.Address, "hi from bob")
		e.received(carol, "hi from alice")
		e.received(carol, "hi from bob")

		byAddress := func(address string) gen.PersonList {
			var l gen.PersonList
			e.get("/api/v1/people?address="+url.QueryEscape(address), &l)
			return l
		}
		l := await.Until(t, "carol's person", func() gen.PersonList { return byAddress(carol.Account.Address) },
			func(l gen.PersonList) bool { return len(l.Data) == 1 && len(l.Data[0].Contacts) == 2 })
		p := l.Data[0]
		got := map[string]bool{}
		for _, c := range p.Contacts {
			got[c.Contact.InstanceId] = true
			if c.Provider != "sandbox" {
				t.Errorf("provider %q", c.Provider)
			}
		}
		if !got[alice.Id] || !got[bob.Id] {
			t.Fatalf("carol's person has contacts of %v, want alice's and bob's", got)
		}
		var one gen.Person
		e.get("/api/v1/people/"+p.Id, &one)
		if one.Id != p.Id || len(one.Contacts) != 2 || len(one.Addresses) == 0 {
			t.Fatalf("person %+v", one)
		}
		var all gen.PersonList
		e.get("/api/v1/people?limit=100", &all)
		if len(all.Data) < 3 { // carol, and alice and bob as carol's contacts
			t.Errorf("%d people, want at least 3", len(all.Data))
		}
		// Paging.
		var first gen.PersonList
		e.get("/api/v1/people?limit=1", &first)
		if !first.HasMore || first.NextCursor == nil {
			t.Fatalf("first page %+v", first)
		}

		// Split bob's contact off: its own person, and carol's keeps alice's; a new message does not regroup it.
		var bobsContact string
		for _, c := range p.Contacts {
			if c.Contact.InstanceId == bob.Id {
				bobsContact = c.Contact.Id
			}
		}
		res := e.do(request{method: http.MethodDelete, path: "/api/v1/people/" + p.Id + "/links/" + bobsContact, key: e.apiKey})
		if res.StatusCode != 200 {
			t.Fatalf("unlink: %d %s", res.StatusCode, res.body)
		}
		var split gen.Person
		res.json(t, &split)
		if split.Id == p.Id || len(split.Contacts) != 1 || split.Contacts[0].Contact.Id != bobsContact {
			t.Fatalf("split person %+v", split)
		}
		e.say(bob, carol.Account.Address, "again from bob")
		e.received(carol, "again from bob")
		e.get("/api/v1/people/"+p.Id, &one)
		if len(one.Contacts) != 1 {
			t.Fatalf("a split contact was regrouped: %+v", one)
		}

		// Link it back: the split person is merged into carol's and is gone.
		res = e.post("/api/v1/people/"+p.Id+"/links", `{"contact_id":"`+bobsContact+`"}`)
		if res.StatusCode != 200 {
			t.Fatalf("link: %d %s", res.StatusCode, res.body)
		}
		res.json(t, &one)
		if len(one.Contacts) != 2 {
			t.Fatalf("linked person %+v", one)
		}
		if res := e.do(request{path: "/api/v1/people/" + split.Id, key: e.apiKey}); res.StatusCode != 404 {
			t.Errorf("merged person: %d %s", res.StatusCode, res.body)
		}

		// Validation and references.
		for body, want := range map[string]int{
			`{}`:                    400,
			`{"contact_id":"nope"}`: 400,
			`{"contact_id":"con_01JDAD3A1B2C3D4E5F6G7H8J9K"}`: 422,
		} {
			if res := e.post("/api/v1/people/"+p.Id+"/links", body); res.StatusCode != want {
				t.Errorf("link %s: %d %s, want %d", body, res.StatusCode, res.body, want)
			}
		}
		for _, path := range []string{"/api/v1/people/per_01JDAD4A1B2C3D4E5F6G7H8J9K",
			"/api/v1/people/" + p.Id + "/links/con_01JDAD3A1B2C3D4E5F6G7H8J9K"} {
			method := http.MethodGet
			if len(path) > 60 {
				method = http.MethodDelete
			}
			if res := e.do(request{method: method, path: path, key: e.apiKey}); res.StatusCode != 404 {
				t.Errorf("%s %s: %d %s", method, path, res.StatusCode, res.body)
			}
		}
		if res := e.do(request{path: "/api/v1/people/nope", key: e.apiKey}); res.StatusCode != 400 {
			t.Errorf("bad id: %d %s", res.StatusCode, res.body)
		}

		// A key limited to alice's instance sees only alice's contact; a person with none of its contacts is 404, and
		// it cannot link a contact of another instance.
		limited, _ := createKey(t, db, e.ws.ID, &store.NewAPIKey{InstanceIDs: []string{alice.Id}}, apikey.All()...)
		var seen gen.Person
		e.do(request{path: "/api/v1/people/" + p.Id, key: limited}).json(t, &seen)
		if len(seen.Contacts) != 1 || seen.Contacts[0].Contact.InstanceId != alice.Id {
			t.Errorf("limited key sees %+v", seen)
		}
		var hidden gen.PersonList
		e.do(request{path: "/api/v1/people?limit=100", key: limited}).json(t, &hidden)
		for _, q := range hidden.Data {
			for _, c := range q.Contacts {
				if c.Contact.InstanceId != alice.Id {
					t.Errorf("limited key lists a contact of %s", c.Contact.InstanceId)
				}
			}
		}
		var carolsOwn gen.PersonList
		e.get("/api/v1/people?address="+url.QueryEscape(alice.Account.Address), &carolsOwn)
		if len(carolsOwn.Data) != 1 {
			t.Fatalf("alice as a person: %+v", carolsOwn)
		}
		if res := e.do(request{path: "/api/v1/people/" + carolsOwn.Data[0].Id, key: limited}); res.StatusCode != 404 {
			t.Errorf("person of no instance of the key: %d %s", res.StatusCode, res.body)
		}
		res = e.do(request{method: http.MethodPost, path: "/api/v1/people/" + p.Id + "/links", key: limited,
			body: `{"contact_id":"` + carolsOwn.Data[0].Contacts[0].Contact.Id + `"}`})
		if res.StatusCode != 422 {
			t.Errorf("limited key links another instance's contact: %d %s", res.StatusCode, res.body)
		}

		// Another workspace sees none of it.
		other := e.workspace("Other")
		otherKey, _ := createKey(t, db, other.ID, nil, apikey.All()...)
		if res := e.do(request{path: "/api/v1/people/" + p.Id, key: otherKey}); res.StatusCode != 404 {
			t.Errorf("other workspace: %d %s", res.StatusCode, res.body)
		}
		res = e.do(request{method: http.MethodDelete, path: "/api/v1/people/" + p.Id + "/links/" + bobsContact, key: otherKey})
		if res.StatusCode != 404 {
			t.Errorf("other workspace unlinks: %d %s", res.StatusCode, res.body)
		}
		var none gen.PersonList
		e.do(request{path: "/api/v1/people", key: otherKey}).json(t, &none)
		if len(none.Data) != 0 {
			t.Errorf("other workspace lists %d people", len(none.Data))
		}
	})
}
