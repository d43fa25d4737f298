package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/switchboard/switchboard/api"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// env is one running server over a real database, reached over real HTTP.
type env struct {
	t   testing.TB
	db  *store.DB
	srv *handlers.Server
	url string
}

// newEnv starts the server over db and runs its key verifier, as serve does; cfg zero values take the server's
// defaults, and the services it leaves out are the product's own (apptest.New).
func newEnv(t testing.TB, db *store.DB, cfg handlers.Config) *env {
	t.Helper()
	return newAppEnv(t, apptest.New(t, db, app.Config{Logger: cfg.Logger, BaseURL: cfg.BaseURL, Events: cfg.Events}), cfg)
}

// newAppEnv is newEnv over a product the test built (with its own egress policy, say): cfg's nil services are a's.
func newAppEnv(t testing.TB, a *app.App, cfg handlers.Config) *env {
	t.Helper()
	db := a.DB
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	withApp(&cfg, a)
	srv, err := handlers.New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	verifying, stopVerifier := context.WithCancel(context.Background())
	verified := make(chan error, 1)
	go func() { verified <- cfg.Verifier.Run(verifying) }()
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		stopVerifier()
		if err := <-verified; err != nil {
			t.Errorf("verifier: %v", err)
		}
	})
	return &env{t: t, db: db, srv: srv, url: hs.URL}
}

// webhookService is a webhook service over the engine parts a test chose (a loopback guard, a counted Wake).
func webhookService(t testing.TB, db *store.DB, outbox *events.Outbox, sc webhook.ServiceConfig) *webhook.Service {
	t.Helper()
	svc, err := webhook.NewService(db, outbox, sc)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// withApp gives cfg the services of a that it leaves out.
func withApp(cfg *handlers.Config, a *app.App) {
	if cfg.Verifier == nil {
		cfg.Verifier = a.Verifier
	}
	if cfg.Box == nil {
		cfg.Box = a.Box
	}
	if cfg.LLM == nil {
		cfg.LLM = a.LLM
	}
	if cfg.Bots == nil {
		cfg.Bots = a.Bots
	}
	if cfg.Events == nil {
		cfg.Events = a.Events
	}
	if cfg.Links == nil {
		cfg.Links = a.Links
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = a.Webhooks
	}
	if cfg.Channels == nil {
		cfg.Channels = a.Messaging
	}
	if cfg.Automation == nil {
		cfg.Automation = a.Automation
	}
}

func (e *env) workspace(name string) store.Workspace {
	e.t.Helper()
	w, err := e.db.Workspaces.Create(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// key creates a key in a workspace and returns its secret and stored form.
func (e *env) key(workspaceID string, scopes ...string) (string, store.APIKey) {
	e.t.Helper()
	return createKey(e.t, e.db, workspaceID, nil, scopes...)
}

func createKey(t testing.TB, db *store.DB, workspaceID string, n *store.NewAPIKey, scopes ...string) (string, store.APIKey) {
	t.Helper()
	secret, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if n == nil {
		n = &store.NewAPIKey{}
	}
	n.WorkspaceID, n.SecretHash, n.DisplayPrefix, n.Last4 = workspaceID, secret.Hash, secret.DisplayPrefix, secret.Last4
	n.Scopes, n.CreatedBy = scopes, "test"
	if n.Name == "" {
		n.Name = "test key"
	}
	k, err := db.APIKeys.Create(context.Background(), *n)
	if err != nil {
		t.Fatal(err)
	}
	return secret.Plain, k
}

// response is a response whose conformance to the spec was already checked.
type response struct {
	*http.Response
	body []byte
}

func (r *response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// problem is the decoded RFC 9457 body of an error response.
type problem struct {
	Type             string              `json:"type"`
	Title            string              `json:"title"`
	Status           int                 `json:"status"`
	Detail           string              `json:"detail"`
	Instance         string              `json:"instance"`
	Code             string              `json:"code"`
	RequestID        string              `json:"request_id"`
	Errors           []map[string]string `json:"errors"`
	RequiredScopes   []string            `json:"required_scopes"`
	ViolatedPolicies []string            `json:"violated-policies"`
}

// problem asserts the response is the problem with the given status and code, and returns it.
func (r *response) problem(t testing.TB, status int, code string) problem {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", r.StatusCode, status, r.body)
	}
	var p problem
	r.json(t, &p)
	if p.Code != code || p.Status != status || p.Type != "/problems/"+code {
		t.Fatalf("problem = %+v, want code %s status %d", p, code, status)
	}
	return p
}

// request is one call to the server.
type request struct {
	method, path string
	key          string
	body         string
	header       map[string]string
}

// do sends the request and validates the response against the spec: a response to a spec operation must be
// declared for its status (undeclared status = failure) and match its schema and content type; any other
// response must be a Problem. Every error response must be problem+json carrying the X-Request-Id in request_id.
func (e *env) do(r request) *response {
	e.t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, e.url+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := &response{Response: res, body: b}
	validateResponse(e.t, req, out, r.body)
	return out
}

var specDoc, specRouter = func() (*openapi3.T, routers.Router) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		panic(err)
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		panic(err)
	}
	return doc, router
}()

func validateResponse(t testing.TB, req *http.Request, res *response, reqBody string) {
	t.Helper()
	if res.StatusCode >= 400 {
		if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s %s: error response has Content-Type %q, want application/problem+json", req.Method, req.URL.Path, ct)
		}
		var p problem
		res.json(t, &p)
		if p.RequestID == "" || p.RequestID != res.Header.Get("X-Request-Id") {
			t.Fatalf("request_id %q does not match X-Request-Id %q", p.RequestID, res.Header.Get("X-Request-Id"))
		}
	}
	route, params, err := specRouter.FindRoute(req)
	if err != nil {
		if res.StatusCode < 400 {
			return // a public route outside the API (docs, health): nothing in the spec to check against
		}
		var v any
		res.json(t, &v)
		if err := specDoc.Components.Schemas["Problem"].Value.VisitJSON(v); err != nil {
			t.Fatalf("%s %s: response is not a Problem: %v\n%s", req.Method, req.URL.Path, err, res.body)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if reqBody != "" {
		req.Body = io.NopCloser(strings.NewReader(reqBody))
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(res.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		t.Fatalf("%s %s → %d does not match the spec: %v\n%s", req.Method, req.URL.Path, res.StatusCode, err, res.body)
	}
}
