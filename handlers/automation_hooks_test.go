package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// REST-hook subscriptions for workflow tools: a hook with payload filters receives only the events whose data
// match; an expired subscription receives nothing; filters and expiry are validated and shown.
func TestWebhookHooksFiltersAndExpiry(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		opened := h.create(`{"url":"http://127.0.0.1:9/n8n","events":["link.*"],"kind":"hook","expires_at":"` + future + `",
			"filters":[{"pointer":"/slug","op":"in","values":["a","b"]},{"pointer":"/domain","op":"prefix","value":"sb."}]}`)
		var shown struct {
			Kind      string           `json:"kind"`
			ExpiresAt *time.Time       `json:"expires_at"`
			Filters   []map[string]any `json:"filters"`
		}
		h.call(http.MethodGet, "/api/v1/webhooks/"+opened.ID, "", http.StatusOK, &shown)
		if shown.Kind != "hook" || shown.ExpiresAt == nil || len(shown.Filters) != 2 || shown.Filters[1]["value"] != "sb." {
			t.Errorf("shown %+v", shown)
		}
		all := h.create(`{"url":"http://127.0.0.1:9/all","events":["link.*"]}`)
		expiring := h.create(`{"url":"http://127.0.0.1:9/old","events":["link.*"],"expires_at":"` + future + `"}`)
		h.exec("UPDATE webhook_endpoints SET expires_at = ? WHERE id = ?", time.Now().Add(-time.Minute).UTC(), expiring.ID)

		h.emit("link.deleted", map[string]any{"slug": "a", "domain": "sb.example.com"})
		h.emit("link.deleted", map[string]any{"slug": "c", "domain": "sb.example.com"})
		h.emit("link.deleted", map[string]any{"slug": "b", "domain": "example.com"})
		count := func(id string) int {
			var page struct {
				Data []any `json:"data"`
			}
			h.call(http.MethodGet, "/api/v1/webhooks/"+id+"/deliveries", "", http.StatusOK, &page)
			return len(page.Data)
		}
		if n := count(opened.ID); n != 1 {
			t.Errorf("the filtered hook has %d deliveries, want 1", n)
		}
		if n := count(all.ID); n != 3 {
			t.Errorf("the unfiltered endpoint has %d deliveries, want 3", n)
		}
		if n := count(expiring.ID); n != 0 {
			t.Errorf("the expired subscription has %d deliveries, want 0", n)
		}

		// Filters can be replaced and removed, and the expiry cleared.
		var changed struct {
			ExpiresAt *time.Time       `json:"expires_at"`
			Filters   []map[string]any `json:"filters"`
		}
		h.call(http.MethodPatch, "/api/v1/webhooks/"+opened.ID, `{"filters":[],"expires_at":null}`, http.StatusOK, &changed)
		if changed.ExpiresAt != nil || len(changed.Filters) != 0 {
			t.Errorf("changed %+v", changed)
		}
		h.emit("link.deleted", map[string]any{"slug": "z", "domain": "x"})
		if n := count(opened.ID); n != 2 {
			t.Errorf("the hook without filters has %d deliveries, want 2", n)
		}

		p := h.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: h.write, body: `{"url":"http://127.0.0.1:9/x",
			"events":["*"],"expires_at":"2020-01-01T00:00:00Z","filters":[{"pointer":"/a","op":"equals"},
			{"pointer":"/b","op":"prefix","value":3},{"pointer":"/c","op":"in"}]}`}).problem(t, http.StatusBadRequest, "validation_failed")
		pointers := map[string]bool{}
		for _, e := range p.Errors {
			pointers[e["pointer"]] = true
		}
		for _, want := range []string{"/expires_at", "/filters/0/value", "/filters/1/value", "/filters/2/values"} {
			if !pointers[want] {
				t.Errorf("no error at %s: %+v", want, p.Errors)
			}
		}
	})
}
