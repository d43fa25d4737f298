package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// storeBrowserKey stores a links:create browser key for the pages of origins and returns it with its secret.
func storeBrowserKey(t *testing.T, db *store.DB, workspaceID string, origins ...string) (store.APIKey, string) {
	t.Helper()
	secret, err := apikey.GenerateBrowser()
	if err != nil {
		t.Fatal(err)
	}
	k, err := db.APIKeys.Create(ctx, store.NewAPIKey{WorkspaceID: workspaceID, Name: "share button",
		SecretHash: secret.Hash, DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: []string{"links:create"},
		CreatedBy: "cli", Kind: store.KindBrowser, Origins: origins, DailyQuota: 100})
	if err != nil {
		t.Fatal(err)
	}
	return k, secret.Plain
}

// fromPage calls GET /api/v1/me with the key from a page of origin and returns the status and problem code.
func (e *env) fromPage(t *testing.T, secret, origin string) (int, string) {
	t.Helper()
	return e.call(t, "/api/v1/me", secret, origin)
}

func originsOf(t *testing.T, db *store.DB, k store.APIKey) []string {
	t.Helper()
	got, err := db.APIKeys.Get(ctx, k.WorkspaceID, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got.Origins
}

// A key's allowed origins are edited in the console after it was made, and the change applies to the key's next
// request: the new origin is served, the old one refused. A browser key keeps at least one origin (422, the form
// shown again with what was typed); invalid origins are named; a secret key may lose all of them; a revoked key is
// not changed; and nobody reaches a key of a workspace the console does not show (404, key unchanged).
func TestEditKeyOrigins(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		alice, mallory := e.browser(), e.browser()
		alice.newUser(t, "alice")
		mallory.newUser(t, "mallory")
		ws := alice.newWorkspace(t, "Acme")
		mws := mallory.newWorkspace(t, "Mallory")
		const old, shop = "https://old.acme.example", "https://shop.acme.example"
		k, secret := storeBrowserKey(t, db, ws.ID, old)
		if status, code := e.fromPage(t, secret, shop); status != http.StatusForbidden || code != "origin_not_allowed" {
			t.Fatalf("from %s before the change: %d %s", shop, status, code)
		}
		if status, _ := e.fromPage(t, secret, old); status != http.StatusOK {
			t.Fatalf("from %s before the change: %d", old, status)
		}

		path := "/user/api/keys/" + k.ID + "/origins"
		p := alice.get(t, "/user/api")
		if row := p.keyRow(k.ID); row == nil || !strings.Contains(row[colActions], "Origins") {
			t.Fatalf("the key's row offers no origins edit: %q", row)
		}
		p = alice.get(t, path)
		p.wantStatus(t, http.StatusOK)
		p.wantText(t, "A browser key keeps at least one origin")
		if got, _ := p.elementText("key-origins"); got != old {
			t.Errorf("the form shows %q, want %q", got, old)
		}

		r := alice.postCSRF(t, path, url.Values{"origins": {"https://*.acme.example\r\n" + shop + "/"}})
		r.wantRedirect(t, "/user/api?origins="+k.ID)
		if got := alice.get(t, r.location(t).String()).notice(); !strings.Contains(got, "now works from: https://*.acme.example, "+shop) {
			t.Errorf("notice = %q", got)
		}
		if got := originsOf(t, db, k); !slices.Equal(got, []string{"https://*.acme.example", shop}) {
			t.Errorf("stored origins %q", got)
		}
		// The very next request sees the change: the console forgot the cached key.
		for _, o := range []string{shop, "https://blog.acme.example"} {
			if status, code := e.fromPage(t, secret, o); status != http.StatusOK {
				t.Errorf("from %s after the change: %d %s", o, status, code)
			}
		}
		if status, code := e.fromPage(t, secret, "https://acme.example"); status != http.StatusForbidden || code != "origin_not_allowed" {
			t.Errorf("from an origin no longer listed: %d %s", status, code)
		}

		// A browser key keeps an origin; what was typed comes back with the reason.
		r = alice.postCSRF(t, path, url.Values{"origins": {" \r\n "}})
		r.wantStatus(t, http.StatusUnprocessableEntity)
		if got := r.alert(); !strings.Contains(got, "keeps at least one origin") {
			t.Errorf("alert = %q", got)
		}
		r = alice.postCSRF(t, path, url.Values{"origins": {"ftp://files.acme.example"}})
		r.wantStatus(t, http.StatusUnprocessableEntity)
		if got := r.alert(); !strings.Contains(got, "Allowed origins:") || !strings.Contains(got, "ftp://files.acme.example") {
			t.Errorf("alert = %q", got)
		}
		if got, _ := r.elementText("key-origins"); got != "ftp://files.acme.example" {
			t.Errorf("the form shows %q again", got)
		}
		if got := originsOf(t, db, k); len(got) != 2 {
			t.Errorf("a refused change changed the origins: %q", got)
		}

		// A secret key may go back to no origins (servers only).
		sk, skSecret := storeKey(t, db, store.NewAPIKey{WorkspaceID: ws.ID, Name: "server", Scopes: []string{"models:read"},
			CreatedBy: "cli", Origins: []string{old}})
		alice.postCSRF(t, "/user/api/keys/"+sk.ID+"/origins", url.Values{"origins": {""}}).
			wantRedirect(t, "/user/api?origins="+sk.ID)
		if got := originsOf(t, db, sk); len(got) != 0 {
			t.Errorf("secret key origins %q", got)
		}
		if status, code := e.apiCall(t, skSecret); status != http.StatusOK {
			t.Errorf("the secret key without origins, from a server: %d %s", status, code)
		}

		// Another workspace's key: not found, unchanged.
		for _, b := range []*browser{mallory} {
			b.get(t, path).wantStatus(t, http.StatusNotFound)
			b.postCSRF(t, path, url.Values{"origins": {"https://mallory.example"}}).wantStatus(t, http.StatusNotFound)
		}
		mk, _ := storeBrowserKey(t, db, mws.ID, "https://mallory.example")
		alice.postCSRF(t, "/user/api/keys/"+mk.ID+"/origins", url.Values{"origins": {shop}}).wantStatus(t, http.StatusNotFound)
		if got := originsOf(t, db, k); len(got) != 2 || slices.Contains(got, "https://mallory.example") {
			t.Errorf("Mallory changed Alice's key: %q", got)
		}
		if got := originsOf(t, db, mk); !slices.Equal(got, []string{"https://mallory.example"}) {
			t.Errorf("Alice changed Mallory's key: %q", got)
		}

		// A revoked key is not changed.
		alice.postCSRF(t, "/user/api/keys/"+k.ID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)
		alice.postCSRF(t, path, url.Values{"origins": {old}}).wantStatus(t, http.StatusConflict)
		if got := originsOf(t, db, k); slices.Contains(got, old) {
			t.Errorf("a revoked key's origins changed: %q", got)
		}
	})
}
