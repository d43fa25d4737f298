package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// TestSecurityOnlyValidationIsTheValidators: for every operation whose requests validateSecurity checks in place of
// openapi3filter (no parameters, no body), both give the same answer — no key, a malformed one, an unknown one, a
// key without the operation's scope and one with every scope — so the shortcut validates exactly as much.
func TestSecurityOnlyValidationIsTheValidators(t *testing.T) {
	db := storetest.SQLite(t)
	s, err := New(withServices(t, db, Config{KeyRateLimit: 1 << 20, WorkspaceRateLimit: 1 << 20, AddressRateLimit: 1 << 20}, nil), db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ws, err := db.Workspaces.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	keyWith := func(scopes ...string) string {
		secret, err := apikey.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.APIKeys.Create(ctx, store.NewAPIKey{WorkspaceID: ws.ID, Name: "k", SecretHash: secret.Hash,
			DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: scopes, CreatedBy: "test"}); err != nil {
			t.Fatal(err)
		}
		return secret.Plain
	}
	unknown, _ := apikey.Generate()
	auth := map[string]string{"none": "", "malformed": "Bearer sb_sk_nope", "basic": "Basic eDp5",
		"unknown": "Bearer " + unknown.Plain, "another scope": "Bearer " + keyWith("links:read"), "every scope": "Bearer " + keyWith(apikey.All()...)}
	routes, err := apiRoutes()
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: s.authenticate, MultiError: true, KeepValidatedValue: true}
	checked := 0
	for id, route := range routes {
		plan, ok := securityOnlyPlan(route)
		if !ok {
			continue
		}
		checked++
		for name, header := range auth {
			answer := func(fast bool) string {
				req := httptest.NewRequest(route.Method, route.Path, nil)
				if header != "" {
					req.Header.Set("Authorization", header)
				}
				rec := httptest.NewRecorder()
				c := s.echo.NewContext(req, rec)
				st := &requestState{ID: "req_test", header: rec.Header(), echo: c}
				req = req.WithContext(withRequestState(req.Context(), st))
				var err error
				if fast {
					err = s.validateSecurity(req, route, opts, plan)
				} else {
					err = openapi3filter.ValidateRequest(req.Context(), &openapi3filter.RequestValidationInput{
						Request: req, Route: route, Options: opts})
				}
				if err == nil {
					return "admitted"
				}
				var me openapi3.MultiError
				if fast || !errors.As(err, &me) {
					me = openapi3.MultiError{err}
				}
				var p *Problem
				if !errors.As(validationError(me, err), &p) {
					return "internal error"
				}
				return fmt.Sprintf("%s %v %s", p.Code, p.Header, rec.Header().Get("Ratelimit-Policy"))
			}
			if fast, full := answer(true), answer(false); fast != full {
				t.Errorf("%s with %s key: %q, the validator %q", id, name, fast, full)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no operation takes the shortcut")
	}
	if _, ok := securityOnlyPlan(routes["listModels"]); !ok {
		t.Error("listModels does not take the shortcut")
	}
}
