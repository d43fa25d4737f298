// Package console is Switchboard's web console under /user: sign-up and sign-in, workspaces, and the unified API
// console at /user/api where people create, copy (once) and revoke API keys and build cURL commands.
//
// Pages are server-rendered html/template with a little vanilla JavaScript; every asset is embedded, so the console
// works offline. Sessions live in the database (the cookie holds a random token, the table its hash); sign-in
// failures are rate-limited per account and per address.
//
// Cross-site request forgery is refused twice. First by the standard library's cross-origin protection
// (http.CrossOriginProtection): a state-changing request is refused unless the browser says it came from the
// console's own origin (Sec-Fetch-Site: same-origin or none; else an Origin naming the request's Host, or the
// origin of Config.BaseURL, which is what browsers name when a reverse proxy rewrites Host). Then by a token in
// every form: the session's for signed-in pages, a double-submit cookie for sign-in and sign-up. The tokens stay
// as defence in depth because the first check lets through every request that carries neither header, as browsers
// from before 2020 send them, and as any non-browser client does; a token is what still stops a forged form there.
// A refusal of either kind is the console's error page, 403.
package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/accounts"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/bots"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the console; zero values take the defaults.
type Config struct {
	// BaseURL is the public URL of the server; an https URL makes cookies Secure.
	BaseURL string
	// SessionTTL is how long a session lasts without activity (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Workspaces is the service behind the workspace and key pages (required).
	Workspaces *workspaces.Service
	// Links is the service behind the short links pages; without it the console has none.
	Links *links.Service
	// Webhooks is the service behind the webhooks and events pages, which also need Automation (its catalogue of
	// event types); without both the console has none.
	Webhooks *webhook.Service
	// Automation is the service behind the Sources pages; without it the console has none.
	Automation *automation.Service
	// Channels is the messaging service behind the Channels pages; without it the console has none.
	Channels *channels.Service
	// Bots is the bot service behind the instance page's bots (with Channels); LLM lists the models a model bot
	// can use. Without Bots the page has no bots section.
	Bots *bots.Service
	LLM  *llm.Service
	// StreamBox is the server key that seals event stream tokens: with it the instance page, the delivery log and
	// the event log update live (see live.go); without it they update by reload.
	StreamBox *sealbox.Box
	// Limiter holds the sign-in and sign-up limits, and Nonces the key-creation forms already sent (default: in this
	// process; shared ones, such as redislimit's, make them hold across replicas).
	Limiter ratelimit.Limiter
	Nonces  ratelimit.Nonces
	Logger  *slog.Logger
}

// DefaultSessionTTL is how long a session lasts without activity when Config.SessionTTL is not set.
const DefaultSessionTTL = 7 * 24 * time.Hour

// Console serves /user. Its accounts and sessions are its own; workspaces and keys are the Workspaces service's.
type Console struct {
	accounts   *accounts.Service
	cfg        Config
	db         *store.DB
	workspaces *workspaces.Service
	links      *links.Service
	webhooks   *webhook.Service
	automation *automation.Service
	channels   *channels.Service
	bots       *bots.Service
	llm        *llm.Service
	log        *slog.Logger
	pages      map[string]*template.Template

	// attempts limits failed sign-ins per account and per address, and sign-ups per address.
	attempts ratelimit.Limiter
	// created holds the create forms' nonces already spent, so a resubmitted form does not make a second key.
	created ratelimit.Nonces
	// origins refuses state-changing requests from other origins.
	origins *http.CrossOriginProtection
}

// Sign-in and sign-up limits.
var (
	accountPolicy = ratelimit.Policy{Name: "account", Quota: 5, Window: 15 * time.Minute}
	// accountCeiling bounds the failures of one account from every address together; past it each sign-in of the
	// account waits ceilingDelay before its password is checked (slowed, never refused).
	accountCeiling = ratelimit.Policy{Name: "account-ceiling", Quota: 50, Window: 15 * time.Minute}
	addressPolicy  = ratelimit.Policy{Name: "address", Quota: 30, Window: 15 * time.Minute}
	signUpPolicy   = ratelimit.Policy{Name: "sign-up", Quota: 10, Window: time.Hour}
)

// ceilingDelay is the wait of a sign-in past the account's ceiling.
const ceilingDelay = 2 * time.Second

const (
	sessionCookie = "sb_session"
	csrfCookie    = "sb_csrf"
	csrfField     = "csrf_token"
)

// New parses the templates and returns the console.
func New(cfg Config, db *store.DB) (*Console, error) {
	if cfg.Workspaces == nil {
		return nil, errors.New("console: a workspaces service is required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New()
	}
	if cfg.Nonces == nil {
		cfg.Nonces = ratelimit.NewNonces()
	}
	c := &Console{cfg: cfg, db: db, accounts: accounts.New(db, cfg.SessionTTL), workspaces: cfg.Workspaces, links: cfg.Links, webhooks: cfg.Webhooks,
		automation: cfg.Automation, channels: cfg.Channels, bots: cfg.Bots, llm: cfg.LLM, log: cfg.Logger, pages: map[string]*template.Template{},
		attempts: cfg.Limiter, created: cfg.Nonces, origins: http.NewCrossOriginProtection()}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("console: base URL %q must be an absolute http(s) URL", cfg.BaseURL)
		}
		if err := c.origins.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("console: base URL %q: %w", cfg.BaseURL, err)
		}
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		// Files named _*.html hold templates that several pages share.
		if page == "layout" || strings.HasPrefix(page, "_") {
			continue
		}
		t, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(templateFS, "templates/layout.html",
			"templates/_*.html", name)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[page] = t
	}
	return c, nil
}

// Register adds the console's routes to e.
func (c *Console) Register(e *echo.Echo) {
	static, _ := fs.Sub(staticFS, "static")
	assets := http.StripPrefix("/user/static/", http.FileServer(http.FS(static)))
	e.GET("/user/static/*", func(ec echo.Context) error {
		// Files only: a directory (its listing) is no asset.
		if name := ec.Param("*"); name == "" || strings.HasSuffix(name, "/") {
			return echo.ErrNotFound
		}
		ec.Response().Header().Set("Cache-Control", "public, max-age=3600")
		assets.ServeHTTP(ec.Response(), ec.Request())
		return nil
	})
	e.GET("/", func(ec echo.Context) error { return ec.Redirect(http.StatusFound, "/user/api") })
	e.GET("/user", func(ec echo.Context) error { return ec.Redirect(http.StatusFound, "/user/api") })
	e.GET("/user/", func(ec echo.Context) error { return ec.Redirect(http.StatusFound, "/user/api") })

	e.GET("/user/sign-up", c.signUpPage, c.storableText)
	e.POST("/user/sign-up", c.signUp, c.sameOrigin, c.storableText)
	e.GET("/user/sign-in", c.signInPage, c.storableText)
	e.POST("/user/sign-in", c.signIn, c.sameOrigin, c.storableText)

	g := e.Group("/user", c.sameOrigin, c.storableText, c.requireSession)
	g.POST("/sign-out", c.signOut)
	g.GET("/workspaces", c.workspacesPage)
	g.POST("/workspaces", c.createWorkspace)
	g.POST("/workspaces/switch", c.switchWorkspace)
	g.GET("/api", c.apiPage)
	g.POST("/api/keys", c.createKey)
	g.GET("/api/keys/:id/origins", c.originsPage)
	g.POST("/api/keys/:id/origins", c.setOrigins)
	g.GET("/api/keys/:id/revoke", c.revokePage)
	g.POST("/api/keys/:id/revoke", c.revokeKey)
	g.GET("/account", c.accountPage)
	g.POST("/account/password", c.changePassword)
	g.POST("/stream-token", c.streamToken)
	if c.links != nil {
		c.registerLinks(g)
	}
	if c.webhooks != nil && c.automation != nil {
		c.registerWebhooks(g)
		c.registerEvents(g)
	}
	if c.automation != nil {
		c.registerSources(g)
	}
	if c.channels != nil {
		c.registerChannels(g)
		if c.bots != nil {
			c.registerBots(g)
		}
	}
}

// page is what every template receives.
type page struct {
	Title string
	// Session is nil on the signed-out pages.
	Session *session
	CSRF    string
	Error   string
	Notice  string
	Data    any
	// Refresh, in seconds, makes a page reload itself when script does not run (where it runs, the page's live
	// sections follow the event stream instead).
	Refresh int
	// NeedsTZ is set on a page loaded without ?tz=: a page that shows times in the browser's zone then reloads once
	// with it (a page answering a form must not: it would load the form's address).
	NeedsTZ bool
}

func (c *Console) render(ec echo.Context, status int, name string, p page) error {
	t, ok := c.pages[name]
	if !ok {
		return fmt.Errorf("console: no template %q", name)
	}
	if p.Session != nil {
		p.CSRF = p.Session.CSRFToken
	}
	p.NeedsTZ = ec.Request().Method == http.MethodGet && ec.QueryParam("tz") == ""
	var b strings.Builder
	if err := t.Execute(&b, p); err != nil {
		return fmt.Errorf("console: render %s: %w", name, err)
	}
	h := ec.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
		"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	return ec.HTML(status, b.String())
}

// secure reports whether cookies must be Secure: the server is public over https, or this request came over TLS.
func (c *Console) secure(r *http.Request) bool {
	return strings.HasPrefix(c.cfg.BaseURL, "https://") || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

func (c *Console) setCookie(ec echo.Context, name, value string, maxAge time.Duration) {
	ck := &http.Cookie{Name: name, Value: value, Path: "/user", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: c.secure(ec.Request())}
	if maxAge < 0 {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(maxAge.Seconds())
	}
	ec.SetCookie(ck)
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string { return accounts.RandomToken() }

func equalTokens(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// session is the signed-in user as pages see them.
type session struct {
	store.Session
	Email      string
	Workspaces []store.MemberWorkspace
	// Workspace is the one the console shows; nil while the user has none.
	Workspace *store.MemberWorkspace
}

const sessionKey = "console.session"

var errNoSession = errors.New("console: no session")

// requireSession loads the session of the cookie, or sends the browser to sign in (with a message when the session
// expired). State-changing requests must carry the session's CSRF token.
func (c *Console) requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		ses, err := c.loadSession(ec)
		if errors.Is(err, errNoSession) || errors.Is(err, errSessionExpired) {
			q := url.Values{}
			if ec.Request().Method == http.MethodGet {
				q.Set("next", ec.Request().URL.RequestURI())
			}
			if errors.Is(err, errSessionExpired) {
				q.Set("expired", "1")
			}
			return ec.Redirect(http.StatusSeeOther, "/user/sign-in?"+q.Encode())
		}
		if err != nil {
			return err
		}
		if ec.Request().Method == http.MethodPost && !equalTokens(ec.FormValue(csrfField), ses.CSRFToken) {
			return c.render(ec, http.StatusForbidden, "error", page{Title: "Form expired", Session: ses,
				Error: "This form has expired or did not come from this site. Go back, reload the page and try again."})
		}
		ec.Set(sessionKey, ses)
		return next(ec)
	}
}

// sameOrigin refuses a state-changing request that the browser says came from another origin, with the console's
// error page. It runs before the session is loaded: a refused request does not even extend the session.
func (c *Console) sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if err := c.origins.Check(ec.Request()); err != nil {
			return c.render(ec, http.StatusForbidden, "error", page{Title: "Request refused",
				Error: "This form was sent from another site, so nothing was done. If you sent it yourself, go back, " +
					"reload the page and try again."})
		}
		return next(ec)
	}
}

// storableText refuses, with the console's error page, a request whose form fields or query parameters hold text
// the databases cannot keep (U+0000, bytes that are not UTF-8): the services store what the console hands them, and
// such a value would fail its statement as a 500. It runs before the session is loaded, like sameOrigin.
func (c *Console) storableText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		values := ec.QueryParams()
		if ec.Request().Method == http.MethodPost {
			form, err := ec.FormParams()
			if err != nil {
				return c.render(ec, http.StatusBadRequest, "error", page{Title: "Request refused",
					Error: "This form could not be read. Go back, reload the page and try again."})
			}
			values = form // the query's parameters are among the form's
		}
		for name, vs := range values {
			if !text.Storable(name) || slices.ContainsFunc(vs, func(v string) bool { return !text.Storable(v) }) {
				return c.render(ec, http.StatusBadRequest, "error", page{Title: "Request refused",
					Error: "A field holds a character that cannot be stored (the character U+0000, or bytes that " +
						"are not UTF-8), so nothing was done. Remove it and try again."})
			}
		}
		return next(ec)
	}
}

var errSessionExpired = errors.New("console: session expired")

func (c *Console) loadSession(ec echo.Context) (*session, error) {
	ck, err := ec.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	ctx := ec.Request().Context()
	s, extended, err := c.accounts.Session(ctx, ck.Value)
	switch {
	case errors.Is(err, accounts.ErrNoSession):
		c.setCookie(ec, sessionCookie, "", -1)
		if s.ID != "" { // it was there, and expired
			return nil, errSessionExpired
		}
		return nil, errNoSession
	case err != nil:
		return nil, err
	case extended: // sliding expiry, written at most every few minutes
		c.setCookie(ec, sessionCookie, ck.Value, c.cfg.SessionTTL)
	}
	ses := &session{Session: s, Email: s.User.Email}
	if ses.Workspaces, err = c.db.Workspaces.ForUser(ctx, s.UserID); err != nil {
		return nil, err
	}
	for i := range ses.Workspaces {
		if s.WorkspaceID != nil && ses.Workspaces[i].ID == *s.WorkspaceID {
			ses.Workspace = &ses.Workspaces[i]
		}
	}
	if ses.Workspace == nil && len(ses.Workspaces) > 0 {
		ses.Workspace = &ses.Workspaces[0]
	}
	return ses, nil
}

func sessionFrom(ec echo.Context) *session {
	s, _ := ec.Get(sessionKey).(*session)
	return s
}

// startSession signs the user in: a new session row, its cookie, and a redirect to next (a local path only). A session
// the browser still held is ended first.
func (c *Console) startSession(ec echo.Context, u store.User, next string) error {
	n := accounts.NewSession{UserID: u.ID, UserAgent: ec.Request().UserAgent(), IP: ec.RealIP()}
	if ck, err := ec.Cookie(sessionCookie); err == nil {
		n.Replaces = ck.Value
	}
	token, err := c.accounts.StartSession(ec.Request().Context(), n)
	if err != nil {
		return err
	}
	c.setCookie(ec, sessionCookie, token, c.cfg.SessionTTL)
	c.setCookie(ec, csrfCookie, "", -1)
	return ec.Redirect(http.StatusSeeOther, localPath(next, "/user/api"))
}

// sessionSweepInterval is how often Run deletes expired sessions.
const sessionSweepInterval = time.Hour

// Run deletes expired sessions at once and then every hour until ctx ends, so that abandoned sessions do not pile
// up (an expired session is refused anyway: this only frees its row).
func (c *Console) Run(ctx context.Context) error {
	tick := time.NewTicker(sessionSweepInterval)
	defer tick.Stop()
	for {
		if n, err := c.accounts.PruneSessions(ctx, time.Now()); err != nil && ctx.Err() == nil {
			c.log.Warn("could not delete expired sessions", "error", err)
		} else if n > 0 {
			c.log.Info("deleted expired sessions", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// localPath accepts only same-site paths for redirects after sign-in (no open redirect).
func localPath(next, fallback string) string {
	if !strings.HasPrefix(next, "/user") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return fallback
	}
	return next
}
