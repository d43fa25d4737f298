package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// keyForm is a filled create-key form; the nonce and CSRF token come from the page.
func keyForm(name, preset, expiry string, custom map[string]string) url.Values {
	f := url.Values{"name": {name}, "preset": {preset}, "expiry": {expiry}}
	for res, level := range custom {
		f.Set("scope_"+res, level)
	}
	return f
}

// createKey submits the create-key form of a freshly loaded /user/api page.
func (b *browser) createKey(t *testing.T, form url.Values) *resp {
	t.Helper()
	p := b.get(t, "/user/api")
	p.wantStatus(t, http.StatusOK)
	form.Set("csrf_token", p.field(t, "csrf_token"))
	form.Set("nonce", p.field(t, "nonce"))
	return b.post(t, "/user/api/keys", form)
}

// secret returns the secret shown in the element with id new-key-secret; it must be there exactly once.
func (r *resp) secret(t *testing.T) string {
	t.Helper()
	s, n := r.elementText("new-key-secret")
	if n != 1 {
		t.Fatalf("%d elements with id new-key-secret, want 1", n)
	}
	if !regexp.MustCompile(`^sb_sk_[0-9A-Za-z]{38}$`).MatchString(s) {
		t.Fatalf("secret %q does not have the documented shape", s)
	}
	return s
}

// storeKey stores a key as it is given — an expiry in the past included, which no form accepts — and returns it
// with its secret.
func storeKey(t *testing.T, db *store.DB, n store.NewAPIKey) (store.APIKey, string) {
	t.Helper()
	secret, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	n.SecretHash, n.DisplayPrefix, n.Last4 = secret.Hash, secret.DisplayPrefix, secret.Last4
	k, err := db.APIKeys.Create(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return k, secret.Plain
}

func keys(t *testing.T, db *store.DB, workspaceID string) []store.APIKey {
	t.Helper()
	ks, err := db.APIKeys.List(ctx, workspaceID)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// keyRow returns the cells (text) of the key's row in the table, or nil when the key is not listed.
func (r *resp) keyRow(id string) []string {
	m := regexp.MustCompile(`(?s)<tr data-key-id="` + regexp.QuoteMeta(id) + `">(.*?)</tr>`).FindStringSubmatch(r.body)
	if m == nil {
		return nil
	}
	var cells []string
	for _, c := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(m[1], -1) {
		cells = append(cells, strings.Join(strings.Fields(html2text(c[1])), " "))
	}
	return cells
}

func html2text(s string) string { return (&resp{body: s}).text() }

// Columns of the key table.
const (
	colName = iota
	colKey
	colAccess
	colCreated
	colLastUsed
	colExpires
	colStatus
	colActions
)

// apiCall calls GET /api/v1/models with the key through the same server and returns the status and problem code.
func (e *env) apiCall(t *testing.T, secret string) (int, string) {
	t.Helper()
	return e.call(t, "/api/v1/models", secret, "")
}

// call GETs path with the key, from a page of origin unless it is "", and returns the status and problem code.
func (e *env) call(t *testing.T, path, secret, origin string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body.Code
}

func TestAPIPageWithoutWorkspace(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	b.newUser(t, "empty")
	p := b.get(t, "/user/api")
	p.wantStatus(t, http.StatusOK)
	p.wantText(t, "You have no workspace yet")
	if !regexp.MustCompile(`<a class="[^"]*" href="/user/workspaces">Create workspace</a>`).MatchString(p.body) {
		t.Error("the empty state has no 'Create workspace' link to /user/workspaces")
	}
	if strings.Contains(p.body, `name="nonce"`) || strings.Contains(p.body, `action="/user/api/keys"`) {
		t.Error("the page offers to create a key without a workspace")
	}
	// Posting the form anyway sends the user to create a workspace and stores nothing.
	r := b.postCSRF(t, "/user/api/keys", keyForm("No workspace", "full", "90d", nil))
	r.wantRedirect(t, "/user/workspaces")
	n, err := e.db.Bun().NewSelect().Table("api_keys").Count(ctx)
	if err != nil || n != 0 {
		t.Fatalf("api keys = %d (%v)", n, err)
	}
}

func TestCreateKey(t *testing.T) {
	all := []string{"models:read", "models:write", "links:read", "links:write", "webhooks:read", "webhooks:write",
		"messaging:read", "messaging:write", "automation:read", "automation:write"}
	tests := []struct {
		name, preset, expiry string
		custom               map[string]string
		scopes               []string
		ttl                  time.Duration // 0 = never expires
		badge                string
	}{
		{"full", "full", "30d", nil, all, 30 * 24 * time.Hour, "Full access"},
		{"read only", "read", "90d", nil,
			[]string{"models:read", "links:read", "webhooks:read", "messaging:read", "automation:read"}, 90 * 24 * time.Hour, "Read only"},
		{"short links", "links", "1y", nil, []string{"links:write"}, 365 * 24 * time.Hour, "Short links"},
		{"messaging", "messaging", "never", nil, []string{"messaging:write"}, 0, "Messaging"},
		{"automation", "automation", "90d", nil, []string{"webhooks:write", "automation:write"}, 90 * 24 * time.Hour, "Automation"},
		{"custom", "custom", "never",
			map[string]string{"models": "read", "links": "write", "webhooks": "none", "messaging": "read", "automation": ""},
			[]string{"models:read", "links:write", "messaging:read"}, 0, "3 scopes"},
		{"custom single", "custom", "30d", map[string]string{"webhooks": "read"}, []string{"webhooks:read"}, 30 * 24 * time.Hour, "1 scope"},
		// The matrix is ignored unless Custom is chosen.
		{"preset wins over matrix", "links", "30d", map[string]string{"models": "read"}, []string{"links:write"}, 30 * 24 * time.Hour, "Short links"},
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "keys")
		ws := b.newWorkspace(t, "Key Factory")
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(keys(t, db, ws.ID))
				start := time.Now()
				name := "Key " + tt.name
				r := b.createKey(t, keyForm(name, tt.preset, tt.expiry, tt.custom))
				r.wantStatus(t, http.StatusCreated)
				if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("the page with the secret has Cache-Control %q, want no-store", cc)
				}
				secret := r.secret(t)
				if err := apikey.Check(secret); err != nil {
					t.Fatalf("shown secret fails its checksum: %v", err)
				}

				ks := keys(t, db, ws.ID)
				if len(ks) != before+1 {
					t.Fatalf("keys = %d, want %d", len(ks), before+1)
				}
				k := ks[0]
				if k.Name != name || k.CreatedBy != u.id || k.WorkspaceID != ws.ID || k.RevokedAt != nil {
					t.Errorf("stored key = %+v", k)
				}
				if !slices.Equal(k.Scopes, tt.scopes) {
					t.Errorf("scopes = %v, want exactly %v", k.Scopes, tt.scopes)
				}
				if apikey.Hash(secret) != k.SecretHash {
					t.Error("the shown secret does not verify against the stored hash")
				}
				if strings.Contains(k.SecretHash, secret) || !strings.HasPrefix(secret, k.DisplayPrefix) || !strings.HasSuffix(secret, k.Last4) {
					t.Errorf("display parts %q…%q do not match the secret", k.DisplayPrefix, k.Last4)
				}
				switch {
				case tt.ttl == 0 && k.ExpiresAt != nil:
					t.Errorf("expires at %v, want never", k.ExpiresAt)
				case tt.ttl > 0 && (k.ExpiresAt == nil || k.ExpiresAt.Before(start.Add(tt.ttl).Add(-time.Second)) ||
					k.ExpiresAt.After(time.Now().Add(tt.ttl).Add(time.Second))):
					t.Errorf("expires at %v, want in %v", k.ExpiresAt, tt.ttl)
				}

				// The card names the key and its scopes; the table lists it with its badge.
				r.wantText(t, "Your new key “"+name+"”")
				r.wantText(t, "it will not be shown again")
				r.wantText(t, strings.Join(tt.scopes, ", "))
				if curl, _ := r.elementText("new-key-curl"); !strings.Contains(curl, "Bearer "+secret) || !strings.Contains(curl, e.url+"/api/v1/models") {
					t.Errorf("first-call command = %q", curl)
				}
				row := r.keyRow(k.ID)
				if row == nil {
					t.Fatal("the new key is not in the table")
				}
				if row[colKey] != apikey.Mask(k.DisplayPrefix, k.Last4) || strings.Contains(strings.Join(row, " "), secret) {
					t.Errorf("key column = %q, want the masked key", row[colKey])
				}
				if !strings.HasPrefix(row[colAccess], tt.badge) {
					t.Errorf("access column = %q, want the badge %q", row[colAccess], tt.badge)
				}

				// The secret is never shown again.
				later := b.get(t, "/user/api")
				later.wantStatus(t, http.StatusOK)
				later.wantNoText(t, secret)
				if _, n := later.elementText("new-key-secret"); n != 0 {
					t.Error("a later GET shows a new-key card")
				}
				if later.keyRow(k.ID) == nil {
					t.Error("the key is not listed on a later GET")
				}
			})
		}
	})
}

func TestCreateKeyResubmitted(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "twice")
		ws := b.newWorkspace(t, "Twice")
		p := b.get(t, "/user/api")
		form := keyForm("Double click", "full", "90d", nil)
		form.Set("csrf_token", p.field(t, "csrf_token"))
		form.Set("nonce", p.field(t, "nonce"))

		first := b.post(t, "/user/api/keys", form)
		first.wantStatus(t, http.StatusCreated)
		secret := first.secret(t)

		again := b.post(t, "/user/api/keys", form)
		again.wantStatus(t, http.StatusConflict)
		if got := again.alert(); !strings.Contains(got, "already submitted") {
			t.Errorf("alert = %q", got)
		}
		again.wantNoText(t, secret)
		if _, n := again.elementText("new-key-secret"); n != 0 {
			t.Error("the resubmitted form shows a secret")
		}
		if ks := keys(t, db, ws.ID); len(ks) != 1 {
			t.Fatalf("keys = %d after a resubmitted form, want 1", len(ks))
		}
		// The 409 page offers a fresh form that works.
		if again.field(t, "nonce") == form.Get("nonce") {
			t.Error("the 409 page reuses the spent nonce")
		}

		// A form without a nonce (an expired page) creates nothing.
		form.Del("nonce")
		b.post(t, "/user/api/keys", form).wantStatus(t, http.StatusUnprocessableEntity)
		if ks := keys(t, db, ws.ID); len(ks) != 1 {
			t.Fatalf("keys = %d after a form without nonce, want 1", len(ks))
		}
	})
}

func TestCreateKeyInvalid(t *testing.T) {
	tests := []struct {
		name   string
		form   url.Values
		msg    string
		preset string
		expiry string
		scopes map[string]string // radio groups expected to stay checked
	}{
		{"nothing selected", keyForm("Empty matrix", "custom", "30d", map[string]string{"models": "none"}),
			"at least one permission", "custom", "30d", map[string]string{"models": "none", "links": "none"}},
		{"unknown level", keyForm("Odd matrix", "custom", "30d", map[string]string{"links": "admin", "webhooks": "write"}),
			"none, read or write", "custom", "30d", map[string]string{"webhooks": "write"}},
		{"empty name", keyForm("   ", "links", "1y", nil), "Give the key a name", "links", "1y", nil},
		{"long name", keyForm(strings.Repeat("k", 101), "read", "30d", nil), "Give the key a name", "read", "30d", nil},
		{"unknown expiry", keyForm("Forever and ever", "messaging", "2y", nil), "Choose when the key expires", "messaging", "", nil},
		{"missing expiry", keyForm("No expiry", "read", "", nil), "Choose when the key expires", "read", "", nil},
		{"unknown preset", keyForm("Root", "root", "30d", nil), "Choose what the key may do", "", "30d", nil},
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "invalid")
		ws := b.newWorkspace(t, "Invalid")
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := b.createKey(t, tt.form)
				r.wantStatus(t, http.StatusUnprocessableEntity)
				if got := r.alert(); !strings.Contains(got, tt.msg) {
					t.Errorf("alert = %q, want %q", got, tt.msg)
				}
				if _, n := r.elementText("new-key-secret"); n != 0 {
					t.Error("a refused form shows a secret")
				}
				if got, want := r.field(t, "name"), strings.TrimSpace(tt.form.Get("name")); got != want {
					t.Errorf("name field = %q, want %q kept", got, want)
				}
				if got := r.checked("preset"); got != tt.preset {
					t.Errorf("checked preset = %q, want %q kept", got, tt.preset)
				}
				if got := r.selected("expiry"); got != tt.expiry {
					t.Errorf("selected expiry = %q, want %q kept", got, tt.expiry)
				}
				for res, level := range tt.scopes {
					if got := r.checked("scope_" + res); got != level {
						t.Errorf("scope_%s = %q, want %q kept", res, got, level)
					}
				}
				if ks := keys(t, db, ws.ID); len(ks) != 0 {
					t.Fatalf("a refused form stored %d keys", len(ks))
				}
				// The re-rendered form, corrected, creates the key (its nonce is fresh and unspent).
				fixed := url.Values{"csrf_token": {r.field(t, "csrf_token")}, "nonce": {r.field(t, "nonce")},
					"name": {"Fixed " + tt.name}, "preset": {"read"}, "expiry": {"30d"}}
				b.post(t, "/user/api/keys", fixed).wantStatus(t, http.StatusCreated)
				if _, err := db.Bun().NewDelete().Table("api_keys").Where("workspace_id = ?", ws.ID).Exec(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
		// Without the CSRF token nothing is created.
		p := b.get(t, "/user/api")
		form := keyForm("No token", "full", "90d", nil)
		form.Set("nonce", p.field(t, "nonce"))
		b.post(t, "/user/api/keys", form).wantStatus(t, http.StatusForbidden)
		if ks := keys(t, db, ws.ID); len(ks) != 0 {
			t.Fatal("a form without CSRF token stored a key")
		}
	})
}

func TestKeyTable(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "table")
		ws := b.newWorkspace(t, "Table")

		r := b.createKey(t, keyForm("From the console", "full", "never", nil))
		r.wantStatus(t, http.StatusCreated)
		consoleKey := keys(t, db, ws.ID)[0]

		issue := func(name, createdBy string, scopes []string, expiresAt *time.Time) store.APIKey {
			k, _ := storeKey(t, db, store.NewAPIKey{WorkspaceID: ws.ID, Name: name, Scopes: scopes,
				CreatedBy: createdBy, ExpiresAt: expiresAt})
			return k
		}
		cliKey := issue("From the CLI", "cli", []string{"links:write"}, nil)
		orphan := issue("Former member's", "usr_gone", []string{"models:read", "links:read"}, nil)
		past := time.Now().Add(-time.Hour)
		expired := issue("Expired one", "cli", []string{"messaging:write"}, &past)
		revoked := issue("Revoked one", "cli", []string{"webhooks:write", "automation:write"}, nil)
		if _, err := db.APIKeys.Revoke(ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		used := issue("Used one", "cli", []string{"models:read", "links:read", "webhooks:read", "messaging:read", "automation:read"}, nil)
		if err := db.APIKeys.TouchLastUsed(ctx, map[string]time.Time{used.ID: time.Now().Add(-2*time.Hour - time.Minute)}); err != nil {
			t.Fatal(err)
		}

		p := b.get(t, "/user/api")
		p.wantStatus(t, http.StatusOK)
		check := func(k store.APIKey, col int, want string) {
			t.Helper()
			row := p.keyRow(k.ID)
			if row == nil {
				t.Fatalf("key %q is not listed", k.Name)
			}
			if len(row) != colActions+1 {
				t.Fatalf("row of %q has %d cells: %q", k.Name, len(row), row)
			}
			if !strings.Contains(row[col], want) {
				t.Errorf("key %q column %d = %q, want %q", k.Name, col, row[col], want)
			}
		}
		check(consoleKey, colName, "From the console")
		check(consoleKey, colKey, apikey.Mask(consoleKey.DisplayPrefix, consoleKey.Last4))
		check(consoleKey, colAccess, "Full access")
		check(consoleKey, colCreated, "by "+u.email)
		check(consoleKey, colCreated, consoleKey.CreatedAt.UTC().Format("2 Jan 2006"))
		check(consoleKey, colLastUsed, "Never")
		check(consoleKey, colExpires, "Never")
		check(consoleKey, colStatus, "active")
		check(consoleKey, colActions, "Revoke")
		check(cliKey, colCreated, "by CLI")
		check(cliKey, colAccess, "Short links")
		check(orphan, colCreated, "by a former member")
		check(orphan, colAccess, "2 scopes")
		check(expired, colStatus, "expired")
		check(expired, colExpires, past.UTC().Format("2 Jan 2006"))
		check(expired, colAccess, "Messaging")
		check(used, colLastUsed, "2 hours ago")
		check(used, colAccess, "Read only")

		// Revoked keys are hidden unless asked for.
		if p.keyRow(revoked.ID) != nil {
			t.Error("a revoked key is listed by default")
		}
		p.wantNoText(t, "Revoked one")
		if !strings.Contains(p.body, `href="/user/api?show=revoked"`) {
			t.Error("no link to show the revoked keys")
		}
		p.wantText(t, "Show revoked keys (1)")

		p = b.get(t, "/user/api?show=revoked")
		p.wantStatus(t, http.StatusOK)
		check(revoked, colStatus, "revoked")
		check(revoked, colAccess, "Automation")
		if row := p.keyRow(revoked.ID); strings.Contains(row[colActions], "Revoke") {
			t.Error("a revoked key offers to be revoked again")
		}
		p.wantText(t, "Hide revoked keys")
		if p.keyRow(consoleKey.ID) == nil {
			t.Error("?show=revoked hides the active keys")
		}
	})
}

func TestRevokeKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "revoke")
		ws := b.newWorkspace(t, "Revoke")
		r := b.createKey(t, keyForm("Billing worker", "full", "90d", nil))
		r.wantStatus(t, http.StatusCreated)
		secret := r.secret(t)
		k := keys(t, db, ws.ID)[0]

		if status, code := e.apiCall(t, secret); status != http.StatusOK {
			t.Fatalf("API call with the new key = %d %s, want 200", status, code)
		}

		path := "/user/api/keys/" + k.ID + "/revoke"
		p := b.get(t, path)
		p.wantStatus(t, http.StatusOK)
		p.wantText(t, "Revoke “Billing worker”?")
		p.wantText(t, apikey.Mask(k.DisplayPrefix, k.Last4))
		p.wantText(t, "Revoke key Billing worker")
		p.wantNoText(t, secret)
		if !strings.Contains(p.body, `action="`+path+`"`) {
			t.Error("the confirmation form does not post to the revoke URL")
		}
		if !strings.Contains(b.get(t, "/user/api").body, `href="`+path+`"`) {
			t.Error("the key table has no link to the confirmation page")
		}

		// Without the CSRF token nothing is revoked.
		for _, form := range []url.Values{{}, {"csrf_token": {"forged"}}} {
			b.post(t, path, form).wantStatus(t, http.StatusForbidden)
		}
		if got, _ := db.APIKeys.Get(ctx, ws.ID, k.ID); got.RevokedAt != nil {
			t.Fatal("revoked without a CSRF token")
		}
		if status, _ := e.apiCall(t, secret); status != http.StatusOK {
			t.Fatalf("API call after refused revocations = %d", status)
		}

		r = b.post(t, path, url.Values{"csrf_token": {p.field(t, "csrf_token")}})
		r.wantStatus(t, http.StatusSeeOther)
		loc := r.location(t)
		if loc.Path != "/user/api" || loc.Query().Get("revoked") == "" {
			t.Fatalf("Location = %s", loc)
		}
		got, err := db.APIKeys.Get(ctx, ws.ID, k.ID)
		if err != nil || got.RevokedAt == nil {
			t.Fatalf("key not revoked: %+v %v", got, err)
		}
		// The very next API request with the key is refused.
		if status, code := e.apiCall(t, secret); status != http.StatusUnauthorized || code != "api_key_revoked" {
			t.Fatalf("API call right after revoking = %d %s, want 401 api_key_revoked", status, code)
		}

		p = b.get(t, loc.String())
		p.wantStatus(t, http.StatusOK)
		if n := p.notice(); !strings.Contains(n, "Billing worker") || !strings.Contains(n, "revoked") {
			t.Errorf("notice = %q", n)
		}
		if p.keyRow(k.ID) != nil {
			t.Error("the revoked key is still listed")
		}

		// Revoking twice changes nothing; the confirmation page says it is revoked already.
		p = b.get(t, path)
		p.wantStatus(t, http.StatusOK)
		p.wantText(t, "already revoked")
		if strings.Contains(p.body, `action="`+path+`"`) {
			t.Error("a revoked key's page still offers the revoke button")
		}
		b.post(t, path, url.Values{"csrf_token": {p.field(t, "csrf_token")}}).wantStatus(t, http.StatusSeeOther)
		if again, _ := db.APIKeys.Get(ctx, ws.ID, k.ID); !again.RevokedAt.Equal(*got.RevokedAt) {
			t.Errorf("revoked_at moved from %v to %v", got.RevokedAt, again.RevokedAt)
		}
	})
}

func TestRevokeIsTenantIsolated(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		alice, mallory := e.browser(), e.browser()
		alice.newUser(t, "alice")
		mallory.newUser(t, "mallory")
		aliceOther := alice.newWorkspace(t, "Alice other")
		alice.createKey(t, keyForm("Alice other key", "full", "90d", nil)).wantStatus(t, http.StatusCreated)
		aliceMain := alice.newWorkspace(t, "Alice main")
		alice.createKey(t, keyForm("Alice main key", "full", "90d", nil)).wantStatus(t, http.StatusCreated)
		mws := mallory.newWorkspace(t, "Mallory")
		r := mallory.createKey(t, keyForm("Mallory key", "full", "90d", nil))
		r.wantStatus(t, http.StatusCreated)
		mallorySecret := r.secret(t)

		otherKey := keys(t, db, aliceOther.ID)[0]
		mainKey := keys(t, db, aliceMain.ID)[0]
		malloryKey := keys(t, db, mws.ID)[0]

		attempt := func(b *browser, k store.APIKey) {
			t.Helper()
			path := "/user/api/keys/" + k.ID + "/revoke"
			p := b.get(t, path)
			p.wantStatus(t, http.StatusNotFound)
			p.wantNoText(t, k.Name)
			if got := p.alert(); !strings.Contains(got, "no such key") {
				t.Errorf("alert = %q", got)
			}
			b.post(t, path, url.Values{"csrf_token": {b.csrf(t)}}).wantStatus(t, http.StatusNotFound)
			if got, _ := db.APIKeys.Get(ctx, k.WorkspaceID, k.ID); got.RevokedAt != nil {
				t.Fatalf("key %q of another workspace was revoked", k.Name)
			}
		}
		// Mallory cannot see or revoke Alice's keys, nor Alice Mallory's.
		attempt(mallory, mainKey)
		attempt(mallory, otherKey)
		attempt(alice, malloryKey)
		// A key of Alice's other workspace is out of reach while the console shows her main one.
		attempt(alice, otherKey)
		for _, id := range []string{"key_does_not_exist", "..%2f..%2fapi"} {
			alice.get(t, "/user/api/keys/"+id+"/revoke").wantStatus(t, http.StatusNotFound)
		}
		if status, _ := e.apiCall(t, mallorySecret); status != http.StatusOK {
			t.Fatalf("Mallory's key stopped working: %d", status)
		}

		// Switching to the other workspace makes its key reachable, and only then.
		alice.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {aliceOther.ID}}).wantRedirect(t, "/user/api")
		alice.get(t, "/user/api/keys/"+otherKey.ID+"/revoke").wantStatus(t, http.StatusOK)
		attempt(alice, mainKey)
	})
}

// Revoking in the console must take effect on the very next request to the same server, on both databases: the process
// that revoked a key never serves it again from its cache, whatever the notification delay. One revocation rarely shows
// a lag, so this repeats the cycle.
func TestRevokeTakesEffectOnTheNextRequest(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "cache")
		ws := b.newWorkspace(t, "Cache")
		csrf := b.csrf(t)
		const rounds = 150
		leaked := 0
		for i := 0; i < rounds; i++ {
			k, secret := storeKey(t, db, store.NewAPIKey{WorkspaceID: ws.ID, Name: "round",
				Scopes: []string{"models:read"}, CreatedBy: "cli"})
			if status, code := e.apiCall(t, secret); status != http.StatusOK {
				t.Fatalf("before revoking: %d %s", status, code)
			}
			b.post(t, "/user/api/keys/"+k.ID+"/revoke", url.Values{"csrf_token": {csrf}}).wantStatus(t, http.StatusSeeOther)
			if status, _ := e.apiCall(t, secret); status == http.StatusOK {
				leaked++
			}
		}
		if leaked > 0 {
			t.Fatalf("in %d of %d rounds the key revoked in the console still worked on the next API request to the same server "+
				"(the verifier trusted its cache until the PostgreSQL notification arrived)", leaked, rounds)
		}
	})
}

// Key names are up to 100 characters; the pages show them whole, escaped.
func TestKeyNamesAreShownWholeAndEscaped(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	b.newUser(t, "names")
	ws := b.newWorkspace(t, "Names")
	for _, name := range []string{`<img src=x onerror=alert(1)> "quoted" & more`, strings.Repeat("€", 60)} {
		t.Run(name, func(t *testing.T) {
			r := b.createKey(t, keyForm(name, "read", "30d", nil))
			r.wantStatus(t, http.StatusCreated)
			k := keys(t, e.db, ws.ID)[0]
			if k.Name != name {
				t.Fatalf("stored name = %q", k.Name)
			}
			confirm := b.get(t, "/user/api/keys/"+k.ID+"/revoke")
			for _, p := range []*resp{r, b.get(t, "/user/api"), confirm} {
				if strings.Contains(p.body, "<img src=x") {
					t.Fatalf("%s shows the name unescaped", p.Request.URL)
				}
				p.wantText(t, name)
			}
			res := b.post(t, "/user/api/keys/"+k.ID+"/revoke", url.Values{"csrf_token": {confirm.field(t, "csrf_token")}})
			res.wantStatus(t, http.StatusSeeOther)
			p := b.get(t, res.Header.Get("Location"))
			if strings.Contains(p.body, "<img src=x") {
				t.Fatal("the revoke notice shows the name unescaped")
			}
			if n := p.notice(); !strings.Contains(n, "“"+name+"”") {
				t.Errorf("notice = %q, want the whole name %q (the notice cuts names at 100 bytes, not characters)", n, name)
			}
		})
	}
}

// A secret key limited to instances from the create form: the form lists the workspace's instances, the key keeps
// the ones checked and the table says so; an instance of another workspace is refused with a reason and nothing
// is created; a browser key ignores the checkboxes.
func TestCreateKeyLimitedToInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := newChannels(t, db)
		e := newEnv(t, db, console.Config{Channels: svc})
		b := e.browser()
		b.newUser(t, "limits")
		ws := b.newWorkspace(t, "Limits")
		if strings.Contains(b.get(t, "/user/api").body, `id="key-instances"`) {
			t.Fatal("a workspace without instances offers instances to limit a key to")
		}
		mk := func(wsID, name string) string {
			inst, err := svc.Create(ctx, wsID, channels.NewInstance{Name: name, Provider: "sandbox"})
			if err != nil {
				t.Fatal(err)
			}
			return inst.ID
		}
		support, sales := mk(ws.ID, "Support"), mk(ws.ID, "Sales")
		page := b.get(t, "/user/api")
		for _, id := range []string{support, sales} {
			if !strings.Contains(page.body, `name="instances" value="`+id+`"`) {
				t.Fatalf("the form does not offer %s", id)
			}
		}

		form := keyForm("Support only", "messaging", "30d", nil)
		form["instances"] = []string{support}
		r := b.createKey(t, form)
		r.wantStatus(t, http.StatusCreated)
		k := keys(t, db, ws.ID)[0]
		if !slices.Equal(k.InstanceIDs, []string{support}) {
			t.Fatalf("the key reaches %v, want [%s]", k.InstanceIDs, support)
		}
		if row := strings.Join(b.get(t, "/user/api").keyRow(k.ID), " "); !strings.Contains(row, "1 instance only") {
			t.Fatalf("the key's row does not say it is limited: %q", row)
		}

		// A browser key reaches the one instance of its target, if any: the checkboxes are not its.
		browserForm := url.Values{"name": {"Site"}, "kind": {"browser"}, "browser_scope": {"links:create"},
			"origins": {"https://shop.example.com"}, "expiry": {"30d"}, "instances": {support}}
		b.createKey(t, browserForm).wantStatus(t, http.StatusCreated)
		if bk := keys(t, db, ws.ID)[0]; bk.Name != "Site" || len(bk.InstanceIDs) != 0 {
			t.Fatalf("browser key %q reaches %v, want every instance", bk.Name, bk.InstanceIDs)
		}

		// Another workspace's instance: refused, nothing created.
		other := e.browser()
		other.newUser(t, "elsewhere")
		foreign := mk(other.newWorkspace(t, "Other").ID, "Foreign")
		before := len(keys(t, db, ws.ID))
		form = keyForm("Foreign", "messaging", "30d", nil)
		form["instances"] = []string{foreign}
		bad := b.createKey(t, form)
		bad.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(bad.alert(), "Limit the key to instances of this workspace") {
			t.Fatalf("alert = %q", bad.alert())
		}
		if n := len(keys(t, db, ws.ID)); n != before {
			t.Fatalf("a refused form created a key (%d keys, was %d)", n, before)
		}
	})
}
