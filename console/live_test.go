package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// streamTokenOf asks the console for a stream token, as the live pages' module does.
func (b *browser) streamTokenOf(t *testing.T) string {
	t.Helper()
	r := b.postCSRF(t, "/user/stream-token", nil)
	r.wantStatus(t, http.StatusOK)
	var answer struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		URL       string    `json:"url"`
	}
	if err := json.Unmarshal([]byte(r.body), &answer); err != nil || !strings.HasPrefix(answer.Token, "sbst_") ||
		answer.URL != "/api/v1/events/stream" || time.Until(answer.ExpiresAt) > eventstream.TokenTTL+time.Second {
		t.Fatalf("stream token answer %s: %v", r.body, err)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	return answer.Token
}

// openStream opens the event stream with a token; the answer's body is left open for readIDs.
func openStream(t *testing.T, e *env, token string, query url.Values) *http.Response {
	t.Helper()
	if query == nil {
		query = url.Values{}
	}
	query.Set("access_token", token)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/v1/events/stream?"+query.Encode(), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// nextEventID reads a stream up to its next event and returns the event's ID.
func nextEventID(t *testing.T, lines *bufio.Scanner) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if id, ok := strings.CutPrefix(lines.Text(), "id: "); ok {
				got <- id
				return
			}
		}
		got <- ""
	}()
	select {
	case id := <-got:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no event on the stream in 30 s")
		return ""
	}
}

// The live pages' stream token: minted by the console for the session (a POST with its CSRF token), it opens the
// event stream of the session's workspace and nothing else — not another workspace's events, not another API
// operation, not after sign-out, not for a workspace the user does not belong to.
func TestLiveStreamToken(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "live")
		_, other := linksUser(t, e, "other")

		// A forged request (no CSRF token) gets no token.
		if r := b.post(t, "/user/stream-token", url.Values{}); r.StatusCode != http.StatusForbidden {
			t.Fatalf("no CSRF token: %d %s", r.StatusCode, r.body)
		}
		// Signed out: sent to sign in.
		if r := e.browser().post(t, "/user/stream-token", url.Values{}); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("signed out: %d", r.StatusCode)
		}

		token := b.streamTokenOf(t)
		res := openStream(t, e, token, url.Values{"types": {"link.*"}})
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		lines := bufio.NewScanner(res.Body)
		emitEvent(t, db, other.ID, "link.created") // another workspace's: never on this stream
		mine := emitEvent(t, db, ws.ID, "link.created")
		if id := nextEventID(t, lines); id != mine.ID {
			t.Fatalf("first event %q, want %s of the session's workspace", id, mine.ID)
		}

		// The token opens streams only: with it any other operation wants an API key.
		r := b.do(t, http.MethodGet, "/api/v1/links?access_token="+url.QueryEscape(token), nil, nil)
		if r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.body, `"missing_api_key"`) {
			t.Fatalf("links with a stream token: %d %s", r.StatusCode, r.body)
		}

		// A token for a workspace the session's user is not in (as if sealed by this server) is refused.
		ses := b.session(t)
		foreign, _ := eventstream.IssueConsoleToken(e.box, ses.ID, other.ID, time.Now())
		if res := openStream(t, e, foreign, nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("another workspace's token: %d", res.StatusCode)
		}
		// An expired one too.
		old, _ := eventstream.IssueConsoleToken(e.box, ses.ID, ws.ID, time.Now().Add(-eventstream.TokenTTL-time.Second))
		if res := openStream(t, e, old, nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("expired token: %d", res.StatusCode)
		}

		// Signing out ends the session's tokens.
		b.postCSRF(t, "/user/sign-out", nil)
		res = openStream(t, e, token, nil)
		var p struct{ Code string }
		_ = json.NewDecoder(res.Body).Decode(&p)
		if res.StatusCode != http.StatusUnauthorized || p.Code != "invalid_stream_token" {
			t.Fatalf("after sign-out: %d %q", res.StatusCode, p.Code)
		}
	})
}

// Live pages mark the sections the module follows; without script the instance page reloads itself instead.
func TestLivePagesMarked(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, _ := linksUser(t, e, "marks")
		p := b.get(t, "/user/events")
		p.wantStatus(t, http.StatusOK)
		for _, want := range []string{`id="event-log" data-live="*"`, `<script src="/user/static/live.js" defer></script>`} {
			if !strings.Contains(p.body, want) {
				t.Fatalf("event log lacks %s", want)
			}
		}
		if strings.Contains(p.body, `http-equiv="refresh"`) {
			t.Fatal("the event log reloads itself")
		}
		// An older page of the log is not live (new events are not on it).
		if older := b.get(t, "/user/events?before=evt_x"); strings.Contains(older.body, "data-live=") {
			t.Fatal("an older page of the log is live")
		}
		if js := b.get(t, "/user/static/live.js"); js.StatusCode != http.StatusOK || !strings.Contains(js.body, "/user/stream-token") {
			t.Fatalf("live.js: %d", js.StatusCode)
		}
	})
}
