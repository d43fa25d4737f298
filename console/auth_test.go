package console_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestSignUp(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		email := uniqueEmail("ada")
		r := b.signUp(t, email, password)
		r.wantRedirect(t, "/user/workspaces")

		u, err := db.Users.ByEmail(ctx, email)
		if err != nil {
			t.Fatalf("user not stored: %v", err)
		}
		if strings.Contains(u.PasswordHash, password) || !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
			t.Errorf("password hash = %q, want an argon2id PHC string", u.PasswordHash)
		}

		ck := setCookie(r, "sb_session")
		if ck == nil || ck.Value == "" {
			t.Fatalf("sign-up set no session cookie: %v", r.Header.Values("Set-Cookie"))
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/user" || ck.Secure {
			t.Errorf("session cookie = %+v, want HttpOnly, SameSite=Lax, Path=/user, not Secure over plain http", ck)
		}
		if ck.MaxAge != int((7 * 24 * time.Hour).Seconds()) {
			t.Errorf("session cookie Max-Age = %d, want 7 days", ck.MaxAge)
		}
		if n := sessionCount(t, db, u.ID); n != 1 {
			t.Errorf("sessions = %d, want 1", n)
		}
		ses := b.session(t)
		if ses.UserID != u.ID || ses.TokenHash == ck.Value {
			t.Errorf("session row = %+v: wrong user, or the raw token is stored", ses)
		}
		if ses.CSRFToken == "" || ses.WorkspaceID != nil {
			t.Errorf("session row = %+v, want a CSRF token and no workspace yet", ses)
		}
		// The double-submit CSRF cookie of the signed-out form is cleared.
		if ck := setCookie(r, "sb_csrf"); ck == nil || ck.MaxAge >= 0 {
			t.Errorf("sign-up does not clear the sign-up form's CSRF cookie: %v", ck)
		}

		// The session works: the workspaces page greets the user and offers to create the first workspace.
		p := b.get(t, "/user/workspaces")
		p.wantStatus(t, http.StatusOK)
		p.wantText(t, email)
		p.wantText(t, "Create your first workspace")
	})
}

func TestSignUpKeepsNext(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	p := b.get(t, "/user/sign-up?next=/user/account")
	p.wantStatus(t, http.StatusOK)
	if got := p.field(t, "next"); got != "/user/account" {
		t.Fatalf("next = %q", got)
	}
	r := b.post(t, "/user/sign-up", url.Values{"csrf_token": {p.field(t, "csrf_token")}, "email": {uniqueEmail("nx")},
		"password": {password}, "next": {"/user/account"}})
	r.wantRedirect(t, "/user/account")

	b2 := e.browser()
	p = b2.get(t, "/user/sign-up")
	r = b2.post(t, "/user/sign-up", url.Values{"csrf_token": {p.field(t, "csrf_token")}, "email": {uniqueEmail("nx")},
		"password": {password}, "next": {"https://evil.example/"}})
	r.wantRedirect(t, "/user/workspaces")
}

func TestSignUpSecureCookie(t *testing.T) {
	db := storetest.SQLite(t)
	t.Run("X-Forwarded-Proto https", func(t *testing.T) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		p := b.get(t, "/user/sign-up")
		r := b.do(t, http.MethodPost, "/user/sign-up", url.Values{"csrf_token": {p.field(t, "csrf_token")},
			"email": {uniqueEmail("tls")}, "password": {password}}, http.Header{"X-Forwarded-Proto": {"https"}})
		r.wantRedirect(t, "/user/workspaces")
		if ck := setCookie(r, "sb_session"); ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
			t.Fatalf("session cookie behind an https proxy = %+v, want Secure, HttpOnly, SameSite=Lax", ck)
		}
	})
	t.Run("https BaseURL", func(t *testing.T) {
		e := newEnv(t, db, console.Config{BaseURL: "https://switchboard.example"})
		b := e.browser()
		p := b.get(t, "/user/sign-up")
		csrf := setCookie(p, "sb_csrf")
		if csrf == nil || !csrf.Secure {
			t.Fatalf("CSRF cookie with an https BaseURL = %+v, want Secure", csrf)
		}
		// The jar does not send Secure cookies over http: send the form's cookie by hand.
		r := b.do(t, http.MethodPost, "/user/sign-up", url.Values{"csrf_token": {p.field(t, "csrf_token")},
			"email": {uniqueEmail("tls")}, "password": {password}}, http.Header{"Cookie": {"sb_csrf=" + csrf.Value}})
		r.wantRedirect(t, "/user/workspaces")
		if ck := setCookie(r, "sb_session"); ck == nil || !ck.Secure {
			t.Fatalf("session cookie with an https BaseURL = %+v, want Secure", ck)
		}
	})
	t.Run("plain http", func(t *testing.T) {
		e := newEnv(t, db, console.Config{BaseURL: "http://localhost:8080"})
		p := e.browser().get(t, "/user/sign-up")
		if ck := setCookie(p, "sb_csrf"); ck == nil || ck.Secure || !ck.HttpOnly || ck.Path != "/user" {
			t.Fatalf("CSRF cookie over http = %+v, want HttpOnly, Path=/user, not Secure", ck)
		}
	})
}

func TestSignUpDuplicateEmail(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		first := e.browser().newUser(t, "grace")

		b := e.browser()
		other := "Another password 42"
		r := b.signUp(t, "  "+strings.ToUpper(first.email)+" ", other)
		r.wantStatus(t, http.StatusConflict)
		if got := r.alert(); !strings.Contains(got, "already exists") || !strings.Contains(got, "Sign in") {
			t.Errorf("alert = %q, want a clear 'already exists, sign in' message", got)
		}
		r.wantNoText(t, other)
		if setCookie(r, "sb_session") != nil || b.cookie("sb_session") != nil {
			t.Error("a failed sign-up set a session cookie")
		}
		if n := userCount(t, db, first.email); n != 1 {
			t.Errorf("users with %s = %d, want 1", first.email, n)
		}
		u, err := db.Users.ByEmail(ctx, first.email)
		if err != nil || u.ID != first.id {
			t.Fatalf("the first account changed: %+v %v", u, err)
		}
		// The first password still works and the second one never did.
		e.browser().signIn(t, first.email, other).wantStatus(t, http.StatusUnauthorized)
		e.browser().signIn(t, first.email, first.password).wantRedirect(t, "/user/api")
	})
}

func TestSignUpRejectsWeakPasswords(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		tests := []struct {
			name, local, password, msg string
		}{
			{"too short", "weak", "Sh0rt!pw", "at least 10 characters"},
			{"nine characters", "weak", "123456789", "at least 10 characters"},
			{"too long", "weak", strings.Repeat("x", 257), "at most 256 characters"},
			{"common", "weak", "password123", "most common"},
			{"common, other case", "weak", "QwertyUiop", "most common"},
			{"contains the email", "marguerite", "marguerite-is-great", "must not contain your email"},
			{"contains the email, other case", "marguerite", "xxMARGUERITExx", "must not contain your email"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				b := e.browser()
				email := uniqueEmail(tt.local)
				if tt.local == "marguerite" {
					email = "marguerite@" + strings.TrimSuffix(uniqueEmail("x"), "@example.com") + ".example.com"
				}
				r := b.signUp(t, email, tt.password)
				r.wantStatus(t, http.StatusUnprocessableEntity)
				if got := r.alert(); !strings.Contains(got, tt.msg) {
					t.Errorf("alert = %q, want %q", got, tt.msg)
				}
				r.wantNoText(t, tt.password)
				if got := r.field(t, "email"); got != email {
					t.Errorf("the form lost the email: %q", got)
				}
				if got := r.field(t, "password"); got != "" {
					t.Errorf("the password field is filled again: %q", got)
				}
				if n := userCount(t, db, email); n != 0 {
					t.Errorf("a user was stored")
				}
				if setCookie(r, "sb_session") != nil {
					t.Error("a session cookie was set")
				}
			})
		}
	})
}

func TestSignUpRejectsInvalidEmails(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	for _, email := range []string{"", "not-an-email", "ada@", "@example.com", "Ada <ada@example.com>",
		"ada@example.com, bob@example.com", strings.Repeat("a", 250) + "@example.com"} {
		t.Run(email, func(t *testing.T) {
			r := e.browser().signUp(t, email, password)
			r.wantStatus(t, http.StatusUnprocessableEntity)
			if got := r.alert(); !strings.Contains(got, "valid email address") {
				t.Errorf("alert = %q", got)
			}
			r.wantNoText(t, password)
		})
	}
	n, err := e.db.Bun().NewSelect().Table("users").Count(ctx)
	if err != nil || n != 0 {
		t.Fatalf("users = %d (%v), want none", n, err)
	}
}

func TestSignUpCSRF(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		victim := e.browser()
		token := victim.get(t, "/user/sign-up").field(t, "csrf_token")
		if len(token) < 32 {
			t.Fatalf("CSRF token %q is too short", token)
		}
		attacker := e.browser()
		attacker.get(t, "/user/sign-up") // has a CSRF cookie of its own
		tests := []struct {
			name string
			b    *browser
			form url.Values
		}{
			{"no token", victim, url.Values{}},
			{"empty token", victim, url.Values{"csrf_token": {""}}},
			{"wrong token", victim, url.Values{"csrf_token": {strings.Repeat("A", len(token))}}},
			{"token of another browser", attacker, url.Values{"csrf_token": {token}}},
			{"no cookie", e.browser(), url.Values{"csrf_token": {token}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				email := uniqueEmail("csrf")
				tt.form.Set("email", email)
				tt.form.Set("password", password)
				r := tt.b.post(t, "/user/sign-up", tt.form)
				r.wantStatus(t, http.StatusForbidden)
				if got := r.alert(); !strings.Contains(got, "expired") {
					t.Errorf("alert = %q, want the form-expired message", got)
				}
				r.wantNoText(t, password)
				if n := userCount(t, db, email); n != 0 {
					t.Errorf("a user was stored")
				}
				// The re-rendered form carries a token that works.
				if got := r.field(t, "csrf_token"); got == "" {
					t.Error("the re-rendered form has no CSRF token")
				}
			})
		}
		// The victim's own token still works afterwards.
		r := victim.post(t, "/user/sign-up", url.Values{"csrf_token": {token}, "email": {uniqueEmail("csrf")}, "password": {password}})
		r.wantRedirect(t, "/user/workspaces")
	})
}

func TestSignUpLimitPerAddress(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	// Only well-formed sign-ups count: a typo must not lock out colleagues behind the same address.
	for i := 0; i < 5; i++ {
		b.signUp(t, uniqueEmail("typo"), "short").wantStatus(t, http.StatusUnprocessableEntity)
	}
	for i := 0; i < 10; i++ {
		e.browser().signUp(t, uniqueEmail("many"), password).wantStatus(t, http.StatusSeeOther)
	}
	email := uniqueEmail("many")
	r := b.signUp(t, email, password)
	r.wantStatus(t, http.StatusTooManyRequests)
	if got := r.alert(); !strings.Contains(got, "Try again in") {
		t.Errorf("alert = %q, want a 'Try again in' message", got)
	}
	if n := userCount(t, e.db, email); n != 0 {
		t.Error("a user was stored past the limit")
	}
}

// The per-address limits must not trust a client's own X-Forwarded-For: anyone can send a new one with every request.
func TestSignUpLimitIgnoresClientForwardedFor(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	for i := 0; i < 10; i++ {
		e.browser().signUp(t, uniqueEmail("many"), password).wantStatus(t, http.StatusSeeOther)
	}
	b.signUp(t, uniqueEmail("many"), password).wantStatus(t, http.StatusTooManyRequests)
	b.header.Set("X-Forwarded-For", "198.51.100.7")
	r := b.signUp(t, uniqueEmail("many"), password)
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("with a made-up X-Forwarded-For the limited client is served again (status %d): the address "+
			"limits of sign-up and sign-in can be bypassed by any client", r.StatusCode)
	}
}

func TestSignIn(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		u := e.browser().newUser(t, "lin")

		b := e.browser()
		r := b.signIn(t, "  "+strings.ToUpper(u.email), u.password)
		r.wantRedirect(t, "/user/api")
		ck := setCookie(r, "sb_session")
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/user" || ck.Secure {
			t.Fatalf("session cookie = %+v", ck)
		}
		if n := sessionCount(t, db, u.id); n != 2 {
			t.Errorf("sessions = %d, want 2 (sign-up and sign-in)", n)
		}
		b.get(t, "/user/api").wantStatus(t, http.StatusOK)
	})
}

func TestSignInFailuresLookAlike(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		u := e.browser().newUser(t, "kim")

		wrong := e.browser().signIn(t, u.email, "Not the password 1")
		wrong.wantStatus(t, http.StatusUnauthorized)
		unknown := e.browser().signIn(t, uniqueEmail("nobody"), "Not the password 1")
		unknown.wantStatus(t, http.StatusUnauthorized)
		if wrong.alert() == "" || wrong.alert() != unknown.alert() {
			t.Errorf("wrong password says %q, unknown email says %q: they must say the same", wrong.alert(), unknown.alert())
		}
		for _, r := range []*resp{wrong, unknown} {
			r.wantNoText(t, "Not the password 1")
			if setCookie(r, "sb_session") != nil {
				t.Error("a failed sign-in set a session cookie")
			}
		}
		if got := wrong.field(t, "email"); got != u.email {
			t.Errorf("the form lost the email: %q", got)
		}
		if n := sessionCount(t, db, u.id); n != 1 {
			t.Errorf("sessions = %d, want only the sign-up's", n)
		}
		// Not even the dummy password used for unknown accounts signs anyone in.
		e.browser().signIn(t, uniqueEmail("nobody"), "switchboard-dummy-password").wantStatus(t, http.StatusUnauthorized)
	})
}

func TestSignInCSRF(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	u := e.browser().newUser(t, "csrf")
	b := e.browser()
	b.get(t, "/user/sign-in")
	r := b.post(t, "/user/sign-in", url.Values{"email": {u.email}, "password": {u.password}})
	r.wantStatus(t, http.StatusForbidden)
	r.wantNoText(t, u.password)
	if setCookie(r, "sb_session") != nil {
		t.Fatal("signed in without a CSRF token")
	}
	r = b.post(t, "/user/sign-in", url.Values{"csrf_token": {"x"}, "email": {u.email}, "password": {u.password}})
	r.wantStatus(t, http.StatusForbidden)
	if n := sessionCount(t, e.db, u.id); n != 1 {
		t.Fatalf("sessions = %d, want only the sign-up's", n)
	}
}

func TestSignInLimitPerAccount(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		u := e.browser().newUser(t, "limit")
		for i := 1; i <= 5; i++ {
			e.browser().signIn(t, u.email, "Wrong password "+string(rune('0'+i))).wantStatus(t, http.StatusUnauthorized)
		}
		// The sixth attempt is refused before the password is looked at: even the right one.
		r := e.browser().signIn(t, strings.ToUpper(u.email), u.password)
		r.wantStatus(t, http.StatusTooManyRequests)
		if got := r.alert(); !strings.Contains(got, "Try again in") {
			t.Errorf("alert = %q, want a 'Try again in' message", got)
		}
		r.wantNoText(t, u.password)
		if setCookie(r, "sb_session") != nil {
			t.Error("signed in past the limit")
		}
		if n := sessionCount(t, db, u.id); n != 1 {
			t.Errorf("sessions = %d, want only the sign-up's", n)
		}
		// Another account from the same address is not locked out.
		other := e.browser().newUser(t, "other")
		e.browser().signIn(t, other.email, other.password).wantRedirect(t, "/user/api")
	})
}

// Five attempts per account means five password guesses, also when they are sent all at once.
func TestSignInLimitHoldsForConcurrentAttempts(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	u := e.browser().newUser(t, "burst")
	const n = 12
	var wg sync.WaitGroup
	start := make(chan struct{})
	statuses := make(chan int, n)
	for i := 0; i < n; i++ {
		b := e.browser()
		token := b.get(t, "/user/sign-in").field(t, "csrf_token")
		wg.Add(1)
		go func() {
			defer wg.Done()
			form := url.Values{"csrf_token": {token}, "email": {u.email}, "password": {"Wrong password guess"}}
			<-start
			res, err := b.client.PostForm(e.url+"/user/sign-in", form)
			if err != nil {
				statuses <- 0
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests] != n {
		t.Fatalf("statuses = %v", counts)
	}
	if counts[http.StatusUnauthorized] > 5 {
		t.Fatalf("%d passwords were checked for one account in a burst of %d (statuses %v); the limit is 5: the "+
			"limiter is only peeked before the slow password check and charged after it", counts[http.StatusUnauthorized], n, counts)
	}
}

func TestSignInNext(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	u := e.browser().newUser(t, "next")
	tests := []struct{ next, want string }{
		{"", "/user/api"},
		{"/user/workspaces", "/user/workspaces"},
		{"/user/api?show=revoked", "/user/api?show=revoked"},
		{"//evil.example", "/user/api"},
		{"//evil.example/user", "/user/api"},
		{"https://evil.example", "/user/api"},
		{"https://evil.example/user/api", "/user/api"},
		{"/\\evil.example", "/user/api"},
		{"/user\\..\\evil", "/user/api"},
		{"/docs/", "/user/api"},
		{"javascript:alert(1)", "/user/api"},
		{"/user/api\r\nSet-Cookie: x=1", "/user/api"},
	}
	for _, tt := range tests {
		t.Run(tt.next, func(t *testing.T) {
			r := e.browser().signIn(t, u.email, u.password, tt.next)
			r.wantRedirect(t, tt.want)
		})
	}
}

func TestSessionRequired(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	for _, path := range []string{"/user/api", "/user/workspaces", "/user/account", "/user/api?show=revoked",
		"/user/api/keys/key_123/revoke"} {
		r := b.get(t, path)
		r.wantStatus(t, http.StatusSeeOther)
		loc := r.location(t)
		if loc.Path != "/user/sign-in" || loc.Query().Get("next") != path || loc.Query().Has("expired") {
			t.Errorf("GET %s without a session → %s, want /user/sign-in?next=%s", path, loc, path)
		}
	}
	for _, path := range []string{"/user/sign-out", "/user/workspaces", "/user/workspaces/switch", "/user/api/keys",
		"/user/api/keys/key_123/revoke", "/user/account/password"} {
		r := b.post(t, path, url.Values{"csrf_token": {"x"}, "name": {"n"}})
		r.wantRedirect(t, "/user/sign-in?")
	}
	// A cookie that matches no session is cleared and leads to sign-in as well.
	b.jar.SetCookies(mustURL(e.url+"/user/"), []*http.Cookie{{Name: "sb_session", Value: "made-up", Path: "/user"}})
	r := b.get(t, "/user/api")
	r.wantRedirect(t, "/user/sign-in?next=%2Fuser%2Fapi")
	if ck := setCookie(r, "sb_session"); ck == nil || ck.MaxAge >= 0 {
		t.Errorf("an unknown session cookie is not cleared: %v", ck)
	}

	// After signing in, the browser lands where it wanted to go.
	u := e.browser().newUser(t, "back")
	b = e.browser()
	r = b.get(t, "/user/workspaces")
	signIn := b.get(t, r.Header.Get("Location"))
	signIn.wantStatus(t, http.StatusOK)
	next := signIn.field(t, "next")
	if next != "/user/workspaces" {
		t.Fatalf("sign-in page next = %q", next)
	}
	b.signIn(t, u.email, u.password, next).wantRedirect(t, "/user/workspaces")
}

func TestExpiredSession(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "late")
		ses := b.session(t)
		if _, err := db.Bun().NewUpdate().Table("sessions").Set("expires_at = ?", time.Now().UTC().Add(-time.Minute)).
			Where("id = ?", ses.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		r := b.get(t, "/user/api")
		r.wantStatus(t, http.StatusSeeOther)
		loc := r.location(t)
		if loc.Path != "/user/sign-in" || loc.Query().Get("expired") != "1" || loc.Query().Get("next") != "/user/api" {
			t.Fatalf("expired session → %s, want /user/sign-in?expired=1&next=/user/api", loc)
		}
		if ck := setCookie(r, "sb_session"); ck == nil || ck.MaxAge >= 0 {
			t.Errorf("the expired session's cookie is not cleared: %v", ck)
		}
		if n := sessionCount(t, db, u.id); n != 0 {
			t.Errorf("sessions = %d: the expired session was not deleted", n)
		}
		p := b.get(t, loc.String())
		p.wantStatus(t, http.StatusOK)
		if got := p.notice(); !strings.Contains(got, "session expired") {
			t.Errorf("sign-in notice = %q, want it to say the session expired", got)
		}
		b.signIn(t, u.email, u.password, p.field(t, "next")).wantRedirect(t, "/user/api")
	})
}

// Sessions abandoned after they expired are deleted by the console's background work, which sweeps as soon as it
// runs; live sessions stay.
func TestRunDeletesExpiredSessions(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		u, err := db.Users.Create(ctx, uniqueEmail("abandoned"), "hash")
		if err != nil {
			t.Fatal(err)
		}
		for i, expires := range []time.Time{time.Now().Add(-time.Minute), time.Now().Add(time.Hour)} {
			if _, err := db.Sessions.Create(ctx, store.NewSession{TokenHash: tokenHash(fmt.Sprint("token ", i)), UserID: u.ID,
				CSRFToken: "csrf", ExpiresAt: expires}); err != nil {
				t.Fatal(err)
			}
		}
		newEnv(t, db, console.Config{})
		for deadline := time.Now().Add(10 * time.Second); sessionCount(t, db, u.ID) != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("sessions = %d, want the live one only", sessionCount(t, db, u.ID))
			}
		}
	})
}

func TestSessionSlidingExpiry(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{SessionTTL: time.Hour})
		b := e.browser()
		b.newUser(t, "slide")
		ses := b.session(t)
		old := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Microsecond)
		if _, err := db.Bun().NewUpdate().Table("sessions").Set("last_seen_at = ?", old).
			Set("expires_at = ?", old.Add(time.Hour)).Where("id = ?", ses.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		r := b.get(t, "/user/workspaces")
		r.wantStatus(t, http.StatusOK)
		after := b.session(t)
		if !after.ExpiresAt.After(time.Now().Add(59*time.Minute)) || !after.LastSeenAt.After(old) {
			t.Errorf("session not extended: %+v", after)
		}
		if ck := setCookie(r, "sb_session"); ck == nil || ck.MaxAge != 3600 {
			t.Errorf("cookie not renewed with the session: %v", ck)
		}
	})
}

func TestSignOut(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "bye")
		old := b.cookie("sb_session")

		// Without the session's CSRF token nothing happens.
		r := b.post(t, "/user/sign-out", url.Values{})
		r.wantStatus(t, http.StatusForbidden)
		if n := sessionCount(t, db, u.id); n != 1 {
			t.Fatalf("sessions = %d after a sign-out without CSRF token", n)
		}

		r = b.postCSRF(t, "/user/sign-out", nil)
		r.wantRedirect(t, "/user/sign-in?signed-out=1")
		if ck := setCookie(r, "sb_session"); ck == nil || ck.MaxAge >= 0 {
			t.Errorf("sign-out does not clear the cookie: %v", ck)
		}
		if n := sessionCount(t, db, u.id); n != 0 {
			t.Errorf("sessions = %d after sign-out, want 0", n)
		}
		p := b.get(t, "/user/sign-in?signed-out=1")
		if got := p.notice(); !strings.Contains(got, "signed out") {
			t.Errorf("notice = %q", got)
		}

		// The old cookie, replayed by someone who kept it, no longer works.
		thief := e.browser()
		thief.jar.SetCookies(mustURL(e.url+"/user/"), []*http.Cookie{{Name: "sb_session", Value: old.Value, Path: "/user"}})
		thief.get(t, "/user/api").wantRedirect(t, "/user/sign-in?next=%2Fuser%2Fapi")
	})
}

func TestChangePassword(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		first := e.browser()
		u := first.newUser(t, "pat")
		second := e.browser()
		second.signIn(t, u.email, u.password).wantRedirect(t, "/user/api")
		if n := sessionCount(t, db, u.id); n != 2 {
			t.Fatalf("sessions = %d, want 2", n)
		}
		before, _ := db.Users.ByEmail(ctx, u.email)

		account := first.get(t, "/user/account")
		account.wantStatus(t, http.StatusOK)
		account.wantText(t, "Change password")
		const newPassword = "a brand new passphrase"

		r := first.postCSRF(t, "/user/account/password", url.Values{"current_password": {"Not my password 1"}, "new_password": {newPassword}})
		r.wantStatus(t, http.StatusUnauthorized)
		if got := r.alert(); !strings.Contains(got, "current password") {
			t.Errorf("alert = %q", got)
		}
		r.wantNoText(t, newPassword)

		r = first.postCSRF(t, "/user/account/password", url.Values{"current_password": {u.password}, "new_password": {"short"}})
		r.wantStatus(t, http.StatusUnprocessableEntity)
		if got := r.alert(); !strings.Contains(got, "at least 10 characters") {
			t.Errorf("alert = %q", got)
		}
		r.wantNoText(t, u.password)

		r = first.postCSRF(t, "/user/account/password", url.Values{"current_password": {u.password},
			"new_password": {strings.SplitN(u.email, "@", 2)[0] + "-secret"}})
		r.wantStatus(t, http.StatusUnprocessableEntity)

		// Without the CSRF token nothing changes.
		r = first.post(t, "/user/account/password", url.Values{"current_password": {u.password}, "new_password": {newPassword}})
		r.wantStatus(t, http.StatusForbidden)

		if after, _ := db.Users.ByEmail(ctx, u.email); after.PasswordHash != before.PasswordHash {
			t.Fatal("a refused change changed the password")
		}
		if n := sessionCount(t, db, u.id); n != 2 {
			t.Fatalf("sessions = %d after refused changes, want 2", n)
		}

		r = first.postCSRF(t, "/user/account/password", url.Values{"current_password": {u.password}, "new_password": {newPassword}})
		r.wantRedirect(t, "/user/sign-in?password-changed=1")
		if n := sessionCount(t, db, u.id); n != 0 {
			t.Errorf("sessions = %d after a password change, want 0", n)
		}
		first.get(t, "/user/api").wantStatus(t, http.StatusSeeOther)
		second.get(t, "/user/api").wantStatus(t, http.StatusSeeOther)
		if got := first.get(t, "/user/sign-in?password-changed=1").notice(); !strings.Contains(got, "password was changed") {
			t.Errorf("notice = %q", got)
		}

		e.browser().signIn(t, u.email, u.password).wantStatus(t, http.StatusUnauthorized)
		second.signIn(t, u.email, newPassword).wantRedirect(t, "/user/api")
		second.get(t, "/user/api").wantStatus(t, http.StatusOK)
	})
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// setCookie returns the cookie named name that the response sets, or nil.
func setCookie(r *resp, name string) *http.Cookie {
	for _, c := range r.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// The password rules speak of characters, so they must count characters, not bytes: "🔑🔑🔑" is 12 bytes but
// three characters.
func TestPasswordLengthCountsCharacters(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	for _, pw := range []string{"🔑🔑🔑", "ééééééééé", "пароль123"} {
		t.Run(pw, func(t *testing.T) {
			email := uniqueEmail("utf8")
			r := e.browser().signUp(t, email, pw)
			if r.StatusCode != http.StatusUnprocessableEntity || userCount(t, e.db, email) != 0 {
				t.Fatalf("a password of %d characters (%d bytes) was accepted (status %d): the length rule counts bytes",
					len([]rune(pw)), len(pw), r.StatusCode)
			}
		})
	}
	// Ten characters are enough, whatever their bytes.
	e.browser().signUp(t, uniqueEmail("utf8"), "ключ-доступ").wantRedirect(t, "/user/workspaces")
}

// The session stores the browser's User-Agent, cut to 256 bytes; whatever a browser sends, signing in must work.
func TestSignInWithUnusualUserAgent(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		u := e.browser().newUser(t, "agent")
		for name, ua := range map[string]string{
			"long":                 strings.Repeat("Mozilla/5.0 ", 100),
			"multibyte at the cut": strings.Repeat("a", 255) + "€uro",
			"non-ASCII":            "Navigateur façon 🦊",
		} {
			t.Run(name, func(t *testing.T) {
				b := e.browser()
				b.header.Set("User-Agent", ua)
				r := b.signIn(t, u.email, u.password)
				r.wantRedirect(t, "/user/api")
				ses := b.session(t)
				// A prefix of what was sent, at most 256 bytes: a cut through a character must not store half of it
				// (the half byte comes back as U+FFFD, and the value grows past the limit).
				if len(ses.UserAgent) > 256 || !utf8.ValidString(ses.UserAgent) || !strings.HasPrefix(ua, ses.UserAgent) ||
					len(ses.UserAgent) < 250 && len(ua) >= 256 {
					t.Errorf("stored user agent (%d bytes) is not a prefix of the sent one cut at 256 bytes: …%q",
						len(ses.UserAgent), ses.UserAgent[max(0, len(ses.UserAgent)-8):])
				}
			})
		}
	})
}

// What the pages echo back (next, the email) is escaped.
func TestReflectedValuesAreEscaped(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), console.Config{})
	b := e.browser()
	const evil = `"><script>alert(1)</script>`
	for _, path := range []string{"/user/sign-in?next=", "/user/sign-up?next="} {
		p := b.get(t, path+url.QueryEscape(evil))
		p.wantStatus(t, http.StatusOK)
		if strings.Contains(p.body, "<script>alert") {
			t.Errorf("GET %s reflects markup unescaped", path)
		}
		if got := p.field(t, "next"); got != evil {
			t.Errorf("next = %q, want it kept (escaped) as %q", got, evil)
		}
	}
	p := b.signUp(t, evil+"@example.com", password)
	p.wantStatus(t, http.StatusUnprocessableEntity)
	if strings.Contains(p.body, "<script>alert") {
		t.Error("the sign-up form reflects the email unescaped")
	}
}

// Failed sign-ins lock out the address that made them, not the account's owner elsewhere: five wrong passwords from
// one network refuse that network (even the right password), while the owner signs in from another at once.
func TestSignInLockoutIsPerAddress(t *testing.T) {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	e := newEnvWith(t, storetest.SQLite(t), console.Config{}, []*net.IPNet{loopback})
	u := e.browser().newUser(t, "owner")
	from := func(ip string) *browser {
		b := e.browser()
		b.header.Set("X-Forwarded-For", ip)
		return b
	}
	for i := 1; i <= 5; i++ {
		from("203.0.113.9").signIn(t, u.email, "Wrong password "+string(rune('0'+i))).wantStatus(t, http.StatusUnauthorized)
	}
	from("203.0.113.9").signIn(t, u.email, u.password).wantStatus(t, http.StatusTooManyRequests)
	from("198.51.100.20").signIn(t, u.email, u.password).wantRedirect(t, "/user/api")
}
