package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// update is one PATCH route of the API, as TestUpdatesCommitAtomically drives it.
type update struct {
	operation string
	// path and body change the object so that field, read back at path (or read when set), becomes want; a field
	// with dots names one inside objects ("account.display_name").
	path, body, field, want, read string
	// fail makes the transaction's last write fail.
	fail func(t *testing.T, db *store.DB)
	// event is the type of the event the change records ("" for none); absent is a path that the change creates
	// on its way and that must not exist after a rolled-back one.
	event, absent string
}

// Every PATCH of the API is one transaction on both databases: when a write late in it fails, the request fails and
// nothing of it stays — the object reads as before, no event was recorded, nothing it made on its way exists — and
// the same request without the failure answers 200, its change visible at once with its event. (PATCH
// /api/v1/sources/{id} never answered on SQLite: its last write went through the pool, waiting for the writer its
// own transaction held.)
func TestUpdatesCommitAtomically(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		key, _ := e.key(e.ws.ID, "webhooks:write", "automation:write", "links:write", "messaging:write")
		call := func(method, path, body string) *response {
			return e.do(request{method: method, path: path, key: key, body: body})
		}
		created := func(path, body string) map[string]any {
			t.Helper()
			res := call(http.MethodPost, path, body)
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("POST %s: %d %s", path, res.StatusCode, res.body)
			}
			var v map[string]any
			res.json(t, &v)
			return v
		}
		hook, err := db.Webhooks.Create(context.Background(), store.NewWebhookEndpoint{WorkspaceID: e.ws.ID,
			URL: "https://receiver.example/hook", Description: "as created", Events: []string{"*"},
			SealSecret: func(string) string { return "sealed" }})
		if err != nil {
			t.Fatal(err)
		}
		created("/api/v1/event-types", `{"name":"custom.order.paid","description":"as created","schema":{"type":"object"}}`)
		src := created("/api/v1/sources", `{"name":"as created","event_type":"custom.order.paid","verification":{"scheme":"none"}}`)
		link := created("/api/v1/links", `{"destination_url":"https://example.com/","title":"as created"}`)
		alice, bob := e.connected("Alice"), e.connected("Bob")
		group := created("/api/v1/instances/"+alice.Id+"/groups",
			fmt.Sprintf(`{"subject":"as created","participants":[%q]}`, bob.Account.Address))

		chat := e.say(alice, bob.Account.Address, "hi").ChatId
		label := created("/api/v1/instances/"+alice.Id+"/labels", `{"name":"as created"}`)

		// A workflow bot whose URL is a public address literal, which the default egress policy takes without DNS.
		bot := store.Bot{WorkspaceID: e.ws.ID, InstanceID: alice.Id, Name: "as created", Kind: "workflow", Enabled: true,
			Settings: map[string]any{"trigger": map[string]any{"type": "all"}, "handoff": map[string]any{"minutes": 60},
				"replies_per_minute": 6, "workflow": map[string]any{"url": "https://93.184.216.34/hook", "timeout_seconds": 15}}}
		if err := db.Bots.Create(context.Background(), db.Bun(), &bot); err != nil {
			t.Fatal(err)
		}
		updates := []update{
			{operation: "updateWebhook", path: "/api/v1/webhooks/" + hook.ID, body: `{"description":"changed"}`,
				field: "description", want: "changed",
				fail: func(t *testing.T, db *store.DB) {
					storetest.FailUpdates(t, db, "webhook_endpoints", "description", "changed")
				}},
			{operation: "updateEventType", path: "/api/v1/event-types/custom.order.paid", body: `{"description":"changed"}`,
				field: "description", want: "changed",
				fail: func(t *testing.T, db *store.DB) {
					storetest.FailUpdates(t, db, "event_types", "description", "changed")
				}},
			{operation: "updateSource", path: "/api/v1/sources/" + src["id"].(string),
				body: `{"name":"changed","event_type":"custom.order.refunded"}`, field: "name", want: "changed",
				fail:   func(t *testing.T, db *store.DB) { storetest.FailUpdates(t, db, "sources", "name", "changed") },
				absent: "/api/v1/event-types/custom.order.refunded"},
			{operation: "updateLink", path: "/api/v1/links/" + link["id"].(string), body: `{"title":"changed"}`,
				field: "title", want: "changed", event: "link.updated",
				fail: func(t *testing.T, db *store.DB) { storetest.FailInserts(t, db, "events", "type", "link.updated") }},
			{operation: "updateInstance", path: "/api/v1/instances/" + alice.Id, body: `{"name":"changed"}`,
				field: "name", want: "changed", event: "instance.updated",
				fail: func(t *testing.T, db *store.DB) { storetest.FailInserts(t, db, "events", "type", "instance.updated") }},
			{operation: "updateGroup", path: "/api/v1/instances/" + alice.Id + "/groups/" + group["id"].(string),
				body: `{"subject":"changed"}`, field: "subject", want: "changed", event: "group.updated",
				fail: func(t *testing.T, db *store.DB) { storetest.FailInserts(t, db, "events", "type", "group.updated") }},
			{operation: "updateChat", path: "/api/v1/instances/" + alice.Id + "/chats/" + chat,
				body: `{"archived":true}`, field: "archived", want: "true", event: "chat.updated",
				fail: func(t *testing.T, db *store.DB) { storetest.FailInserts(t, db, "events", "type", "chat.updated") }},
			{operation: "updateLabel", path: "/api/v1/instances/" + alice.Id + "/labels/" + label["id"].(string),
				body: `{"name":"changed"}`, field: "name", want: "changed",
				fail: func(t *testing.T, db *store.DB) { storetest.FailUpdates(t, db, "labels", "name", "changed") }},
			// The profile is changed on the network first, which a failed request cannot take back; what it records
			// here (the account's new name, instance.updated) is one transaction.
			{operation: "updateInstanceProfile", path: "/api/v1/instances/" + alice.Id + "/profile",
				body: `{"name":"changed"}`, read: "/api/v1/instances/" + alice.Id, field: "account.display_name",
				want: "changed", event: "instance.updated",
				fail: func(t *testing.T, db *store.DB) { storetest.FailInserts(t, db, "events", "type", "instance.updated") }},
			{operation: "updateBot", path: "/api/v1/instances/" + alice.Id + "/bots/" + bot.ID,
				body: `{"name":"changed"}`, field: "name", want: "changed",
				fail: func(t *testing.T, db *store.DB) { storetest.FailUpdates(t, db, "bots", "name", "changed") }},
		}
		if len(updates) != len(patchOperations(t)) {
			t.Fatalf("the API has the PATCH operations %v; this test drives %d", patchOperations(t), len(updates))
		}
		for _, u := range updates {
			t.Run(u.operation, func(t *testing.T) {
				if !patchOperations(t)[u.operation] {
					t.Fatalf("%s is no PATCH operation of the API", u.operation)
				}
				field := func() string {
					t.Helper()
					read := u.path
					if u.read != "" {
						read = u.read
					}
					res := call(http.MethodGet, read, "")
					if res.StatusCode != http.StatusOK {
						t.Fatalf("GET %s: %d %s", read, res.StatusCode, res.body)
					}
					var v any
					res.json(t, &v)
					for _, name := range strings.Split(u.field, ".") {
						m, _ := v.(map[string]any)
						v = m[name]
					}
					return fmt.Sprint(v)
				}
				events := func() int {
					t.Helper()
					var n int
					// The object's own events: Bob's sandbox session records group.updated of its copy of the group too.
					id := u.path[strings.LastIndexByte(u.path, '/')+1:]
					if err := db.Bun().NewSelect().Table("events").ColumnExpr("count(*)").
						Where("workspace_id = ? AND type = ? AND CAST(data AS TEXT) LIKE ?", e.ws.ID, u.event, "%"+id+"%").
						Scan(context.Background(), &n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				before, eventsBefore := field(), events()

				t.Run("failing", func(t *testing.T) {
					u.fail(t, db)
					call(http.MethodPatch, u.path, u.body).problem(t, http.StatusInternalServerError, "internal_error")
				})
				if got := field(); got != before {
					t.Errorf("after the failed update %s = %q, want %q as before", u.field, got, before)
				}
				if n := events(); n != eventsBefore {
					t.Errorf("the failed update left %d %s event(s)", n-eventsBefore, u.event)
				}
				if u.absent != "" {
					call(http.MethodGet, u.absent, "").problem(t, http.StatusNotFound, "not_found")
				}

				if res := call(http.MethodPatch, u.path, u.body); res.StatusCode != http.StatusOK {
					t.Fatalf("PATCH %s: %d %s", u.path, res.StatusCode, res.body)
				}
				if got := field(); got != u.want {
					t.Errorf("after the update %s = %q, want %q", u.field, got, u.want)
				}
				if u.event != "" {
					if n := events(); n != eventsBefore+1 {
						t.Errorf("the update recorded %d %s event(s), want 1", n-eventsBefore, u.event)
					}
				}
				if u.absent != "" {
					if res := call(http.MethodGet, u.absent, ""); res.StatusCode != http.StatusOK {
						t.Errorf("GET %s after the update: %d %s", u.absent, res.StatusCode, res.body)
					}
				}
			})
		}
	})
}

// patchOperations are the operationIds of the API's PATCH operations.
func patchOperations(t *testing.T) map[string]bool {
	t.Helper()
	ops := map[string]bool{}
	for _, item := range specDoc.Paths.Map() {
		if item.Patch != nil {
			ops[item.Patch.OperationID] = true
		}
	}
	return ops
}

// A request whose transaction cannot get the database's writer within the server's bound — another transaction
// holds SQLite's single writer, or PostgreSQL's lock on the row — gives up and answers 503 with Retry-After instead
// of waiting, and what it would have changed stays as it was.
func TestRequestThatCannotGetTheWriterAnswers503(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{TxTimeout: 200 * time.Millisecond})
		ws := e.workspace("Acme")
		key, _ := e.key(ws.ID, "automation:write")
		res := e.do(request{method: http.MethodPost, path: "/api/v1/sources", key: key,
			body: `{"name":"as created","event_type":"custom.order.paid","verification":{"scheme":"none"}}`})
		var src sourceBody
		res.json(t, &src)

		holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
				if _, err := db.Sources.Lock(ctx, tx, ws.ID, src.ID); err != nil {
					return err
				}
				close(holding)
				<-release
				return nil
			})
		}()
		<-holding
		res = e.do(request{method: http.MethodPatch, path: "/api/v1/sources/" + src.ID, key: key, body: `{"name":"changed"}`})
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		res.problem(t, http.StatusServiceUnavailable, "service_unavailable")
		if res.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		var after sourceBody
		e.do(request{path: "/api/v1/sources/" + src.ID, key: key}).json(t, &after)
		if after.Name != "as created" {
			t.Errorf("the refused update was written: %+v", after)
		}
	})
}
