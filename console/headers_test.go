package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store/storetest"
)

// Every console page, error pages included, forbids framing and caching and sends a strict CSP.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	anon := e.browser()
	b := e.browser()
	b.newUser(t, "headers")
	b.newWorkspace(t, "Headers")
	created := b.createKey(t, keyForm("Header key", "full", "90d", nil))
	created.wantStatus(t, http.StatusCreated)
	k := keys(t, e.db, b.currentWorkspace(t).ID)[0]

	pages := map[string]*resp{
		"sign-in":              anon.get(t, "/user/sign-in"),
		"sign-up":              anon.get(t, "/user/sign-up"),
		"sign-in 401":          anon.signIn(t, uniqueEmail("x"), "Wrong password 1"),
		"sign-up 403":          anon.post(t, "/user/sign-up", url.Values{"email": {"a@example.com"}}),
		"api":                  b.get(t, "/user/api"),
		"api with new secret":  created,
		"api 422":              b.createKey(t, keyForm("", "full", "90d", nil)),
		"workspaces":           b.get(t, "/user/workspaces"),
		"account":              b.get(t, "/user/account"),
		"revoke confirmation":  b.get(t, "/user/api/keys/"+k.ID+"/revoke"),
		"revoke 404":           b.get(t, "/user/api/keys/key_nope/revoke"),
		"switch 404":           b.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {"ws_nope"}}),
		"CSRF 403":             b.post(t, "/user/workspaces", url.Values{"name": {"x"}}),
		"password change 401":  b.postCSRF(t, "/user/account/password", url.Values{"current_password": {"nope nope nope"}}),
		"workspace name 422":   b.postCSRF(t, "/user/workspaces", url.Values{"name": {""}}),
		"resubmitted form 409": b.post(t, "/user/api/keys", url.Values{"csrf_token": {b.csrf(t)}, "name": {"x"}, "preset": {"full"}, "expiry": {"30d"}}),
	}
	for name, r := range pages {
		t.Run(name, func(t *testing.T) {
			h := r.Header
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(ct, "charset=UTF-8") {
				t.Errorf("Content-Type = %q", ct)
			}
			csp := h.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
				if !strings.Contains(csp, d) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy %q allows inline code", csp)
			}
			if got := h.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("X-Frame-Options = %q, want DENY", got)
			}
			if got := h.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			if got := h.Get("Referrer-Policy"); got == "" || got == "unsafe-url" {
				t.Errorf("Referrer-Policy = %q", got)
			}
			if h.Get("X-Request-Id") == "" {
				t.Error("console responses carry no X-Request-Id (the server's middleware does not run)")
			}
			// The CSP forbids inline scripts, inline styles and handlers: the markup must not need them.
			if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]|<script>|\sstyle="|\son[a-z]+="`).MatchString(r.body) {
				t.Error("the page has inline script or style the CSP blocks")
			}
			if !strings.Contains(r.body, `<html lang="en">`) {
				t.Error("the page does not declare its language")
			}
		})
	}
}

// Every form field has a real label, and the buttons say what they do (browser tests find them by role and name).
func TestFormsAreLabelled(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	anon := e.browser()
	b.newUser(t, "labels")
	b.newWorkspace(t, "Labels")
	b.createKey(t, keyForm("Label key", "full", "90d", nil)).wantStatus(t, http.StatusCreated)
	k := keys(t, e.db, b.currentWorkspace(t).ID)[0]
	for _, r := range []*resp{anon.get(t, "/user/sign-in"), anon.get(t, "/user/sign-up"), b.get(t, "/user/api"),
		b.get(t, "/user/workspaces"), b.get(t, "/user/account"), b.get(t, "/user/api/keys/"+k.ID+"/revoke")} {
		labels := map[string]bool{}
		for _, m := range regexp.MustCompile(`<label for="([^"]+)"`).FindAllStringSubmatch(r.body, -1) {
			labels[m[1]] = true
		}
		for _, in := range r.inputs() {
			if in["type"] == "hidden" || in["type"] == "radio" {
				continue // radios are wrapped in their label or carry aria-label
			}
			if _, hidden := in["hidden"]; hidden {
				continue
			}
			if !labels[in["id"]] {
				t.Errorf("%s: input %v has no <label for>", r.Request.URL.Path, in)
			}
		}
		for _, m := range regexp.MustCompile(`(?s)<button[^>]*>(.*?)</button>`).FindAllStringSubmatch(r.body, -1) {
			if strings.TrimSpace(stripTags(m[1])) == "" {
				t.Errorf("%s: a button without text: %s", r.Request.URL.Path, m[0])
			}
		}
	}
}

func TestRedirectsAndAssets(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	for _, path := range []string{"/", "/user", "/user/"} {
		r := b.get(t, path)
		if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/user/api" {
			t.Errorf("GET %s = %d → %q, want 302 → /user/api", path, r.StatusCode, r.Header.Get("Location"))
		}
	}
	for path, ctype := range map[string]string{
		"/user/static/console.css": "text/css", "/user/static/console.js": "javascript", "/user/static/favicon.svg": "image/svg+xml",
	} {
		r := b.get(t, path)
		r.wantStatus(t, http.StatusOK)
		if !strings.Contains(r.Header.Get("Content-Type"), ctype) || len(r.body) == 0 {
			t.Errorf("GET %s: Content-Type %q, %d bytes", path, r.Header.Get("Content-Type"), len(r.body))
		}
	}
	// Every asset the pages link is served from the binary (the console works offline, no CDN).
	page := b.get(t, "/user/sign-in")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page.body, -1) {
		ref := m[1]
		if strings.HasPrefix(ref, "http:") || strings.HasPrefix(ref, "https:") || strings.HasPrefix(ref, "//") {
			t.Errorf("the page loads %s from another origin", ref)
		}
		if strings.HasPrefix(ref, "/user/static/") {
			b.get(t, ref).wantStatus(t, http.StatusOK)
		}
	}
	r := b.get(t, "/user/static/nope.js")
	r.wantStatus(t, http.StatusNotFound)
}

// The assets directory lists nothing: only its files are served.
func TestStaticDirectoryIsNotListed(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	if r := b.get(t, "/user/static/"); r.StatusCode != http.StatusNotFound || strings.Contains(r.body, "console.css") {
		t.Errorf("GET /user/static/: %d %q", r.StatusCode, r.body)
	}
	if r := b.get(t, "/user/static"); strings.Contains(r.body, "console.css") {
		t.Errorf("GET /user/static lists the assets: %q", r.body)
	}
}
