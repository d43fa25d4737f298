package console_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

var ctx = context.Background()

// password is a strong password used by every test user unless a test says otherwise.
const password = "correct horse battery staple"

// env is the real server (API and console) over a real database, reached over real HTTP.
type env struct {
	db  *store.DB
	srv *handlers.Server
	url string
	// box is the server key (webhook secrets, stream tokens).
	box *sealbox.Box
}

// newEnv starts handlers.New + console.New + Mount over db with one key verifier and workspaces service, and runs
// the verifier and the console's background work, as serve does. cfg's zero values take the defaults.
func newEnv(t *testing.T, db *store.DB, cfg console.Config) *env {
	t.Helper()
	return newEnvWith(t, db, cfg, nil)
}

// newEnvWith is newEnv behind reverse proxies on the given networks: their X-Forwarded-For names the client.
func newEnvWith(t *testing.T, db *store.DB, cfg console.Config, proxies []*net.IPNet) *env {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Webhooks may reach receivers on this machine, as the tests run them.
	a := apptest.New(t, db, app.Config{Logger: discard, BaseURL: "https://sb.test", Egress: apptest.Loopback})
	verifier := a.Verifier
	if cfg.Automation == nil {
		cfg.Automation = a.Automation
	}
	srv, err := handlers.New(handlers.Config{Logger: discard, Verifier: verifier, Box: a.Box, Events: a.Events,
		Links: a.Links, Webhooks: a.Webhooks, Channels: a.Messaging, Automation: cfg.Automation,
		TrustedProxies: proxies, Streams: a.Streams, LLM: a.LLM, Bots: a.Bots}, db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks = a.Webhooks
	// The event stream, for the pages that follow it (the console's stream tokens are sealed with the same key).
	hub := a.Streams
	if cfg.StreamBox == nil {
		cfg.StreamBox = a.Box
	}
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	cfg.Workspaces = a.Workspaces
	cfg.Links = a.Links
	con, err := console.New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(con.Register)
	running, stop := context.WithCancel(ctx)
	var jobs sync.WaitGroup
	runHub := func(ctx context.Context) error { hub.Run(ctx); return nil }
	for _, run := range []func(context.Context) error{verifier.Run, con.Run, runHub} {
		jobs.Go(func() {
			if err := run(running); err != nil {
				t.Error(err)
			}
		})
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		stop()
		jobs.Wait()
	})
	return &env{db: db, srv: srv, url: hs.URL, box: a.Box}
}

// browser is one browser: its own cookie jar, and redirects are never followed (tests check Location).
type browser struct {
	e      *env
	jar    *cookiejar.Jar
	client *http.Client
	// header is sent with every request of this browser.
	header http.Header
}

func (e *env) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		panic(err)
	}
	return &browser{e: e, jar: jar, header: http.Header{}, client: &http.Client{
		Jar:           jar,
		Timeout:       60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// resp is a response with its body read.
type resp struct {
	*http.Response
	body string
}

func (b *browser) do(t *testing.T, method, path string, form url.Values, header http.Header) *resp {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range b.header {
		req.Header[k] = vs
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &resp{Response: res, body: string(raw)}
}

func (b *browser) get(t *testing.T, path string) *resp {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil, nil)
}

func (b *browser) post(t *testing.T, path string, form url.Values) *resp {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return b.do(t, http.MethodPost, path, form, nil)
}

// cookie returns the cookie the jar would send to /user, or nil.
func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.e.url + "/user/")
	for _, c := range b.jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// csrf returns the session's CSRF token, read from a signed-in page.
func (b *browser) csrf(t *testing.T) string {
	t.Helper()
	p := b.get(t, "/user/account")
	p.wantStatus(t, http.StatusOK)
	return p.field(t, "csrf_token")
}

// postCSRF posts a form of a signed-in page with the session's CSRF token.
func (b *browser) postCSRF(t *testing.T, path string, form url.Values) *resp {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf_token", b.csrf(t))
	return b.post(t, path, form)
}

// signUp fills the sign-up form the way a person does (GET, then POST with the page's token).
func (b *browser) signUp(t *testing.T, email, pw string) *resp {
	t.Helper()
	p := b.get(t, "/user/sign-up")
	p.wantStatus(t, http.StatusOK)
	return b.post(t, "/user/sign-up", url.Values{"csrf_token": {p.field(t, "csrf_token")}, "email": {email}, "password": {pw}})
}

// signIn fills the sign-in form; next, when given, is posted as the hidden next field.
func (b *browser) signIn(t *testing.T, email, pw string, next ...string) *resp {
	t.Helper()
	p := b.get(t, "/user/sign-in")
	p.wantStatus(t, http.StatusOK)
	form := url.Values{"csrf_token": {p.field(t, "csrf_token")}, "email": {email}, "password": {pw}}
	if len(next) > 0 {
		form.Set("next", next[0])
	}
	return b.post(t, "/user/sign-in", form)
}

// user is a console account created through the sign-up form.
type user struct {
	id, email, password string
}

// newUser signs up a fresh user in b (b is signed in afterwards).
func (b *browser) newUser(t *testing.T, name string) user {
	t.Helper()
	email := uniqueEmail(name)
	r := b.signUp(t, email, password)
	r.wantRedirect(t, "/user/workspaces")
	u, err := b.e.db.Users.ByEmail(ctx, email)
	if err != nil {
		t.Fatalf("the signed-up user is not stored: %v", err)
	}
	return user{id: u.ID, email: email, password: password}
}

// newWorkspace creates a workspace through the form; the console switches to it.
func (b *browser) newWorkspace(t *testing.T, name string) store.MemberWorkspace {
	t.Helper()
	r := b.postCSRF(t, "/user/workspaces", url.Values{"name": {name}})
	r.wantRedirect(t, "/user/api?workspace-created=1")
	return b.currentWorkspace(t)
}

// currentWorkspace is the workspace the session row points at.
func (b *browser) currentWorkspace(t *testing.T) store.MemberWorkspace {
	t.Helper()
	ses := b.session(t)
	if ses.WorkspaceID == nil {
		t.Fatal("the session has no workspace")
	}
	ws, err := b.e.db.Workspaces.ForUser(ctx, ses.UserID)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == *ses.WorkspaceID {
			return w
		}
	}
	t.Fatalf("the session's workspace %s is not one of the user's", *ses.WorkspaceID)
	return store.MemberWorkspace{}
}

// session is the stored session of b's cookie.
func (b *browser) session(t *testing.T) store.Session {
	t.Helper()
	ck := b.cookie("sb_session")
	if ck == nil {
		t.Fatal("no session cookie")
	}
	s, err := b.e.db.Sessions.ByTokenHash(ctx, tokenHash(ck.Value))
	if err != nil {
		t.Fatalf("session of the cookie: %v", err)
	}
	return s
}

func uniqueEmail(name string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return name + "-" + hex.EncodeToString(b) + "@example.com"
}

func (r *resp) wantStatus(t *testing.T, status int) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status = %d, want %d; Location %q; body:\n%s", r.Request.Method, r.Request.URL.Path,
			r.StatusCode, status, r.Header.Get("Location"), excerpt(r.body))
	}
}

// wantRedirect asserts a 303 See Other to exactly location.
func (r *resp) wantRedirect(t *testing.T, location string) {
	t.Helper()
	r.wantStatus(t, http.StatusSeeOther)
	if got := r.Header.Get("Location"); got != location {
		t.Fatalf("%s %s: Location = %q, want %q", r.Request.Method, r.Request.URL.Path, got, location)
	}
}

// location parses the Location header.
func (r *resp) location(t *testing.T) *url.URL {
	t.Helper()
	u, err := url.Parse(r.Header.Get("Location"))
	if err != nil {
		t.Fatalf("Location %q: %v", r.Header.Get("Location"), err)
	}
	return u
}

// text is the body without tags and with HTML entities decoded, for looking for what a person reads.
func (r *resp) text() string { return html.UnescapeString(stripTags(r.body)) }

func (r *resp) wantText(t *testing.T, s string) {
	t.Helper()
	if !strings.Contains(r.text(), s) {
		t.Fatalf("%s %s (%d): page does not say %q:\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, s, excerpt(r.body))
	}
}

func (r *resp) wantNoText(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(r.text(), s) || strings.Contains(r.body, s) {
		t.Fatalf("%s %s (%d): page shows %q but must not", r.Request.Method, r.Request.URL.Path, r.StatusCode, s)
	}
}

// alert is the text of the page's error message (role="alert"), or "".
func (r *resp) alert() string { return r.roleText("alert") }

// notice is the text of the page's notice (role="status"), or "".
func (r *resp) notice() string { return r.roleText("status") }

func (r *resp) roleText(role string) string {
	m := regexp.MustCompile(`(?s)<div class="[^"]*" role="` + role + `">(.*?)</div>`).FindStringSubmatch(r.body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

var (
	inputTag = regexp.MustCompile(`<input\b[^>]*>`)
	attr     = regexp.MustCompile(`([a-z_-]+)(?:="([^"]*)")?`)
)

// inputs returns the attributes of every <input> of the page, in order.
func (r *resp) inputs() []map[string]string {
	var out []map[string]string
	for _, tag := range inputTag.FindAllString(r.body, -1) {
		attrs := map[string]string{}
		for _, m := range attr.FindAllStringSubmatch(strings.TrimPrefix(tag, "<input"), -1) {
			attrs[m[1]] = html.UnescapeString(m[2])
		}
		out = append(out, attrs)
	}
	return out
}

// field returns the value of the first input named name; the test fails when there is none.
func (r *resp) field(t *testing.T, name string) string {
	t.Helper()
	return r.inputValue(t, "name", name)
}

// fieldByID returns the value of the input with that id (a page with several forms has several inputs of a name);
// the test fails when there is none.
func (r *resp) fieldByID(t *testing.T, id string) string {
	t.Helper()
	return r.inputValue(t, "id", id)
}

// inputValue returns the value of the first input whose attribute is value; the test fails when there is none.
func (r *resp) inputValue(t *testing.T, attribute, value string) string {
	t.Helper()
	for _, in := range r.inputs() {
		if in[attribute] == value {
			return in["value"]
		}
	}
	t.Fatalf("%s %s: no input with %s %q:\n%s", r.Request.Method, r.Request.URL.Path, attribute, value, excerpt(r.body))
	return ""
}

// checked returns the value of the checked radio button of group name, or "".
func (r *resp) checked(name string) string {
	for _, in := range r.inputs() {
		if _, ok := in["checked"]; ok && in["name"] == name {
			return in["value"]
		}
	}
	return ""
}

// selected returns the value of the selected option of the page's select named name, or "".
func (r *resp) selected(name string) string {
	m := regexp.MustCompile(`(?s)<select[^>]*name="` + regexp.QuoteMeta(name) + `"[^>]*>(.*?)</select>`).FindStringSubmatch(r.body)
	if m == nil {
		return ""
	}
	o := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(m[1])
	if o == nil {
		return ""
	}
	return html.UnescapeString(o[1])
}

// elementText returns the text content of the element with that id, and how many elements have the id.
func (r *resp) elementText(id string) (string, int) {
	re := regexp.MustCompile(`(?s)<(\w+)\b[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>(.*?)</(\w+)>`)
	all := re.FindAllStringSubmatch(r.body, -1)
	if len(all) == 0 {
		return "", 0
	}
	return strings.TrimSpace(html.UnescapeString(stripTags(all[0][2]))), len(all)
}

var tags = regexp.MustCompile(`<[^>]*>`)

func stripTags(s string) string { return tags.ReplaceAllString(s, "") }

func excerpt(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

// userCount is how many users have that email (normalised).
func userCount(t *testing.T, db *store.DB, email string) int {
	t.Helper()
	n, err := db.Bun().NewSelect().Table("users").Where("email = ?", store.NormalizeEmail(email)).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// sessionCount is how many sessions a user has.
func sessionCount(t *testing.T, db *store.DB, userID string) int {
	t.Helper()
	n, err := db.Bun().NewSelect().Table("sessions").Where("user_id = ?", userID).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// tokenHash is how the console stores a session token: hex SHA-256 (the cookie holds the token, the table its hash).
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
