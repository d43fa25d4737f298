package handlers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// sourceBody is the Source and SourceWithIngestURL schemas, decoded.
type sourceBody struct {
	ID           string `json:"id"`
	Object       string `json:"object"`
	Name         string `json:"name"`
	EventType    string `json:"event_type"`
	IngestURL    string `json:"ingest_url"`
	TokenLast4   string `json:"token_last4"`
	Verification struct {
		Scheme string  `json:"scheme"`
		Header *string `json:"header"`
	} `json:"verification"`
	Dedup *struct {
		Header *string `json:"header"`
	} `json:"dedup"`
	PreviousTokenExpiresAt *string `json:"previous_token_expires_at"`
}

type ingestBody struct {
	EventID   *string `json:"event_id"`
	Duplicate bool    `json:"duplicate"`
	Challenge *string `json:"challenge"`
}

type sourceRequestBody struct {
	Outcome     string            `json:"outcome"`
	Status      int               `json:"status"`
	Reason      *string           `json:"reason"`
	EventID     *string           `json:"event_id"`
	Headers     map[string]string `json:"headers"`
	BodyExcerpt string            `json:"body_excerpt"`
}

// automationEnv is a server with a workspace and an automation:write key.
type automationEnv struct {
	*env
	ws  store.Workspace
	key string
}

func newAutomation(t *testing.T, db *store.DB) *automationEnv {
	t.Helper()
	e := newEnv(t, db, handlers.Config{})
	a := &automationEnv{env: e, ws: e.workspace("Acme")}
	a.key, _ = e.key(a.ws.ID, "automation:write", "webhooks:read")
	return a
}

func (a *automationEnv) createSource(body string) sourceBody {
	a.t.Helper()
	res := a.do(request{method: http.MethodPost, path: "/api/v1/sources", key: a.key, body: body})
	if res.StatusCode != http.StatusCreated {
		a.t.Fatalf("create source: %d %s", res.StatusCode, res.body)
	}
	var s sourceBody
	res.json(a.t, &s)
	return s
}

// send posts body to an ingest URL with the content type and headers.
func (a *automationEnv) send(ingestURL, contentType, body string, header map[string]string) *response {
	a.t.Helper()
	u, err := url.Parse(ingestURL)
	if err != nil {
		a.t.Fatal(err)
	}
	h := map[string]string{"Content-Type": contentType}
	for k, v := range header {
		h[k] = v
	}
	if contentType == "" {
		delete(h, "Content-Type")
	}
	return a.do(request{method: http.MethodPost, path: u.Path, body: body, header: h})
}

func (a *automationEnv) requests(sourceID string) []sourceRequestBody {
	a.t.Helper()
	var page struct {
		Data []sourceRequestBody `json:"data"`
	}
	a.do(request{path: "/api/v1/sources/" + sourceID + "/requests", key: a.key}).json(a.t, &page)
	return page.Data
}

func githubSignature(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// A GitHub source: the ingest URL is shown once; a signed request becomes an event in the log, a forged one is
// refused and its refusal is logged with the reason, the signature header redacted.
func TestSourceIngestVerified(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"GitHub","event_type":"custom.github.push",
			"verification":{"scheme":"github","secret":"gh-secret"}}`)
		if src.Object != "source" || !strings.Contains(src.IngestURL, "/in/in_") || src.Verification.Scheme != "github" ||
			*src.Verification.Header != "X-Hub-Signature-256" || !strings.HasSuffix(src.IngestURL, src.TokenLast4) {
			t.Fatalf("created %+v", src)
		}
		got := a.do(request{path: "/api/v1/sources/" + src.ID, key: a.key})
		token := src.IngestURL[strings.LastIndex(src.IngestURL, "/")+1:]
		if strings.Contains(string(got.body), token) || strings.Contains(string(got.body), "gh-secret") {
			t.Fatalf("GET shows the token or secret: %s", got.body)
		}

		body := `{"ref":"refs/heads/main","commits":[{"id":"c1"}]}`
		res := a.send(src.IngestURL, "application/json", body, map[string]string{"X-Hub-Signature-256": githubSignature("gh-secret", body)})
		var in ingestBody
		res.json(t, &in)
		if res.StatusCode != http.StatusOK || in.EventID == nil || in.Duplicate {
			t.Fatalf("signed request: %d %s", res.StatusCode, res.body)
		}
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		a.do(request{path: "/api/v1/events/" + *in.EventID, key: a.key}).json(t, &ev)
		if ev.Type != "custom.github.push" || ev.Data["ref"] != "refs/heads/main" {
			t.Errorf("event %+v", ev)
		}

		// Every answer once the source is known carries its own quota: the accepted request spent one; the forged
		// one is answered with it too.
		q := automation.DefaultRatePerMinute
		if res.Header.Get("RateLimit-Policy") != fmt.Sprintf(`"source";q=%d;w=60`, q) ||
			!strings.HasPrefix(res.Header.Get("RateLimit"), fmt.Sprintf(`"source";r=%d;t=`, q-1)) {
			t.Errorf("accepted: RateLimit-Policy %q, RateLimit %q", res.Header.Get("RateLimit-Policy"), res.Header.Get("RateLimit"))
		}
		forged := a.send(src.IngestURL, "application/json", body, map[string]string{"X-Hub-Signature-256": githubSignature("guess", body)})
		forged.problem(t, http.StatusUnauthorized, "signature_invalid")
		// (Not an exact count: at 3000 a minute the quota refills one request every 20 ms, which a slow run exceeds.)
		if !strings.HasPrefix(forged.Header.Get("RateLimit"), `"source";r=`) {
			t.Errorf("forged: RateLimit %q", forged.Header.Get("RateLimit"))
		}
		a.send(src.IngestURL, "application/json", body, nil).problem(t, http.StatusUnauthorized, "signature_invalid")

		log := a.requests(src.ID)
		if len(log) != 3 || log[0].Outcome != "refused" || *log[0].Reason != "missing_signature" ||
			log[1].Outcome != "refused" || *log[1].Reason != "invalid_signature" || log[1].Status != 401 ||
			log[1].Headers["X-Hub-Signature-256"] != "[redacted]" || log[1].BodyExcerpt != body ||
			log[2].Outcome != "accepted" || *log[2].EventID != *in.EventID {
			t.Errorf("request log %+v", log)
		}

		// The catalogue has the type the source created, with the built-in shape.
		var typ eventTypeBody
		a.do(request{path: "/api/v1/event-types/custom.github.push", key: a.key}).json(t, &typ)
		if typ.Family != "custom" || typ.Schema["type"] != "object" {
			t.Errorf("type %+v", typ)
		}

		// Unknown tokens answer 404 and are not logged anywhere.
		a.send(strings.Replace(src.IngestURL, token, "in_"+strings.Repeat("x", 40), 1), "application/json", body, nil).
			problem(t, http.StatusNotFound, "not_found")
	})
}

// JSON objects are the data; other JSON values, text and form fields are wrapped; other media types are refused.
func TestSourceBodies(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"Form","event_type":"custom.form.submitted","verification":{"scheme":"none"}}`)
		data := func(contentType, body string) map[string]any {
			t.Helper()
			res := a.send(src.IngestURL, contentType, body, nil)
			var in ingestBody
			res.json(t, &in)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", contentType, res.StatusCode, res.body)
			}
			var ev struct {
				Data map[string]any `json:"data"`
			}
			a.do(request{path: "/api/v1/events/" + *in.EventID, key: a.key}).json(t, &ev)
			return ev.Data
		}
		if d := data("application/x-www-form-urlencoded", "email=a%40b.c&tag=x&tag=y"); d["email"] != "a@b.c" ||
			fmt.Sprint(d["tag"]) != "[x y]" {
			t.Errorf("form data %v", d)
		}
		if d := data("text/plain; charset=utf-8", "hello"); d["body"] != "hello" {
			t.Errorf("text data %v", d)
		}
		if d := data("application/json", `[1,2]`); fmt.Sprint(d["body"]) != "[1 2]" {
			t.Errorf("array data %v", d)
		}
		if d := data("", ""); len(d) != 0 {
			t.Errorf("empty data %v", d)
		}
		a.send(src.IngestURL, "application/xml", "<a/>", nil).problem(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
		a.send(src.IngestURL, "application/json", "{", nil).problem(t, http.StatusBadRequest, "malformed_json")
		if log := a.requests(src.ID); *log[0].Reason != "malformed_body" || *log[1].Reason != "unsupported_media_type" {
			t.Errorf("log %+v", log[:2])
		}
	})
}

// A duplicate by the source's key answers 200 with the first event; size and rate limits refuse and are logged.
func TestSourceDedupAndLimits(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"Pay","event_type":"custom.payment.received","verification":{"scheme":"none"},
			"dedup":{"pointer":"/id"},"limits":{"max_body_bytes":64,"rate_limit_per_minute":4}}`)
		var first, second, other ingestBody
		a.send(src.IngestURL, "application/json", `{"id":"pay_1"}`, nil).json(t, &first)
		a.send(src.IngestURL, "application/json", `{"id":"pay_1","retry":true}`, nil).json(t, &second)
		a.send(src.IngestURL, "application/json", `{"id":"pay_2"}`, nil).json(t, &other)
		if first.Duplicate || !second.Duplicate || *second.EventID != *first.EventID || other.Duplicate ||
			*other.EventID == *first.EventID {
			t.Errorf("dedup: %+v %+v %+v", first, second, other)
		}
		a.send(src.IngestURL, "application/json", `{"id":"`+strings.Repeat("x", 80)+`"}`, nil).
			problem(t, http.StatusRequestEntityTooLarge, "request_too_large")
		res := a.send(src.IngestURL, "application/json", `{"id":"pay_3"}`, nil)
		res.problem(t, http.StatusTooManyRequests, "rate_limited")
		if res.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		log := a.requests(src.ID)
		if len(log) != 5 || *log[0].Reason != "rate_limited" || *log[1].Reason != "too_large" ||
			log[3].Outcome != "duplicate" || *log[3].EventID != *first.EventID {
			t.Errorf("log %+v", log)
		}
	})
}

// A rotated token keeps working for its grace period; without grace only the new URL works.
func TestSourceTokenRotation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"Hook","event_type":"custom.hook.called","verification":{"scheme":"none"}}`)
		var rotated sourceBody
		a.do(request{method: http.MethodPost, path: "/api/v1/sources/" + src.ID + "/rotate-token", key: a.key,
			body: `{"grace_period_seconds":3600}`}).json(t, &rotated)
		if rotated.IngestURL == src.IngestURL || rotated.PreviousTokenExpiresAt == nil {
			t.Fatalf("rotated %+v", rotated)
		}
		for _, u := range []string{src.IngestURL, rotated.IngestURL} {
			if res := a.send(u, "application/json", `{}`, nil); res.StatusCode != http.StatusOK {
				t.Errorf("%s during grace: %d", u, res.StatusCode)
			}
		}
		var again sourceBody
		a.do(request{method: http.MethodPost, path: "/api/v1/sources/" + src.ID + "/rotate-token", key: a.key,
			body: `{"grace_period_seconds":0}`}).json(t, &again)
		a.send(rotated.IngestURL, "application/json", `{}`, nil).problem(t, http.StatusNotFound, "not_found")
		a.send(src.IngestURL, "application/json", `{}`, nil).problem(t, http.StatusNotFound, "not_found")
		if res := a.send(again.IngestURL, "application/json", `{}`, nil); res.StatusCode != http.StatusOK {
			t.Errorf("new URL: %d", res.StatusCode)
		}
	})
}

// Another workspace's source is not found; scopes are enforced; delete ends the URL.
func TestSourceIsolationAndScopes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"Mine","event_type":"custom.a.b","verification":{"scheme":"api_key","secret":"k-123"}}`)
		other := a.workspace("Other")
		otherKey, _ := a.env.key(other.ID, "automation:write")
		for _, r := range []request{
			{path: "/api/v1/sources/" + src.ID},
			{path: "/api/v1/sources/" + src.ID + "/requests"},
			{method: http.MethodPatch, path: "/api/v1/sources/" + src.ID, body: `{"name":"x"}`},
			{method: http.MethodDelete, path: "/api/v1/sources/" + src.ID},
			{method: http.MethodPost, path: "/api/v1/sources/" + src.ID + "/rotate-token"},
		} {
			r.key = otherKey
			a.do(r).problem(t, http.StatusNotFound, "not_found")
		}
		readOnly, _ := a.env.key(a.ws.ID, "automation:read")
		a.do(request{method: http.MethodPost, path: "/api/v1/sources", key: readOnly,
			body: `{"name":"x","event_type":"custom.a.b","verification":{"scheme":"none"}}`}).
			problem(t, http.StatusForbidden, "insufficient_scope")
		p := a.do(request{method: http.MethodPost, path: "/api/v1/sources", key: a.key,
			body: `{"name":"x","event_type":"custom.a.b","verification":{"scheme":"hmac","secret":"s","username":"u"}}`}).
			problem(t, http.StatusBadRequest, "validation_failed")
		if len(p.Errors) != 2 {
			t.Errorf("errors %+v", p.Errors)
		}
		a.send(src.IngestURL, "application/json", `{}`, map[string]string{"X-API-Key": "k-12"}).
			problem(t, http.StatusUnauthorized, "signature_invalid")
		if res := a.send(src.IngestURL, "application/json", `{}`, map[string]string{"X-API-Key": "k-123"}); res.StatusCode != 200 {
			t.Errorf("api key: %d %s", res.StatusCode, res.body)
		}
		if res := a.do(request{method: http.MethodDelete, path: "/api/v1/sources/" + src.ID, key: a.key}); res.StatusCode != 204 {
			t.Fatalf("delete: %d", res.StatusCode)
		}
		a.send(src.IngestURL, "application/json", `{}`, map[string]string{"X-API-Key": "k-123"}).problem(t, http.StatusNotFound, "not_found")
	})
}

// Custom event types: the custom. namespace, schema validation with pointers, archived types, the catalogue shape,
// and the source's type enforced at ingest too.
func TestCustomEventTypes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: `{"name":"link.created","description":"x","schema":{}}`}).problem(t, http.StatusBadRequest, "validation_failed")
		a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: `{"name":"custom.bad","description":"x","schema":{"type":"object","required":["a"]},"example":{}}`}).
			problem(t, http.StatusBadRequest, "validation_failed")
		res := a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: `{"name":"custom.order.paid","description":"An order was paid.","schema":{"type":"object",
			"required":["order_id","amount"],"properties":{"order_id":{"type":"string"},"amount":{"type":"integer","minimum":1}}},
			"example":{"order_id":"o1","amount":5}}`})
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: `{"name":"custom.order.paid","description":"again","schema":{}}`}).problem(t, http.StatusConflict, "event_type_exists")

		p := a.do(request{method: http.MethodPost, path: "/api/v1/events", key: a.key,
			body: `{"type":"custom.order.paid","data":{"amount":0}}`}).problem(t, http.StatusUnprocessableEntity, "event_data_invalid")
		pointers := map[string]bool{}
		for _, e := range p.Errors {
			pointers[e["pointer"]] = true
		}
		if !pointers["/data"] || !pointers["/data/amount"] {
			t.Errorf("errors %+v", p.Errors)
		}
		res = a.do(request{method: http.MethodPost, path: "/api/v1/events", key: a.key,
			body: `{"type":"custom.order.paid","data":{"order_id":"o2","amount":1200}}`, header: map[string]string{"Idempotency-Key": "pub-1"}})
		var ev struct {
			ID   string         `json:"id"`
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		res.json(t, &ev)
		if res.StatusCode != http.StatusCreated || ev.Type != "custom.order.paid" || ev.Data["amount"] != float64(1200) {
			t.Fatalf("publish: %d %s", res.StatusCode, res.body)
		}
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		a.do(request{path: "/api/v1/events?type=custom.order.paid&limit=5", key: a.key}).json(t, &page)
		if len(page.Data) != 1 || page.Data[0].ID != ev.ID {
			t.Errorf("recent items %+v", page)
		}
		a.do(request{method: http.MethodPost, path: "/api/v1/events", key: a.key,
			body: `{"type":"custom.nope","data":{}}`}).problem(t, http.StatusNotFound, "not_found")

		var typ struct {
			eventTypeBody
			Custom   bool `json:"custom"`
			Archived bool `json:"archived"`
		}
		a.do(request{method: http.MethodPatch, path: "/api/v1/event-types/custom.order.paid", key: a.key,
			body: `{"archived":true}`}).json(t, &typ)
		if !typ.Archived || !typ.Custom || typ.Family != "custom" {
			t.Errorf("archived %+v", typ)
		}
		a.do(request{method: http.MethodPost, path: "/api/v1/events", key: a.key,
			body: `{"type":"custom.order.paid","data":{"order_id":"o3","amount":1}}`}).problem(t, http.StatusConflict, "event_type_archived")
		a.do(request{method: http.MethodPatch, path: "/api/v1/event-types/link.created", key: a.key,
			body: `{"archived":true}`}).problem(t, http.StatusNotFound, "not_found")

		// A source of the type refuses data that does not match, and the archived type, with reasons in its log.
		src := a.createSource(`{"name":"Shop","event_type":"custom.order.paid","verification":{"scheme":"none"}}`)
		a.send(src.IngestURL, "application/json", `{"order_id":"o4","amount":2}`, nil).problem(t, http.StatusConflict, "event_type_archived")
		a.do(request{method: http.MethodPatch, path: "/api/v1/event-types/custom.order.paid", key: a.key, body: `{"archived":false}`})
		a.send(src.IngestURL, "application/json", `{"order_id":4}`, nil).problem(t, http.StatusUnprocessableEntity, "event_data_invalid")
		if res := a.send(src.IngestURL, "application/json", `{"order_id":"o5","amount":2}`, nil); res.StatusCode != 200 {
			t.Errorf("matching data: %d %s", res.StatusCode, res.body)
		}
		log := a.requests(src.ID)
		if *log[1].Reason != "event_data_invalid" || *log[2].Reason != "event_type_archived" {
			t.Errorf("log %+v", log)
		}

		// Another workspace neither sees nor publishes the type.
		other := a.workspace("Other")
		otherKey, _ := a.env.key(other.ID, "automation:write", "webhooks:read")
		a.do(request{path: "/api/v1/event-types/custom.order.paid", key: otherKey}).problem(t, http.StatusNotFound, "not_found")
	})
}

func TestMe(t *testing.T) {
	a := newAutomation(t, storetest.SQLite(t))
	linksOnly, _ := a.env.key(a.ws.ID, "links:read")
	var me struct {
		Workspace struct{ ID, Name string } `json:"workspace"`
		Key       struct {
			ID     string   `json:"id"`
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		} `json:"key"`
	}
	a.do(request{path: "/api/v1/me", key: linksOnly}).json(t, &me)
	if me.Workspace.ID != a.ws.ID || me.Workspace.Name != "Acme" || me.Key.Name != "test key" ||
		len(me.Key.Scopes) != 1 || me.Key.Scopes[0] != "links:read" {
		t.Errorf("me %+v", me)
	}
	a.do(request{path: "/api/v1/me"}).problem(t, http.StatusUnauthorized, "missing_api_key")
}
