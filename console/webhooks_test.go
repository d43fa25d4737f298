package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// answerJSON answers every request to a webhook receiver with 200, a small JSON body and a header of its own.
func answerJSON(_ int, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Receiver", "test")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// createWebhook submits the add-endpoint form of a freshly loaded webhooks page.
func (b *browser) createWebhook(t *testing.T, form url.Values) *resp {
	t.Helper()
	p := b.get(t, "/user/webhooks")
	p.wantStatus(t, http.StatusOK)
	form.Set("csrf_token", p.field(t, "csrf_token"))
	form.Set("nonce", p.field(t, "nonce"))
	return b.post(t, "/user/webhooks", form)
}

func endpoints(t *testing.T, db *store.DB, workspaceID string) []store.WebhookEndpoint {
	t.Helper()
	es, _, err := db.Webhooks.List(ctx, workspaceID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// The add form offers the catalogue with each type's description and example, registers the endpoint with the
// API's rules, and shows its secret once with a verification snippet; the secret verifies the endpoint's deliveries.
func TestCreateWebhookForm(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "hooks")
		rx := receivertest.New(t, answerJSON)
		page := b.get(t, "/user/webhooks")
		page.wantStatus(t, http.StatusOK)
		for _, want := range []string{"link.created", "Every link event", "link.clicked", "opt-in", `"link"`} {
			if !strings.Contains(page.text(), want) {
				t.Fatalf("the catalogue does not show %q", want)
			}
		}
		r := b.createWebhook(t, url.Values{"url": {rx.URL + "/hook"}, "description": {"Orders <svc>"},
			"events": {"link.*", "webhook.ping"}, "headers": {"Authorization: Bearer s3cret\nX-Team: growth"}, "rate_limit": {"5"}})
		r.wantStatus(t, http.StatusCreated)
		secret, n := r.elementText("webhook-secret")
		if n != 1 || !regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`).MatchString(secret) {
			t.Fatalf("secret %q (%d elements)", secret, n)
		}
		if snippet, _ := r.elementText("webhook-verify"); !strings.Contains(snippet, `Webhook("`+secret+`")`) {
			t.Fatalf("verification snippet %q", snippet)
		}
		es := endpoints(t, db, ws.ID)
		if len(es) != 1 || es[0].URL != rx.URL+"/hook" || es[0].Description != "Orders <svc>" ||
			strings.Join(es[0].Events, ",") != "link.*,webhook.ping" || es[0].RateLimit == nil || *es[0].RateLimit != 5 {
			t.Fatalf("endpoints %+v", es)
		}
		if strings.Contains(r.body, "Orders <svc>") || strings.Contains(r.body, "s3cret") {
			t.Fatal("the page shows an unescaped description or a header value")
		}
		again := b.get(t, "/user/webhooks")
		again.wantNoText(t, secret)

		// The secret shown verifies a test ping, which carries the static headers.
		test := b.postCSRF(t, "/user/webhooks/"+es[0].ID+"/test", url.Values{})
		test.wantStatus(t, http.StatusOK)
		if got := test.testResult(); !strings.Contains(got, "Delivered: HTTP 200") || !strings.Contains(got, `{"ok":true}`) {
			t.Fatalf("test result %q", got)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		ping := rx.Requests()[0]
		if err := wh.Verify(ping.Body, ping.Header); err != nil {
			t.Fatalf("the shown secret does not verify the ping: %v", err)
		}
		if ping.Header.Get("Authorization") != "Bearer s3cret" || ping.Header.Get("X-Team") != "growth" {
			t.Fatalf("static headers sent: %v", ping.Header)
		}
	})
}

// A registration the API would refuse is refused with its rules, beside each field; a form sent twice registers one
// endpoint.
func TestCreateWebhookFormRefused(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "refusedhooks")
		tests := []struct {
			name string
			form url.Values
			text string
		}{
			{"scheme", url.Values{"url": {"ftp://example.com/hook"}, "events": {"*"}}, "scheme"},
			{"no events", url.Values{"url": {"http://127.0.0.1:9/hook"}}, "Events: "},
			{"unknown event", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"nope.*"}}, "Events: "},
			{"header line", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"*"}, "headers": {"no colon"}}, "Name: value"},
			{"reserved header", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"*"}, "headers": {"webhook-id: x"}}, "sets this header itself"},
			{"rate", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"*"}, "rate_limit": {"0"}}, "at least 1"},
			{"private address", url.Values{"url": {"https://10.1.2.3/"}, "events": {"*"}}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := b.createWebhook(t, tt.form)
				r.wantStatus(t, http.StatusUnprocessableEntity)
				if !strings.Contains(r.alert(), "not created") {
					t.Fatalf("alert %q", r.alert())
				}
				errs := regexp.MustCompile(`<p class="field-error">(.*?)</p>`).FindAllStringSubmatch(r.body, -1)
				if len(errs) == 0 {
					t.Fatal("no field message")
				}
				var all []string
				for _, m := range errs {
					all = append(all, m[1])
				}
				if joined := strings.Join(all, " | "); tt.text != "" && !strings.Contains(htmlUnescape(joined), tt.text) {
					t.Fatalf("messages %q do not say %q", joined, tt.text)
				}
			})
		}
		if n := len(endpoints(t, db, ws.ID)); n != 0 {
			t.Fatalf("%d endpoints registered", n)
		}
		p := b.get(t, "/user/webhooks")
		form := url.Values{"csrf_token": {p.field(t, "csrf_token")}, "nonce": {p.field(t, "nonce")},
			"url": {"http://127.0.0.1:9/hook"}, "events": {"*"}}
		b.post(t, "/user/webhooks", form).wantStatus(t, http.StatusCreated)
		b.post(t, "/user/webhooks", form).wantStatus(t, http.StatusConflict)
		if n := len(endpoints(t, db, ws.ID)); n != 1 {
			t.Fatalf("%d endpoints registered, want 1", n)
		}
	})
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// emitEvent records an event of the workspace as an area does, with its deliveries.
func emitEvent(t *testing.T, db *store.DB, workspaceID, typ string) store.Event {
	t.Helper()
	var ev store.Event
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		ev, err = events.NewOutbox(db, events.Builtin()).EmitJSON(ctx, tx, workspaceID, typ, []byte(`{"link_id":"lnk_1"}`))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ev
}

func deliveryOf(t *testing.T, db *store.DB, eventID, endpointID string) store.Delivery {
	t.Helper()
	var d store.Delivery
	if err := db.Bun().NewSelect().Model(&d).Where("d.event_id = ? AND d.endpoint_id = ?", eventID, endpointID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

// attempt records an attempt of a delivery as the dispatcher does.
func attempt(t *testing.T, db *store.DB, d store.Delivery, status int, excerpt string) {
	t.Helper()
	res := webhook.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(), Duration: 42 * time.Millisecond,
		StatusCode: &status, Excerpt: &excerpt, Succeeded: status < 300,
		ResponseHeaders: map[string]string{"Content-Type": "application/json", "X-Trace": "abc"}, Signature: "v1,c2lnbmVk"}
	if status >= 300 {
		class := "http_4xx"
		next := time.Now().Add(time.Hour)
		res.ErrorClass, res.NextAttemptAt = &class, &next
	}
	if _, err := webhook.NewRecorder(db, nil, 0).Record(ctx, []webhook.AttemptResult{res}); err != nil {
		t.Fatal(err)
	}
}

// An endpoint's page shows its health and its delivery log with filters; a delivery's page shows every attempt with
// the receiver's headers and body and the signed request, and resends it; pause, resume, enable, rotate and delete
// do what the API does.
func TestWebhookPages(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "log")
		rx := receivertest.New(t, answerJSON)
		b.createWebhook(t, url.Values{"url": {rx.URL + "/hook"}, "events": {"*"}, "headers": {"Authorization: Bearer s3cret"}}).
			wantStatus(t, http.StatusCreated)
		ep := endpoints(t, db, ws.ID)[0]
		created := emitEvent(t, db, ws.ID, "link.created")
		deleted := emitEvent(t, db, ws.ID, "link.deleted")
		failed := deliveryOf(t, db, created.ID, ep.ID)
		attempt(t, db, failed, http.StatusBadRequest, `{"error":"missing field order_id"}`)
		attempt(t, db, deliveryOf(t, db, deleted.ID, ep.ID), http.StatusOK, "ok")

		p := b.get(t, "/user/webhooks/"+ep.ID+"?tz=Europe/Paris")
		p.wantStatus(t, http.StatusOK)
		// Only a broker endpoint's type is shown as a badge; HTTPS is the default and goes without one.
		for _, r := range []*resp{p, b.get(t, "/user/webhooks")} {
			if strings.Contains(r.body, `<span class="badge">https</span>`) {
				t.Error("an HTTPS endpoint is badged with its type")
			}
		}
		if rate, _ := p.elementText("success-rate"); rate != "50 %" {
			t.Fatalf("success rate %q", rate)
		}
		if n, _ := p.elementText("attempt-count"); n != "2" {
			t.Fatalf("attempts %q", n)
		}
		rows := func(r *resp) []string {
			var out []string
			for _, m := range regexp.MustCompile(`<tr data-delivery-id="([^"]+)"[^>]*>`).FindAllStringSubmatch(r.body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		if got := rows(p); len(got) != 2 {
			t.Fatalf("delivery log %v", got)
		}
		if got := rows(b.get(t, "/user/webhooks/"+ep.ID+"?status=pending")); len(got) != 1 || got[0] != failed.ID {
			t.Fatalf("pending deliveries %v", got)
		}
		if got := rows(b.get(t, "/user/webhooks/"+ep.ID+"?event_type=link.deleted")); len(got) != 1 || got[0] == failed.ID {
			t.Fatalf("link.deleted deliveries %v", got)
		}

		dp := b.get(t, "/user/webhooks/"+ep.ID+"/deliveries/"+failed.ID)
		dp.wantStatus(t, http.StatusOK)
		for _, want := range []string{"HTTP 400", "http_4xx", "42 ms", "X-Trace", `{"error":"missing field order_id"}`,
			"webhook-id: " + created.ID, "webhook-signature: v1,c2lnbmVk", "Authorization: (set on the endpoint; not shown)",
			`"type":"link.created"`} {
			dp.wantText(t, want)
		}
		dp.wantNoText(t, "s3cret")
		csrf := b.csrf(t)
		b.post(t, "/user/webhooks/"+ep.ID+"/deliveries/"+failed.ID+"/resend", url.Values{"csrf_token": {csrf}}).
			wantRedirect(t, "/user/webhooks/"+ep.ID+"/deliveries/"+failed.ID+"?resent=1")
		if d := deliveryOf(t, db, created.ID, ep.ID); d.Status != store.DeliveryPending || d.NextAttemptAt == nil || d.NextAttemptAt.After(time.Now()) {
			t.Fatalf("after resend: %+v", d)
		}

		action := func(name, want string) {
			t.Helper()
			r := b.post(t, "/user/webhooks/"+ep.ID+"/"+name, url.Values{"csrf_token": {csrf}, "tz": {"Europe/Paris"}})
			r.wantRedirect(t, "/user/webhooks/"+ep.ID+"?done="+name+"&tz=Europe%2FParis")
			got, err := db.Webhooks.Get(ctx, ws.ID, ep.ID)
			if err != nil || got.Status != want {
				t.Fatalf("after %s: %s, %v", name, got.Status, err)
			}
		}
		action("pause", store.EndpointPaused)
		b.get(t, "/user/webhooks/"+ep.ID+"?done=pause").wantText(t, "The endpoint is paused")
		action("resume", store.EndpointActive)
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("status = ?", store.EndpointDisabled).
			Set("disabled_reason = ?", "gone").Where("id = ?", ep.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		disabled := b.get(t, "/user/webhooks/"+ep.ID)
		disabled.wantText(t, "the receiver answered 410 Gone")
		paused := b.post(t, "/user/webhooks/"+ep.ID+"/pause", url.Values{"csrf_token": {csrf}})
		paused.wantStatus(t, http.StatusConflict)
		if !strings.Contains(paused.alert(), "410 Gone") {
			t.Fatalf("pausing a disabled endpoint: %q", paused.alert())
		}
		action("enable", store.EndpointActive)

		rotated := b.post(t, "/user/webhooks/"+ep.ID+"/rotate-secret", url.Values{"csrf_token": {csrf}})
		rotated.wantStatus(t, http.StatusOK)
		secret, _ := rotated.elementText("webhook-secret")
		rotated.wantText(t, "The previous secret keeps signing beside it")
		test := b.post(t, "/user/webhooks/"+ep.ID+"/test", url.Values{"csrf_token": {csrf}, "event_type": {"link.created"}})
		if got := test.testResult(); !strings.Contains(got, "Delivered: HTTP 200") {
			t.Fatalf("test result %q", got)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		got := rx.Requests()
		last := got[len(got)-1]
		if err := wh.Verify(last.Body, last.Header); err != nil || !strings.Contains(string(last.Body), `"type":"link.created"`) {
			t.Fatalf("the rotated secret does not verify the test (%v): %s", err, last.Body)
		}

		rec := b.post(t, "/user/webhooks/"+ep.ID+"/recover", url.Values{"csrf_token": {csrf}, "tz": {"UTC"},
			"since": {time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")}})
		rec.wantStatus(t, http.StatusOK)
		if !strings.Contains(rec.notice(), "deliveries from") {
			t.Fatalf("recover notice %q", rec.notice())
		}
		tooOld := b.post(t, "/user/webhooks/"+ep.ID+"/recover", url.Values{"csrf_token": {csrf},
			"since": {time.Now().UTC().Add(-30 * 24 * time.Hour).Format("2006-01-02T15:04")}})
		tooOld.wantStatus(t, http.StatusBadRequest)
		if !strings.Contains(tooOld.alert(), "14 days") {
			t.Fatalf("recover too far back: %q", tooOld.alert())
		}

		b.get(t, "/user/webhooks/"+ep.ID+"/delete").wantText(t, "Delete this endpoint?")
		b.post(t, "/user/webhooks/"+ep.ID+"/delete", url.Values{"csrf_token": {csrf}}).wantRedirect(t, "/user/webhooks?deleted=1")
		if n := len(endpoints(t, db, ws.ID)); n != 0 {
			t.Fatalf("%d endpoints after delete", n)
		}
	})
}

// An endpoint is edited in the console as the API's PATCH does, through the same service: its URL, events,
// filters, static headers (typed ones replace them, none typed keeps them, a box removes them) and rate limit (empty
// for none). Its chart of attempts says so when it has none, in its own words.
func TestEditWebhookForm(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "edit")
		rx := receivertest.New(t, answerJSON)
		b.createWebhook(t, url.Values{"url": {rx.URL + "/hook"}, "events": {"link.*"}, "headers": {"Authorization: Bearer s3cret"},
			"rate_limit": {"5"}}).wantStatus(t, http.StatusCreated)
		ep := endpoints(t, db, ws.ID)[0]
		p := b.get(t, "/user/webhooks/"+ep.ID)
		p.wantText(t, "No delivery attempts in the last day")
		p.wantNoText(t, "No clicks")

		form := b.get(t, "/user/webhooks/"+ep.ID+"/edit")
		form.wantStatus(t, http.StatusOK)
		if got := form.field(t, "url"); got != rx.URL+"/hook" {
			t.Fatalf("the form's URL is %q", got)
		}
		form.wantText(t, "Authorization")
		form.wantNoText(t, "s3cret")
		save := func(v url.Values) *resp {
			t.Helper()
			v.Set("csrf_token", b.csrf(t))
			return b.post(t, "/user/webhooks/"+ep.ID+"/edit", v)
		}
		save(url.Values{"url": {rx.URL + "/moved"}, "events": {"link.created", "webhook.*"}, "description": {"CRM"},
			"filters": {`[{"pointer":"/link_id","op":"prefix","value":"lnk_"}]`}, "rate_limit": {""}}).
			wantRedirect(t, "/user/webhooks/"+ep.ID+"?done=edit")
		got, err := db.Webhooks.Get(ctx, ws.ID, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.URL != rx.URL+"/moved" || strings.Join(got.Events, ",") != "link.created,webhook.*" || got.Description != "CRM" ||
			got.RateLimit != nil || len(got.Filters) != 1 || got.Filters[0].Op != "prefix" || got.SealedHeaders == nil {
			t.Fatalf("after the edit: %+v", got)
		}
		refused := save(url.Values{"url": {rx.URL + "/moved"}, "events": {"nothing.*"}, "filters": {"not json"}})
		refused.wantStatus(t, http.StatusUnprocessableEntity)
		refused.wantText(t, "JSON array")
		save(url.Values{"url": {rx.URL + "/moved"}, "events": {"*"}, "clear_headers": {"1"}, "rate_limit": {"7"}}).
			wantRedirect(t, "/user/webhooks/"+ep.ID+"?done=edit")
		if got, _ = db.Webhooks.Get(ctx, ws.ID, ep.ID); got.SealedHeaders != nil || got.RateLimit == nil || *got.RateLimit != 7 ||
			len(got.Filters) != 0 {
			t.Fatalf("after removing the headers and the filters: %+v", got)
		}
		b.get(t, "/user/webhooks/"+ep.ID+"?done=edit").wantText(t, "The endpoint was saved")
	})
}

// Another workspace's endpoint and deliveries are not found on any page or action; a delivery is found only under
// its own endpoint.
func TestWebhookPagesTenantIsolation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		owner, ws := linksUser(t, e, "hookowner")
		owner.createWebhook(t, url.Values{"url": {"http://127.0.0.1:9/a"}, "events": {"*"}}).wantStatus(t, http.StatusCreated)
		owner.createWebhook(t, url.Values{"url": {"http://127.0.0.1:9/b"}, "events": {"link.deleted"}}).wantStatus(t, http.StatusCreated)
		es := endpoints(t, db, ws.ID)
		a, other := es[1], es[0]
		ev := emitEvent(t, db, ws.ID, "link.created")
		d := deliveryOf(t, db, ev.ID, a.ID)
		owner.get(t, "/user/webhooks/"+other.ID+"/deliveries/"+d.ID).wantStatus(t, http.StatusNotFound)

		stranger, _ := linksUser(t, e, "hookstranger")
		for _, path := range []string{"", "/delete", "/deliveries/" + d.ID} {
			stranger.get(t, "/user/webhooks/"+a.ID+path).wantStatus(t, http.StatusNotFound)
		}
		csrf := stranger.csrf(t)
		for _, path := range []string{"/pause", "/resume", "/enable", "/rotate-secret", "/test", "/recover", "/delete",
			"/deliveries/" + d.ID + "/resend"} {
			stranger.post(t, "/user/webhooks/"+a.ID+path, url.Values{"csrf_token": {csrf}}).wantStatus(t, http.StatusNotFound)
		}
		if got, err := db.Webhooks.Get(ctx, ws.ID, a.ID); err != nil || got.Status != store.EndpointActive || got.Secret != a.Secret {
			t.Fatalf("the endpoint changed: %+v, %v", got, err)
		}
	})
}

// testResult is the text of the page's test result.
func (r *resp) testResult() string {
	m := regexp.MustCompile(`(?s)<div class="test-result[^"]*" id="test-result"[^>]*>(.*?)</div>`).FindStringSubmatch(r.body)
	if m == nil {
		return ""
	}
	return htmlUnescape(stripTags(m[1]))
}
