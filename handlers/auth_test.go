package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// reopen opens a second handle on the same database, as the CLI does while the server runs.
func reopen(t *testing.T, db *store.DB) *store.DB {
	t.Helper()
	var url string
	if db.Dialect() == store.Postgres {
		url = storetest.PostgresURL(t)
	} else {
		url = "file:" + db.DataDir() + "/switchboard.db"
	}
	other, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	return other
}

func TestAuthenticationFailures(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Acme")
		valid, _ := e.key(ws.ID, "models:read")
		past := time.Now().Add(-time.Hour)
		expired, _ := createKey(t, db, ws.ID, &store.NewAPIKey{ExpiresAt: &past}, "models:read")
		// A well-formed key with a valid checksum that was never issued.
		never, err := apikey.Generate()
		if err != nil {
			t.Fatal(err)
		}
		unknown := never.Plain
		typo := valid[:10] + flip(valid[10]) + valid[11:]

		tests := []struct {
			name, header, code, wwwAuth string
		}{
			{"no header", "", "missing_api_key", `Bearer realm="switchboard"`},
			{"basic scheme", "Basic dXNlcjpwYXNz", "invalid_api_key", `error="invalid_token"`},
			{"bearer without token", "Bearer ", "invalid_api_key", `error="invalid_token"`},
			{"garbage", "Bearer hello", "invalid_api_key", `error="invalid_token"`},
			{"typo fails the checksum", "Bearer " + typo, "invalid_api_key", `error="invalid_token"`},
			{"never issued", "Bearer " + unknown, "invalid_api_key", `error="invalid_token"`},
			{"expired", "Bearer " + expired, "api_key_expired", `error="invalid_token"`},
			{"lower-case scheme works but key is unknown", "bearer " + unknown, "invalid_api_key", `error="invalid_token"`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := e.do(request{path: "/api/v1/models", header: map[string]string{"Authorization": tt.header}})
				p := res.problem(t, http.StatusUnauthorized, tt.code)
				if p.Detail == "" {
					t.Error("the problem explains nothing")
				}
				if got := res.Header.Get("WWW-Authenticate"); !strings.Contains(got, tt.wwwAuth) {
					t.Errorf("WWW-Authenticate = %q, want it to contain %q", got, tt.wwwAuth)
				}
				if _, token, _ := strings.Cut(tt.header, " "); len(token) > 4 && strings.Contains(string(res.body), token) {
					t.Errorf("the problem echoes the submitted credential: %s", res.body)
				}
				// Not a key's quota: the client address's, which every request without a valid key spends.
				if got := res.Header.Get("RateLimit"); !strings.HasPrefix(got, `"address";r=`) {
					t.Errorf("RateLimit = %q, want the address policy only", got)
				}
			})
		}
	})
}

func flip(b byte) string {
	if b == 'a' {
		return "b"
	}
	return "a"
}

// Authentication failures win over validation failures: no schema detail leaks to callers without a key.
func TestAuthenticationBeforeValidation(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	e.do(request{path: "/api/v1/models/bad%20id"}).problem(t, http.StatusUnauthorized, "missing_api_key")
}

func TestScopes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Acme")
		links, _ := e.key(ws.ID, "links:read", "links:write")
		res := e.do(request{path: "/api/v1/models", key: links})
		p := res.problem(t, http.StatusForbidden, "insufficient_scope")
		if len(p.RequiredScopes) != 1 || p.RequiredScopes[0] != "models:read" {
			t.Errorf("required_scopes = %v", p.RequiredScopes)
		}
		if got := res.Header.Get("WWW-Authenticate"); !strings.Contains(got, `error="insufficient_scope", scope="models:read"`) {
			t.Errorf("WWW-Authenticate = %q", got)
		}
		all, _ := e.key(ws.ID, "models:read", "links:read")
		if res := e.do(request{path: "/api/v1/models", key: all}); res.StatusCode != http.StatusOK {
			t.Errorf("status %d", res.StatusCode)
		}
	})
}

// A key revoked by another process (the CLI) answers 401 api_key_revoked on the next request, although the
// server had it cached.
func TestRevocationByAnotherProcess(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{Verifier: apikey.NewVerifier(db.APIKeys, time.Hour, nil)})
		key, k := e.key(e.workspace("Acme").ID, "models:read")
		for range 3 {
			if res := e.do(request{path: "/api/v1/models", key: key}); res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
		}
		cli := reopen(t, db)
		if _, err := cli.APIKeys.Revoke(context.Background(), k.ID); err != nil {
			t.Fatal(err)
		}
		if db.Dialect() == store.SQLite {
			// SQLite: the very next request.
			e.do(request{path: "/api/v1/models", key: key}).problem(t, http.StatusUnauthorized, "api_key_revoked")
			return
		}
		// PostgreSQL: as soon as the notification arrives.
		await.Equal(t, "the revocation to be heard", func() int {
			return e.do(request{path: "/api/v1/models", key: key}).StatusCode
		}, http.StatusUnauthorized)
		e.do(request{path: "/api/v1/models", key: key}).problem(t, http.StatusUnauthorized, "api_key_revoked")
	})
}

func TestLastUsedIsRecorded(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Acme")
		key, k := e.key(ws.ID, "models:read")
		if k.LastUsedAt != nil {
			t.Fatal("a new key was never used")
		}
		before := time.Now().Add(-time.Second)
		e.do(request{path: "/api/v1/models", key: key})
		await.Until(t, "the last use to be recorded", func() *time.Time {
			got, err := db.APIKeys.Get(context.Background(), ws.ID, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.LastUsedAt
		}, func(at *time.Time) bool { return at != nil && at.After(before) })
	})
}

func TestRateLimits(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		t.Run("per key", func(t *testing.T) {
			e := newEnv(t, db, handlers.Config{KeyRateLimit: 3, WorkspaceRateLimit: 100})
			ws := e.workspace("Acme")
			key, _ := e.key(ws.ID, "models:read")
			for i := range 3 {
				res := e.do(request{path: "/api/v1/models", key: key})
				if want := fmt.Sprintf(`"key";r=%d;`, 2-i); !strings.HasPrefix(res.Header.Get("RateLimit"), want) {
					t.Errorf("request %d: RateLimit = %q, want prefix %q", i+1, res.Header.Get("RateLimit"), want)
				}
			}
			res := e.do(request{path: "/api/v1/models", key: key})
			p := res.problem(t, http.StatusTooManyRequests, "rate_limited")
			if res.Header.Get("Retry-After") != "20" {
				t.Errorf("Retry-After = %q, want 20 (one request per 20 s)", res.Header.Get("Retry-After"))
			}
			if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "key" {
				t.Errorf("violated-policies = %v", p.ViolatedPolicies)
			}
			// Another key of the same workspace has its own quota.
			other, _ := e.key(ws.ID, "models:read")
			if res := e.do(request{path: "/api/v1/models", key: other}); res.StatusCode != http.StatusOK {
				t.Errorf("status %d", res.StatusCode)
			}
		})
		t.Run("per workspace", func(t *testing.T) {
			e := newEnv(t, db, handlers.Config{KeyRateLimit: 100, WorkspaceRateLimit: 2})
			ws := e.workspace("Acme")
			a, _ := e.key(ws.ID, "models:read")
			b, _ := e.key(ws.ID, "models:read")
			e.do(request{path: "/api/v1/models", key: a})
			e.do(request{path: "/api/v1/models", key: b})
			p := e.do(request{path: "/api/v1/models", key: a}).problem(t, http.StatusTooManyRequests, "rate_limited")
			if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "workspace" {
				t.Errorf("violated-policies = %v", p.ViolatedPolicies)
			}
			// A refused request does not spend the key's own quota.
			res := e.do(request{path: "/api/v1/models", key: a})
			if !strings.HasPrefix(res.Header.Get("RateLimit"), `"key";r=99;`) {
				t.Errorf("RateLimit = %q: the refused request was charged to the key", res.Header.Get("RateLimit"))
			}
			// Another workspace is not affected.
			c, _ := e.key(e.workspace("Other").ID, "models:read")
			if res := e.do(request{path: "/api/v1/models", key: c}); res.StatusCode != http.StatusOK {
				t.Errorf("status %d", res.StatusCode)
			}
		})
	})
}
