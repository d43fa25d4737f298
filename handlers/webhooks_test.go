package handlers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oapi-codegen/nullable"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// hooks is a server whose webhook engine may reach receivers on 127.0.0.0/8 over http, with a workspace, keys and
// a count of dispatcher wake-ups.
type hooks struct {
	*env
	box   *sealbox.Box
	ws    store.Workspace
	write string // a webhooks:write key of ws
	wakes *atomic.Int32
}

func newHooks(t *testing.T, db *store.DB) *hooks {
	t.Helper()
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	box, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	wakes := &atomic.Int32{}
	outbox := events.NewOutbox(db, events.Builtin())
	e := newEnv(t, db, handlers.Config{Box: box, Events: outbox, Webhooks: webhookService(t, db, outbox, webhook.ServiceConfig{
		Box: box, Guard: guard, Sender: webhook.NewSender(box, guard, 5*time.Second), Wake: func() { wakes.Add(1) }})})
	h := &hooks{env: e, box: box, ws: e.workspace("Acme"), wakes: wakes}
	h.write, _ = e.key(h.ws.ID, "webhooks:write")
	return h
}

// webhookBody is the Webhook and WebhookWithSecret schemas, decoded.
type webhookBody struct {
	ID                      string     `json:"id"`
	Object                  string     `json:"object"`
	URL                     string     `json:"url"`
	Description             string     `json:"description"`
	Events                  []string   `json:"events"`
	HeaderNames             []string   `json:"header_names"`
	RateLimit               *int       `json:"rate_limit"`
	Status                  string     `json:"status"`
	DisabledReason          *string    `json:"disabled_reason"`
	FailingSince            *time.Time `json:"failing_since"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	Secret                  string     `json:"secret"`
}

// create registers an endpoint and returns it with its secret.
func (h *hooks) create(body string) webhookBody {
	h.t.Helper()
	res := h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write, body: body})
	if res.StatusCode != http.StatusCreated {
		h.t.Fatalf("create: %d %s", res.StatusCode, res.body)
	}
	var w webhookBody
	res.json(h.t, &w)
	if got := res.Header.Get("Location"); got != "/api/v1/webhooks/"+w.ID {
		h.t.Errorf("Location = %q", got)
	}
	return w
}

// call sends a request with the webhooks:write key and decodes a successful answer into v.
func (h *hooks) call(method, path, body string, status int, v any) *response {
	h.t.Helper()
	res := h.do(request{method: method, path: path, key: h.write, body: body})
	if res.StatusCode != status {
		h.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, res.body, status)
	}
	if v != nil {
		res.json(h.t, v)
	}
	return res
}

// emit records an event of the workspace as an area would, with its deliveries.
func (h *hooks) emit(eventType string, data any) store.Event {
	h.t.Helper()
	var ev store.Event
	err := h.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		var err error
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		ev, err = events.NewOutbox(h.db, events.Builtin()).EmitJSON(ctx, tx, h.ws.ID, eventType, b)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// ping emits a webhook.ping event, whose data the spec describes.
func (h *hooks) ping() store.Event {
	return h.emit("webhook.ping", map[string]string{"webhook_id": "whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D", "message": "hi"})
}

// exec runs SQL on the database, to put rows in states only time or the dispatcher would.
func (h *hooks) exec(query string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Bun().ExecContext(context.Background(), query, args...); err != nil {
		h.t.Fatal(err)
	}
}

func TestWebhookLifecycle(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		before := time.Now()
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["webhook.*"],"description":"n8n",
			"headers":{"X-N8N-Auth":"s3cr3t-header-value","A-First":"1"},"rate_limit":50}`)
		if w.Object != "webhook" || !strings.HasPrefix(w.ID, "whk_") || w.URL != "http://127.0.0.1:9/hook" ||
			w.Description != "n8n" || !slices.Equal(w.Events, []string{"webhook.*"}) || w.Status != "active" ||
			!slices.Equal(w.HeaderNames, []string{"A-First", "X-N8N-Auth"}) || *w.RateLimit != 50 ||
			w.DisabledReason != nil || w.FailingSince != nil || w.PreviousSecretExpiresAt != nil {
			t.Errorf("created %+v", w)
		}
		if _, err := webhook.ParseSecret(w.Secret); err != nil {
			t.Errorf("secret %q: %v", w.Secret, err)
		}

		res := h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID, "", http.StatusOK, nil)
		if strings.Contains(string(res.body), w.Secret) || strings.Contains(string(res.body), `"secret"`) ||
			strings.Contains(string(res.body), "s3cr3t-header-value") {
			t.Errorf("GET shows a secret: %s", res.body)
		}
		var got webhookBody
		res.json(t, &got)
		if got.ID != w.ID || !slices.Equal(got.HeaderNames, w.HeaderNames) {
			t.Errorf("GET %+v", got)
		}

		second := h.create(`{"url":"http://127.0.0.1:9/2","events":["*"]}`)
		third := h.create(`{"url":"http://127.0.0.1:9/3","events":["webhook.ping"]}`)
		if second.Description != "" || second.HeaderNames == nil || len(second.HeaderNames) != 0 || second.RateLimit != nil {
			t.Errorf("defaults %+v", second)
		}
		ids, pages := h.pages("/api/v1/webhooks?limit=2")
		if pages != 2 {
			t.Errorf("%d pages, want 2", pages)
		}
		if !slices.Equal(ids, []string{third.ID, second.ID, w.ID}) {
			t.Errorf("pages = %v, want newest first", ids)
		}

		patches := []struct {
			body  string
			check func(webhookBody) bool
		}{
			{`{"url":"http://127.0.0.2:9/moved"}`, func(x webhookBody) bool { return x.URL == "http://127.0.0.2:9/moved" && x.Description == "n8n" }},
			{`{"description":"CRM"}`, func(x webhookBody) bool { return x.Description == "CRM" && *x.RateLimit == 50 }},
			{`{"events":["webhook.ping","webhook.delivery.exhausted"]}`, func(x webhookBody) bool { return len(x.Events) == 2 && x.Events[1] == "webhook.delivery.exhausted" }},
			{`{"headers":{"X-Other":"v"}}`, func(x webhookBody) bool { return slices.Equal(x.HeaderNames, []string{"X-Other"}) }},
			{`{"rate_limit":20}`, func(x webhookBody) bool { return *x.RateLimit == 20 && len(x.HeaderNames) == 1 }},
			{`{"rate_limit":null}`, func(x webhookBody) bool { return x.RateLimit == nil }},
			{`{"headers":{}}`, func(x webhookBody) bool { return len(x.HeaderNames) == 0 && x.URL == "http://127.0.0.2:9/moved" }},
		}
		for _, p := range patches {
			var x webhookBody
			h.call(http.MethodPatch, "/api/v1/webhooks/"+w.ID, p.body, http.StatusOK, &x)
			var stored webhookBody
			h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID, "", http.StatusOK, &stored)
			if !p.check(x) || !p.check(stored) || x.Secret != "" {
				t.Errorf("PATCH %s: answered %+v, stored %+v", p.body, x, stored)
			}
		}

		var rotated webhookBody
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/rotate-secret", "", http.StatusOK, &rotated)
		if rotated.Secret == "" || rotated.Secret == w.Secret || rotated.PreviousSecretExpiresAt == nil ||
			rotated.PreviousSecretExpiresAt.Before(before.Add(24*time.Hour)) || rotated.PreviousSecretExpiresAt.After(time.Now().Add(24*time.Hour)) {
			t.Errorf("rotated with the default grace: %+v", rotated)
		}
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/rotate-secret", `{"grace_period_seconds":0}`, http.StatusOK, &rotated)
		if rotated.PreviousSecretExpiresAt != nil {
			t.Errorf("rotated without grace: %+v", rotated)
		}
		stored, _ := db.Webhooks.Get(context.Background(), h.ws.ID, w.ID)
		if stored.PreviousSecret != nil {
			t.Error("a rotation without grace kept the previous secret")
		}
		if secret, err := h.box.Open(stored.Secret, []byte(w.ID)); err != nil || string(secret) != rotated.Secret {
			t.Errorf("the stored secret is not the one shown: %v", err)
		}

		h.call(http.MethodDelete, "/api/v1/webhooks/"+w.ID, "", http.StatusNoContent, nil)
		h.do(request{path: "/api/v1/webhooks/" + w.ID, key: h.write}).problem(t, http.StatusNotFound, "not_found")
		h.do(request{method: http.MethodDelete, path: "/api/v1/webhooks/" + w.ID, key: h.write}).problem(t, http.StatusNotFound, "not_found")
	})
}

// The database holds the secret and the static header values only sealed with the server key.
func TestWebhookSecretsAreSealedAtRest(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"],"headers":{"Authorization":"Bearer header-credential"}}`)
		var rotated webhookBody
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/rotate-secret", `{"grace_period_seconds":3600}`, http.StatusOK, &rotated)
		var row map[string]any
		if err := db.Bun().NewSelect().Table("webhook_endpoints").Where("id = ?", w.ID).Scan(context.Background(), &row); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprint(row)
		for _, plain := range []string{w.Secret, rotated.Secret, strings.TrimPrefix(w.Secret, "whsec_"),
			strings.TrimPrefix(rotated.Secret, "whsec_"), "header-credential", "Authorization"} {
			if strings.Contains(text, plain) {
				t.Errorf("the endpoint row contains %q in clear: %s", plain, text)
			}
		}
		for _, col := range []string{"secret", "previous_secret", "sealed_headers"} {
			if v := fmt.Sprint(row[col]); !strings.HasPrefix(v, "v1:") {
				t.Errorf("%s = %q, want sealed text", col, v)
			}
		}
	})
}

// pointers returns the pointer (or parameter) of every field error of a validation problem.
func pointers(p problem) []string {
	var out []string
	for _, e := range p.Errors {
		if e["pointer"] != "" {
			out = append(out, e["pointer"])
		} else {
			out = append(out, "?"+e["parameter"])
		}
	}
	slices.Sort(out)
	return out
}

func TestWebhookValidation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{}) // the default policy: public https targets only
		ws := e.workspace("Acme")
		key, _ := e.key(ws.ID, "webhooks:write")
		long := strings.Repeat("X", 257)
		tests := []struct {
			name, body string
			want       []string
			detail     string
		}{
			{"loopback", `{"url":"https://127.0.0.1/hook","events":["*"]}`, []string{"/url"}, egress.ErrBlocked.Error()},
			{"private name", `{"url":"https://10.1.2.3/hook","events":["*"]}`, []string{"/url"}, egress.ErrBlocked.Error()},
			{"plain http", `{"url":"http://8.8.8.8/hook","events":["*"]}`, []string{"/url"}, "invalid URL"},
			{"user info", `{"url":"https://user:pass@8.8.8.8/hook","events":["*"]}`, []string{"/url"}, "invalid URL"},
			{"unresolvable", `{"url":"https://switchboard-test.invalid/hook","events":["*"]}`, []string{"/url"}, egress.ErrUnresolvable.Error()},
			{"unknown types", `{"url":"https://8.8.8.8/hook","events":["*","nothing.*","webhook.ping","webhook.nothing","webhook.nothing.*","webhook.endpoint.*"]}`,
				[]string{"/events/1", "/events/3", "/events/4"}, "GET /api/v1/event-types"},
			{"header names", `{"url":"https://8.8.8.8/hook","events":["*"],"headers":{"Bad Name":"x","webhook-signature":"x",
				"Content-Type":"x","proxy-authorization":"x","Host":"x","Transfer-Encoding":"x","` + long + `":"x","X-Fine":"ok"}}`,
				[]string{"/headers/" + long, "/headers/Bad Name", "/headers/Content-Type", "/headers/Host",
					"/headers/Transfer-Encoding", "/headers/proxy-authorization", "/headers/webhook-signature"}, ""},
			{"header twice", `{"url":"https://8.8.8.8/hook","events":["*"],"headers":{"X-Token":"1","x-token":"2"}}`,
				[]string{"/headers/x-token"}, "twice"},
			{"header line break", `{"url":"https://8.8.8.8/hook","events":["*"],"headers":{"X-Token":"a\r\nInjected: 1"}}`,
				[]string{"/headers/X-Token"}, "control characters"},
			{"all at once", `{"url":"https://127.0.0.1/","events":["nope.x"],"headers":{"Webhook-Id":"x"}}`,
				[]string{"/events/0", "/headers/Webhook-Id", "/url"}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := e.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: key, body: tt.body})
				p := res.problem(t, http.StatusBadRequest, "validation_failed")
				if got := pointers(p); !slices.Equal(got, slices.Sorted(slices.Values(tt.want))) {
					t.Fatalf("pointers %v, want %v: %s", got, tt.want, res.body)
				}
				if !strings.Contains(p.Errors[0]["detail"], tt.detail) {
					t.Errorf("detail %q, want it to contain %q", p.Errors[0]["detail"], tt.detail)
				}
				if strings.Contains(string(res.body), "Injected") {
					t.Error("the problem echoes a header value")
				}
			})
		}
		count, err := db.Bun().NewSelect().Table("webhook_endpoints").Where("workspace_id = ?", ws.ID).Count(context.Background())
		if err != nil || count != 0 {
			t.Errorf("%d endpoints stored by refused requests (%v)", count, err)
		}

		// PATCH checks the same way, before looking the endpoint up.
		created := e.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: key, body: `{"url":"https://8.8.8.8/hook","events":["*"]}`})
		var w webhookBody
		created.json(t, &w)
		res := e.do(request{method: http.MethodPatch, path: "/api/v1/webhooks/" + w.ID, key: key,
			body: `{"url":"https://192.168.1.1/","events":["*","x.*"],"headers":{"Connection":"close"}}`})
		if got := pointers(res.problem(t, http.StatusBadRequest, "validation_failed")); !slices.Equal(got, []string{"/events/1", "/headers/Connection", "/url"}) {
			t.Errorf("PATCH pointers %v", got)
		}
		e.do(request{method: http.MethodPatch, path: "/api/v1/webhooks/whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D", key: key,
			body: `{"description":"x"}`}).problem(t, http.StatusNotFound, "not_found")
	})
}

// An endpoint's instance filter names instances of its workspace: another workspace's instance, or an ID that was
// never an instance, is refused with 422 reference_not_found and a pointer to each, on creation and on update.
func TestWebhookInstanceFilterNamesWorkspaceInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		instance := func(workspaceID string) string {
			inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: workspaceID, Name: "i", Provider: "sandbox",
				Status: "created", StatusReason: "created"}
			if err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
				return db.Instances.Create(ctx, tx, &inst)
			}); err != nil {
				t.Fatal(err)
			}
			return inst.ID
		}
		own, theirs := instance(h.ws.ID), instance(h.workspace("Other").ID)
		madeUp := "ins_01JDAD0A1B2C3D4E5F6G7H8J9K"
		body := fmt.Sprintf(`{"url":"http://127.0.0.1:9/hook","events":["*"],"instance_ids":[%q,%q,%q]}`, own, theirs, madeUp)
		p := h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write, body: body}).
			problem(t, http.StatusUnprocessableEntity, "reference_not_found")
		if got := pointers(p); !slices.Equal(got, []string{"/instance_ids/1", "/instance_ids/2"}) {
			t.Errorf("pointers %v, want /instance_ids/1 and /instance_ids/2", got)
		}
		if strings.Contains(fmt.Sprint(p), "Other") {
			t.Errorf("the problem names the other workspace: %+v", p)
		}
		w := h.create(fmt.Sprintf(`{"url":"http://127.0.0.1:9/hook","events":["*"],"instance_ids":[%q]}`, own))
		p = h.do(request{method: http.MethodPatch, path: "/api/v1/webhooks/" + w.ID, key: h.write,
			body: fmt.Sprintf(`{"instance_ids":[%q,%q]}`, theirs, own)}).problem(t, http.StatusUnprocessableEntity, "reference_not_found")
		if got := pointers(p); !slices.Equal(got, []string{"/instance_ids/0"}) {
			t.Errorf("PATCH pointers %v, want /instance_ids/0", got)
		}
		var got struct {
			InstanceIDs []string `json:"instance_ids"`
		}
		h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID, "", http.StatusOK, &got)
		if !slices.Equal(got.InstanceIDs, []string{own}) {
			t.Errorf("instance_ids = %v after a refused update, want [%s]", got.InstanceIDs, own)
		}
	})
}

func TestWebhookScopes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`)
		ev := h.ping()
		dlv, _, _ := db.Deliveries.List(context.Background(), h.ws.ID, w.ID, store.DeliveryFilter{}, store.Page{Limit: 1})
		read, _ := h.key(h.ws.ID, "webhooks:read")
		models, _ := h.key(h.ws.ID, "models:read")
		var writes, reads []request
		for _, r := range append(objectRequests(w.ID, dlv[0].ID, ev.ID),
			request{method: http.MethodPost, path: "/api/v1/webhooks", body: `{"url":"http://127.0.0.1:9/x","events":["*"]}`},
			request{method: http.MethodGet, path: "/api/v1/webhooks"},
			request{method: http.MethodGet, path: "/api/v1/events"},
			request{method: http.MethodGet, path: "/api/v1/event-types"},
			request{method: http.MethodGet, path: "/api/v1/event-types/webhook.ping"}) {
			if r.method == http.MethodGet {
				reads = append(reads, r)
			} else {
				writes = append(writes, r)
			}
		}
		for _, r := range writes {
			r.key = read
			p := h.do(r).problem(t, http.StatusForbidden, "insufficient_scope")
			if !slices.Equal(p.RequiredScopes, []string{"webhooks:write"}) {
				t.Errorf("%s %s: required_scopes %v", r.method, r.path, p.RequiredScopes)
			}
		}
		for _, r := range reads {
			r.key = models
			p := h.do(r).problem(t, http.StatusForbidden, "insufficient_scope")
			if !slices.Equal(p.RequiredScopes, []string{"webhooks:read"}) {
				t.Errorf("GET %s: required_scopes %v", r.path, p.RequiredScopes)
			}
			r.key = read
			if res := h.do(r); res.StatusCode != http.StatusOK {
				t.Errorf("GET %s with webhooks:read: %d %s", r.path, res.StatusCode, res.body)
			}
		}
	})
}

// objectRequests is a request of every operation on one endpoint, delivery or event.
func objectRequests(webhookID, deliveryID, eventID string) []request {
	since := `{"since":"` + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + `"}`
	endpoint := "/api/v1/webhooks/" + webhookID
	return []request{
		{method: http.MethodGet, path: endpoint},
		{method: http.MethodPatch, path: endpoint, body: `{"description":"changed"}`},
		{method: http.MethodDelete, path: endpoint},
		{method: http.MethodPost, path: endpoint + "/pause"},
		{method: http.MethodPost, path: endpoint + "/resume"},
		{method: http.MethodPost, path: endpoint + "/enable"},
		{method: http.MethodPost, path: endpoint + "/rotate-secret"},
		{method: http.MethodPost, path: endpoint + "/test"},
		{method: http.MethodPost, path: endpoint + "/recover", body: since},
		{method: http.MethodGet, path: endpoint + "/deliveries"},
		{method: http.MethodGet, path: "/api/v1/webhook-deliveries/" + deliveryID},
		{method: http.MethodPost, path: "/api/v1/webhook-deliveries/" + deliveryID + "/redeliver"},
		{method: http.MethodGet, path: "/api/v1/events/" + eventID},
	}
}

// Another workspace's objects answer exactly like unknown ones, and are left untouched.
func TestWebhookTenantIsolation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		rc := receivertest.New(t, nil)
		w := h.create(`{"url":"` + rc.URL + `","events":["*"]}`)
		ev := h.ping()
		dlv, _, _ := db.Deliveries.List(context.Background(), h.ws.ID, w.ID, store.DeliveryFilter{}, store.Page{Limit: 1})
		other, _ := h.key(h.workspace("Other").ID, "webhooks:write")
		for _, r := range objectRequests(w.ID, dlv[0].ID, ev.ID) {
			r.key = other
			p := h.do(r).problem(t, http.StatusNotFound, "not_found")
			if strings.Contains(p.Detail, h.ws.ID) {
				t.Errorf("%s %s: the detail names the owner's workspace: %s", r.method, r.path, p.Detail)
			}
		}
		var l struct{ Data []webhookBody }
		h.do(request{path: "/api/v1/webhooks", key: other}).json(t, &l)
		var evs struct{ Data []struct{ ID string } }
		h.do(request{path: "/api/v1/events", key: other}).json(t, &evs)
		if len(l.Data) != 0 || len(evs.Data) != 0 {
			t.Errorf("another workspace lists %d endpoints and %d events", len(l.Data), len(evs.Data))
		}
		var got webhookBody
		h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID, "", http.StatusOK, &got)
		if got.Status != "active" || got.Description != "" || len(rc.Requests()) != 0 {
			t.Errorf("another workspace changed the endpoint: %+v, %d requests sent", got, len(rc.Requests()))
		}
	})
}

func TestWebhookPauseResumeEnable(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`)
		base := "/api/v1/webhooks/" + w.ID
		steps := []struct{ action, want string }{
			{"pause", "paused"}, {"pause", "paused"}, {"resume", "active"}, {"resume", "active"},
			{"pause", "paused"}, {"enable", "active"},
		}
		for _, s := range steps {
			var got webhookBody
			h.call(http.MethodPost, base+"/"+s.action, "", http.StatusOK, &got)
			if got.Status != s.want {
				t.Fatalf("%s: status %q, want %q", s.action, got.Status, s.want)
			}
		}

		h.exec("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', failing_since = ? WHERE id = ?",
			time.Now().Add(-time.Hour).UTC(), w.ID)
		var disabled webhookBody
		h.call(http.MethodGet, base, "", http.StatusOK, &disabled)
		if disabled.Status != "disabled" || *disabled.DisabledReason != "gone" || disabled.FailingSince == nil {
			t.Errorf("disabled %+v", disabled)
		}
		for _, action := range []string{"pause", "resume"} {
			p := h.do(request{method: http.MethodPost, path: base + "/" + action, key: h.write}).problem(t, http.StatusConflict, "webhook_disabled")
			if !strings.Contains(p.Detail, "410 Gone") || !strings.Contains(p.Detail, "POST "+base+"/enable") {
				t.Errorf("%s detail %q should name the reason and the enable URL", action, p.Detail)
			}
		}
		tooOld := time.Now().Add(-15 * 24 * time.Hour).UTC().Format(time.RFC3339)
		p := h.do(request{method: http.MethodPost, path: base + "/enable", key: h.write, body: `{"recover_since":"` + tooOld + `"}`}).
			problem(t, http.StatusBadRequest, "validation_failed")
		if got := pointers(p); !slices.Equal(got, []string{"/recover_since"}) {
			t.Errorf("pointers %v", got)
		}
		wakes := h.wakes.Load()
		var enabled webhookBody
		h.call(http.MethodPost, base+"/enable", "", http.StatusOK, &enabled)
		if enabled.Status != "active" || enabled.DisabledReason != nil || enabled.FailingSince != nil {
			t.Errorf("enabled %+v", enabled)
		}
		if h.wakes.Load() == wakes {
			t.Error("enable did not wake the dispatcher")
		}
	})
}

// envelope is the body of a delivery.
type envelope struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Timestamp   time.Time       `json:"timestamp"`
	APIVersion  string          `json:"api_version"`
	WorkspaceID string          `json:"workspace_id"`
	Data        json.RawMessage `json:"data"`
}

type testResult struct {
	Object          string  `json:"object"`
	Success         bool    `json:"success"`
	EventID         string  `json:"event_id"`
	EventType       string  `json:"event_type"`
	StatusCode      *int    `json:"status_code"`
	DurationMS      int     `json:"duration_ms"`
	ErrorClass      *string `json:"error_class"`
	ResponseExcerpt *string `json:"response_excerpt"`
}

func TestTestWebhook(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		rc := receivertest.New(t, nil)
		w := h.create(`{"url":"` + rc.URL + `/hook","events":["webhook.ping"],"headers":{"X-Static-Auth":"s3cret"}}`)
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/pause", "", http.StatusOK, nil) // sent whatever the status

		var r testResult
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/test", "", http.StatusOK, &r)
		if !r.Success || r.Object != "webhook_test" || r.EventType != "webhook.ping" || !strings.HasPrefix(r.EventID, "evt_") ||
			r.StatusCode == nil || *r.StatusCode != 200 || r.ErrorClass != nil || r.ResponseExcerpt == nil || *r.ResponseExcerpt != "ok" {
			t.Fatalf("result %+v", r)
		}
		got := rc.Requests()
		if len(got) != 1 {
			t.Fatalf("the receiver got %d requests", len(got))
		}
		wh, err := standardwebhooks.NewWebhook(w.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got[0].Body, got[0].Header); err != nil {
			t.Errorf("the official library rejects the test ping: %v", err)
		}
		if got[0].Header.Get("X-Static-Auth") != "s3cret" || got[0].Header.Get("webhook-id") != r.EventID {
			t.Errorf("headers %v", got[0].Header)
		}
		var env envelope
		if err := json.Unmarshal(got[0].Body, &env); err != nil {
			t.Fatal(err)
		}
		var ping gen.WebhookPingEvent
		_ = json.Unmarshal(env.Data, &ping)
		if env.ID != r.EventID || env.Type != "webhook.ping" || env.WorkspaceID != h.ws.ID || env.APIVersion != "v1" ||
			ping.WebhookId != w.ID || ping.Message != "Hello from Switchboard." {
			t.Errorf("envelope %s", got[0].Body)
		}

		// Another type is sent with the catalogue's example.
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/test", `{"event_type":"webhook.delivery.exhausted"}`, http.StatusOK, &r)
		var typ struct {
			Example map[string]any `json:"example"`
		}
		h.call(http.MethodGet, "/api/v1/event-types/webhook.delivery.exhausted", "", http.StatusOK, &typ)
		got = rc.Requests()
		_ = json.Unmarshal(got[1].Body, &env)
		var data map[string]any
		_ = json.Unmarshal(env.Data, &data)
		if !r.Success || r.EventType != "webhook.delivery.exhausted" || env.Type != "webhook.delivery.exhausted" ||
			fmt.Sprint(data) != fmt.Sprint(typ.Example) {
			t.Errorf("example test: %+v, data %s", r, env.Data)
		}

		p := h.do(request{method: http.MethodPost, path: "/api/v1/webhooks/" + w.ID + "/test", key: h.write,
			body: `{"event_type":"nothing.happened"}`}).problem(t, http.StatusBadRequest, "validation_failed")
		if got := pointers(p); !slices.Equal(got, []string{"/event_type"}) {
			t.Errorf("pointers %v", got)
		}

		// A failing receiver is an answer, not a server error.
		rc.SetStatus(http.StatusServiceUnavailable)
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/test", "{}", http.StatusOK, &r)
		if r.Success || r.StatusCode == nil || *r.StatusCode != 503 || r.ErrorClass == nil || *r.ErrorClass != "http_5xx" {
			t.Errorf("failing receiver: %+v", r)
		}
		rc.Close()
		h.call(http.MethodPost, "/api/v1/webhooks/"+w.ID+"/test", "", http.StatusOK, &r)
		if r.Success || r.StatusCode != nil || r.ErrorClass == nil || *r.ErrorClass != "connection_refused" {
			t.Errorf("closed receiver: %+v", r)
		}

		// Tests are neither events nor deliveries.
		var evs, dls struct{ Data []any }
		h.call(http.MethodGet, "/api/v1/events", "", http.StatusOK, &evs)
		h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID+"/deliveries", "", http.StatusOK, &dls)
		if len(evs.Data) != 0 || len(dls.Data) != 0 {
			t.Errorf("the tests left %d events and %d deliveries", len(evs.Data), len(dls.Data))
		}
	})
}

// A destination the default policy refuses (here: endpoints registered while the operator allowed the loopback
// network and plain http) answers blocked and nothing else, and is not contacted.
func TestTestWebhookBlocked(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		rc := receivertest.New(t, nil)
		outbox := events.NewOutbox(db, events.Builtin())
		strict := newEnv(t, db, handlers.Config{Events: outbox, Webhooks: webhookService(t, db, outbox, webhook.ServiceConfig{
			Box: h.box, Guard: egress.NewGuard(egress.Policy{}), Sender: webhook.NewSender(h.box, egress.NewGuard(egress.Policy{}), 5*time.Second)})})
		for _, url := range []string{rc.URL, strings.Replace(rc.URL, "http:", "https:", 1)} {
			w := h.create(`{"url":"` + url + `","events":["*"]}`)
			res := strict.do(request{method: http.MethodPost, path: "/api/v1/webhooks/" + w.ID + "/test", key: h.write})
			var r testResult
			res.json(t, &r)
			if res.StatusCode != http.StatusOK || r.Success || r.ErrorClass == nil || *r.ErrorClass != "blocked" ||
				r.StatusCode != nil || r.ResponseExcerpt != nil || r.EventType != "webhook.ping" {
				t.Errorf("%s: %d %s", url, res.StatusCode, res.body)
			}
			if !strings.Contains(string(res.body), `"status_code":null`) || !strings.Contains(string(res.body), `"response_excerpt":null`) {
				t.Errorf("status_code and response_excerpt must be null: %s", res.body)
			}
		}
		// Send refuses at dial time: not even a connection reaches the receiver.
		if n, conns := len(rc.Requests()), rc.Conns(); n != 0 || conns != 0 {
			t.Errorf("the blocked receiver got %d requests over %d connections", n, conns)
		}
	})
}

// The typed client generated from the spec drives the webhook API.
func TestWebhookClientRoundTrip(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		c := newClient(t, h.url, h.write)
		ctx := context.Background()
		desc := "via the client"
		created, err := c.CreateWebhookWithResponse(ctx, nil, gen.WebhookCreate{Url: "http://127.0.0.1:9/hook",
			Events: []string{"webhook.*"}, Description: &desc, Headers: &gen.WebhookHeaders{"X-Auth": "v"}})
		if err != nil || created.JSON201 == nil || created.JSON201.Secret == "" || created.JSON201.HeaderNames[0] != "X-Auth" {
			t.Fatalf("create: %v %s", err, created.Body)
		}
		id := created.JSON201.Id
		got, err := c.GetWebhookWithResponse(ctx, id)
		if err != nil || got.JSON200 == nil || got.JSON200.Description != desc {
			t.Fatalf("get: %v %s", err, got.Body)
		}
		limit := nullable.NewNullableWithValue(7)
		upd, err := c.UpdateWebhookWithResponse(ctx, id, nil, gen.WebhookUpdate{RateLimit: limit})
		if err != nil || upd.JSON200 == nil || upd.JSON200.RateLimit == nil || *upd.JSON200.RateLimit != 7 {
			t.Fatalf("update: %v %s", err, upd.Body)
		}
		upd, err = c.UpdateWebhookWithResponse(ctx, id, nil, gen.WebhookUpdate{RateLimit: nullable.NewNullNullable[int]()})
		if err != nil || upd.JSON200 == nil || upd.JSON200.RateLimit != nil {
			t.Fatalf("clear the rate limit: %v %s", err, upd.Body)
		}
		list, err := c.ListWebhooksWithResponse(ctx, &gen.ListWebhooksParams{})
		if err != nil || list.JSON200 == nil || len(list.JSON200.Data) != 1 || list.JSON200.NextCursor != nil {
			t.Fatalf("list: %v %s", err, list.Body)
		}
		paused, err := c.PauseWebhookWithResponse(ctx, id)
		if err != nil || paused.JSON200 == nil || paused.JSON200.Status != gen.WebhookStatusPaused {
			t.Fatalf("pause: %v %s", err, paused.Body)
		}
		ev := h.ping()
		dls, err := c.ListWebhookDeliveriesWithResponse(ctx, id, &gen.ListWebhookDeliveriesParams{})
		if err != nil || dls.JSON200 == nil || len(dls.JSON200.Data) != 1 || dls.JSON200.Data[0].EventId != ev.ID {
			t.Fatalf("deliveries: %v %s", err, dls.Body)
		}
		one, err := c.GetWebhookDeliveryWithResponse(ctx, dls.JSON200.Data[0].Id)
		if err != nil || one.JSON200 == nil || one.JSON200.Event == nil || one.JSON200.Event.Id != ev.ID {
			t.Fatalf("delivery: %v %s", err, one.Body)
		}
		evs, err := c.ListEventsWithResponse(ctx, &gen.ListEventsParams{After: nil})
		if err != nil || evs.JSON200 == nil || len(evs.JSON200.Data) != 1 {
			t.Fatalf("events: %v %s", err, evs.Body)
		}
		ping, err := evs.JSON200.Data[0].Data.AsWebhookPingEvent()
		if err != nil || ping.Message != "hi" {
			t.Errorf("event data %+v %v", ping, err)
		}
		types, err := c.ListEventTypesWithResponse(ctx)
		if err != nil || types.JSON200 == nil || len(types.JSON200.Data) == 0 {
			t.Fatalf("event types: %v %s", err, types.Body)
		}
		del, err := c.DeleteWebhookWithResponse(ctx, id)
		if err != nil || del.StatusCode() != http.StatusNoContent {
			t.Fatalf("delete: %v %d", err, del.StatusCode())
		}
		missing, err := c.GetWebhookWithResponse(ctx, id)
		if err != nil || missing.ApplicationproblemJSON404 == nil || missing.ApplicationproblemJSON404.Code != "not_found" {
			t.Fatalf("get deleted: %v %s", err, missing.Body)
		}
	})
}

// newClient returns the generated client, authenticated with key.
func newClient(t *testing.T, url, key string) *gen.ClientWithResponses {
	t.Helper()
	c, err := gen.NewClientWithResponses(url, gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A broker destination is registered through the same API: its type and where it publishes are shown, its
// credentials never; a URL cannot move it, and broker settings belong to their type.
func TestWebhookBrokerDestination(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		res := h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write, body: `{"type":"rabbitmq",
			"url":"amqp://guest:guest@127.0.0.1:5672/","events":["*"],"rabbitmq":{"exchange":"amq.topic","routing_key":"{workspace}.{type}"}}`})
		if res.StatusCode != http.StatusCreated || strings.Contains(string(res.body), "guest:guest") {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		var w struct {
			ID       string
			URL      string `json:"url"`
			Type     string `json:"type"`
			RabbitMQ struct {
				Exchange   string `json:"exchange"`
				RoutingKey string `json:"routing_key"`
			} `json:"rabbitmq"`
		}
		res.json(t, &w)
		if w.Type != "rabbitmq" || w.URL != "amqp://guest@127.0.0.1:5672/" || w.RabbitMQ.Exchange != "amq.topic" ||
			w.RabbitMQ.RoutingKey != "{workspace}.{type}" {
			t.Fatalf("created %+v", w)
		}
		got := h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID, "", http.StatusOK, nil)
		if strings.Contains(string(got.body), "guest:guest") || !strings.Contains(string(got.body), `"type":"rabbitmq"`) {
			t.Fatalf("GET %s", got.body)
		}
		p := h.do(request{method: http.MethodPatch, path: "/api/v1/webhooks/" + w.ID, key: h.write, body: `{"url":"amqp://127.0.0.1:5673/"}`}).
			problem(t, http.StatusBadRequest, "validation_failed")
		if len(p.Errors) != 1 || p.Errors[0]["pointer"] != "/url" {
			t.Fatalf("PATCH url: %+v", p)
		}
		h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write,
			body: `{"type":"nats","url":"amqp://127.0.0.1:5672/","events":["*"],"rabbitmq":{}}`}).
			problem(t, http.StatusBadRequest, "validation_failed")
		var https struct{ Type string }
		h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write,
			body: `{"url":"http://127.0.0.1:9/hook","events":["*"]}`}).json(t, &https)
		if https.Type != "https" {
			t.Fatalf("default type %q", https.Type)
		}
	})
}
