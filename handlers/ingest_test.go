package handlers_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A verified body whose text the databases cannot keep — U+0000 in a JSON string, a member name, a form field or
// text, bytes that are not UTF-8 — is refused with 400 (never a 500, never stored altered), and each refusal is in
// the source's request log with its reason and the body's bytes as they came in.
func TestIngestRefusesTextItCannotStore(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"GitHub","event_type":"custom.github.push",
			"verification":{"scheme":"github","secret":"gh-secret"}}`)
		cases := []struct {
			name, contentType, body string
			code, pointer           string
		}{
			{"an escaped NUL in a string", "application/json", `{"s":"a\u0000b"}`, "invalid_text", "/s"},
			{"an escaped NUL deep in an array", "application/json", `{"a":[1,{"b":"\u0000"}]}`, "invalid_text", "/a/1/b"},
			{"an escaped NUL in a member name", "application/json", `{"a\u0000":1}`, "invalid_text", "/a\x00"},
			{"a JSON string that is all NUL", "application/json", `"\u0000"`, "invalid_text", "/"},
			{"a raw NUL in JSON", "application/json", "{\"s\":\"a\x00b\"}", "malformed_json", ""},
			{"JSON that is not UTF-8", "application/json", "{\"s\":\"a\xffb\"}", "invalid_text", ""},
			{"text with a NUL", "text/plain", "a\x00b", "invalid_text", ""},
			{"text that is not UTF-8", "text/plain; charset=utf-8", "caf\xe9", "invalid_text", ""},
			{"a form field with a NUL", "application/x-www-form-urlencoded", "a=%00&b=ok", "invalid_text", "/a"},
			{"a repeated form field not UTF-8", "application/x-www-form-urlencoded", "a=x&a=%FF", "invalid_text", "/a/1"},
			{"a form field name with a NUL", "application/x-www-form-urlencoded", "%00=x", "invalid_text", "/\x00"},
		}
		for _, c := range cases {
			res := a.send(src.IngestURL, c.contentType, c.body,
				map[string]string{"X-Hub-Signature-256": githubSignature("gh-secret", c.body)})
			p := res.problem(t, http.StatusBadRequest, c.code)
			if c.pointer != "" && (len(p.Errors) != 1 || p.Errors[0]["pointer"] != c.pointer) {
				t.Errorf("%s: errors %q, want one at %q", c.name, p.Errors, c.pointer)
			}
		}
		log := a.requests(src.ID)
		if len(log) != len(cases) {
			t.Fatalf("%d requests logged, want %d", len(log), len(cases))
		}
		for i, c := range cases {
			got := log[len(log)-1-i]
			want := "invalid_text"
			if c.code == "malformed_json" {
				want = "malformed_body"
			}
			if got.Outcome != "refused" || got.Status != 400 || got.Reason == nil || *got.Reason != want ||
				got.BodyExcerpt != strings.ToValidUTF8(c.body, "\uFFFD") {
				t.Errorf("%s: logged %+v (reason %v), want refused with %s and the body as sent", c.name, got,
					deref(got.Reason), want)
			}
		}

		// Nothing became an event; text that can be kept still can.
		var events struct {
			Data []any `json:"data"`
		}
		a.do(request{path: "/api/v1/events?type=custom.github.push", key: a.key}).json(t, &events)
		if len(events.Data) != 0 {
			t.Errorf("%d events from refused bodies", len(events.Data))
		}
		body := `{"s":"caf\u00e9 \ud83d\ude00","t":"tab\tquote\"backslash\\"}`
		if res := a.send(src.IngestURL, "application/json", body,
			map[string]string{"X-Hub-Signature-256": githubSignature("gh-secret", body)}); res.StatusCode != http.StatusOK {
			t.Fatalf("storable escapes: %d %s", res.StatusCode, res.body)
		}
	})
}

// A body over the server's limit is refused by the ingest itself, so that the refusal is in the source's request
// log like any other: declared (Content-Length) or found out while reading (chunked).
func TestIngestLogsBodiesOverTheServerLimit(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{BodyLimit: 1024})
		a := &automationEnv{env: e, ws: e.workspace("Acme")}
		a.key, _ = e.key(a.ws.ID, "automation:write")
		src := a.createSource(`{"name":"Form","event_type":"custom.form.sent","verification":{"scheme":"none"}}`)
		big := `{"s":"` + strings.Repeat("x", 2000) + `"}`
		a.send(src.IngestURL, "application/json", big, nil).problem(t, http.StatusRequestEntityTooLarge, "request_too_large")

		u, _ := url.Parse(src.IngestURL)
		req, _ := http.NewRequest(http.MethodPost, e.url+u.Path, io.MultiReader(strings.NewReader(big)))
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = -1 // sent chunked: the size is found out while reading
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked: %d %s", res.StatusCode, b)
		}
		if res := a.send(src.IngestURL, "application/json", `{"s":"small"}`, nil); res.StatusCode != http.StatusOK {
			t.Fatalf("small body: %d %s", res.StatusCode, res.body)
		}
		log := a.requests(src.ID)
		if len(log) != 3 || log[0].Outcome != "accepted" {
			t.Fatalf("log %+v", log)
		}
		for _, r := range log[1:] {
			if r.Outcome != "refused" || r.Status != 413 || r.Reason == nil || *r.Reason != "too_large" {
				t.Errorf("logged %+v, want refused as too_large", r)
			}
		}
	})
}
