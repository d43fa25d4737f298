package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// wantRefusedAsCrossSite checks the console's answer to a request from another site: its error page, 403.
func (r *resp) wantRefusedAsCrossSite(t *testing.T) {
	t.Helper()
	r.wantStatus(t, http.StatusForbidden)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q, want the console's HTML error page", ct)
	}
	if got := r.alert(); !strings.Contains(got, "sent from another site") {
		t.Errorf("alert %q, want the cross-site refusal", got)
	}
	r.wantText(t, "Request refused")
}

// A state-changing request that the browser says came from another site is refused with the console's error page
// and changes nothing, though it carries the session's valid CSRF token (as a forged form would if the token had
// leaked). Sign-in and sign-up are refused the same way.
func TestCrossSitePostRefused(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "cross-site")
		for name, header := range map[string]http.Header{
			"cross-site":                             {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://attacker.example"}},
			"same-site (another host of the domain)": {"Sec-Fetch-Site": {"same-site"}, "Origin": {"https://links.example"}},
			"an older browser's Origin only":         {"Origin": {"https://attacker.example"}},
		} {
			t.Run(name, func(t *testing.T) {
				form := url.Values{"csrf_token": {b.csrf(t)}, "name": {"Forged"}}
				b.do(t, http.MethodPost, "/user/workspaces", form, header).wantRefusedAsCrossSite(t)
			})
		}
		if ws, err := db.Workspaces.ForUser(ctx, u.id); err != nil || len(ws) != 0 {
			t.Fatalf("refused requests created workspaces: %+v, %v", ws, err)
		}

		visitor := e.browser()
		token := visitor.get(t, "/user/sign-in").field(t, "csrf_token")
		r := visitor.do(t, http.MethodPost, "/user/sign-in", url.Values{"csrf_token": {token}, "email": {u.email},
			"password": {u.password}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
		r.wantRefusedAsCrossSite(t)
		if setCookie(r, "sb_session") != nil {
			t.Fatal("a cross-site sign-in started a session")
		}
		token = visitor.get(t, "/user/sign-up").field(t, "csrf_token")
		visitor.do(t, http.MethodPost, "/user/sign-up", url.Values{"csrf_token": {token}, "email": {uniqueEmail("forged")},
			"password": {password}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}).wantRefusedAsCrossSite(t)
	})
}

// The same request from the console's own origin goes through: marked same-origin by a current browser, or with an
// Origin naming the server as an older browser sends it. Behind a reverse proxy that rewrites Host, the origin of
// the base URL is the console's own.
func TestSameOriginPostAccepted(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		const public = "http://console.example:8080"
		e := newEnv(t, db, console.Config{BaseURL: public})
		b := e.browser()
		b.newUser(t, "same-origin")
		for name, header := range map[string]http.Header{
			"same-origin":                   {"Sec-Fetch-Site": {"same-origin"}, "Origin": {e.url}},
			"an older browser's Origin":     {"Origin": {e.url}},
			"the base URL's origin (proxy)": {"Origin": {public}},
		} {
			t.Run(name, func(t *testing.T) {
				form := url.Values{"csrf_token": {b.csrf(t)}, "name": {name}}
				b.do(t, http.MethodPost, "/user/workspaces", form, header).wantRedirect(t, "/user/api?workspace-created=1")
				if got := b.currentWorkspace(t).Name; got != name {
					t.Fatalf("current workspace %q, want the one just created", got)
				}
			})
		}

		// Without that base URL, the proxy's origin is another site's.
		other := newEnv(t, db, console.Config{})
		b = other.browser()
		b.newUser(t, "no-base-url")
		form := url.Values{"csrf_token": {b.csrf(t)}, "name": {"Proxied"}}
		b.do(t, http.MethodPost, "/user/workspaces", form, http.Header{"Origin": {public}}).wantRefusedAsCrossSite(t)
	})
}

func TestBaseURLMustBeAnOrigin(t *testing.T) {
	for _, base := range []string{"console.example", "/user", "ftp://console.example"} {
		if _, err := console.New(console.Config{BaseURL: base}, storetest.SQLite(t)); err == nil {
			t.Errorf("New accepted the base URL %q", base)
		}
	}
}
