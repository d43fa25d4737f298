package handlers_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// encodeCursor makes a cursor the way the server does, to try forged ones.
func encodeCursor(text string) string { return base64.RawURLEncoding.EncodeToString([]byte(text)) }

// pages follows next_cursor from path to the last page of a list and returns the IDs in order and the pages read.
func (h *hooks) pages(path string) ([]string, int) {
	h.t.Helper()
	var ids []string
	for pages := 1; ; pages++ {
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore    bool    `json:"has_more"`
			NextCursor *string `json:"next_cursor"`
		}
		h.call(http.MethodGet, path, "", http.StatusOK, &l)
		for _, x := range l.Data {
			ids = append(ids, x.ID)
		}
		if !l.HasMore {
			if l.NextCursor != nil {
				h.t.Errorf("%s: last page with a cursor", path)
			}
			return ids, pages
		}
		path = setQuery(path, "cursor", *l.NextCursor)
	}
}

// setQuery sets one query parameter of a path; the others stay.
func setQuery(path, name, value string) string {
	u, err := url.Parse(path)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestListEvents(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		exhausted := map[string]any{"delivery_id": "dlv_01JDAB3C4D5E6F7G8H9J0K1M2N", "webhook_id": "whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D",
			"event_id": "evt_01JDAB3C4D5E6F7G8H9J0K1M2Q", "event_type": "link.created", "attempts": 10,
			"last_status_code": nil, "last_error": "timeout"}
		var ids, pings []string
		for i := range 5 {
			var ev store.Event
			if i%2 == 0 {
				ev = h.ping()
				pings = append(pings, ev.ID)
			} else {
				ev = h.emit("webhook.delivery.exhausted", exhausted)
			}
			ids = append(ids, ev.ID)
		}
		newest := slices.Clone(ids)
		slices.Reverse(newest)

		got, pages := h.pages("/api/v1/events?limit=2")
		if !slices.Equal(got, newest) || pages != 3 {
			t.Errorf("newest first: %v in %d pages, want %v", got, pages, newest)
		}
		got, pages = h.pages("/api/v1/events?limit=2&after=" + ids[0])
		if !slices.Equal(got, ids[1:]) || pages != 2 {
			t.Errorf("oldest first after the first: %v in %d pages, want %v", got, pages, ids[1:])
		}
		if got, _ = h.pages("/api/v1/events?after=" + ids[4]); len(got) != 0 {
			t.Errorf("after the last event: %v", got)
		}
		got, _ = h.pages("/api/v1/events?limit=1&type=webhook.ping&after=" + ids[0])
		if !slices.Equal(got, pings[1:]) {
			t.Errorf("pings after the first: %v, want %v", got, pings[1:])
		}
		got, _ = h.pages("/api/v1/events?limit=1&type=webhook.*")
		if !slices.Equal(got, newest) {
			t.Errorf("family: %v", got)
		}
		got, _ = h.pages("/api/v1/events?type=webhook.delivery.exhausted")
		if !slices.Equal(got, []string{ids[3], ids[1]}) {
			t.Errorf("exact type: %v", got)
		}
		if got, _ = h.pages("/api/v1/events?type=link.*"); len(got) != 0 {
			t.Errorf("another family: %v", got)
		}

		for name, cursor := range map[string]string{
			"not base64":          "Zm9v!",
			"not a cursor":        encodeCursor("foo"),
			"another list's":      encodeCursor("<whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D"),
			"unknown direction":   encodeCursor("=" + ids[0]),
			"padded base64url ID": base64.URLEncoding.EncodeToString([]byte("<" + ids[0])),
		} {
			p := h.do(request{path: "/api/v1/events?cursor=" + cursor, key: h.write}).problem(t, http.StatusBadRequest, "validation_failed")
			if got := pointers(p); !slices.Equal(got, []string{"?cursor"}) {
				t.Errorf("%s cursor: %v", name, got)
			}
		}
		// Endpoints are listed newest first only: an oldest-first cursor does not turn the list round.
		p := h.do(request{path: "/api/v1/webhooks?cursor=" + encodeCursor(">whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D"), key: h.write}).
			problem(t, http.StatusBadRequest, "validation_failed")
		if got := pointers(p); !slices.Equal(got, []string{"?cursor"}) {
			t.Errorf("oldest-first cursor on endpoints: %v", got)
		}
	})
}

func TestGetEvent(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		ev := h.ping()
		var got envelope
		h.call(http.MethodGet, "/api/v1/events/"+ev.ID, "", http.StatusOK, &got)
		if got.ID != ev.ID || got.Type != "webhook.ping" || got.APIVersion != "v1" || got.WorkspaceID != h.ws.ID ||
			!got.Timestamp.Equal(ev.CreatedAt) || string(got.Data) != string(ev.Data) {
			t.Errorf("event %+v, want %+v", got, ev)
		}
		h.do(request{path: "/api/v1/events/evt_01JDAB3C4D5E6F7G8H9J0K1M2P", key: h.write}).problem(t, http.StatusNotFound, "not_found")
	})
}
