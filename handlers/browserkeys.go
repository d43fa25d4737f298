package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
)

// dailyWindow is the window of a browser key's quota of things it creates.
const dailyWindow = 24 * time.Hour

// admitBrowser decides on a request of a browser key whose origin was allowed: its quotas (the key's, the
// visitor's, the workspace's and, for an operation that creates under the key's daily quota, that one), then its
// one browser scope — one of the scope's operations, aimed at the key's target. A request outside the scope is
// refused with insufficient_scope and spends no daily quota.
func (s *Server) admitBrowser(in *openapi3filter.AuthenticationInput, st *requestState, key apikey.Key, op *operation) error {
	scope, _ := apikey.BrowserScopeNamed(firstScope(key.Scopes))
	// getMe, the connection test, is every key's: a page may check its key and read what it may do.
	inScope := op != nil && (scope.Allows(op.ID) || op.ID == "getMe")
	// A scope aimed at an object named in the path: another object is outside it. Another instance is refused
	// as out of scope; another link is not found — to a key that reads one link's numbers, no other link
	// exists, here or in another workspace, and the answer is the same whether it exists or not.
	otherLink := false
	if param := scope.TargetParam(); inScope && scope.Allows(op.ID) && param != "" &&
		in.RequestValidationInput.PathParams[param] != key.ScopeTarget {
		inScope, otherLink = false, scope.Target == apikey.TargetLink
	}
	visitor := ""
	if st.echo != nil {
		visitor = st.echo.RealIP()
	}
	reqs := []ratelimit.Request{
		{Key: "k:" + key.ID, Policy: s.browserKeyPolicy},
		{Key: "v:" + key.ID + ":" + visitor, Policy: s.visitorPolicy},
		{Key: "w:" + key.WorkspaceID, Policy: s.workspacePolicy},
	}
	daily := inScope && scope.Quota && scope.Allows(op.ID) && key.DailyQuota > 0
	if daily {
		reqs = append(reqs, ratelimit.Request{Key: "d:" + key.ID,
			Policy: ratelimit.Policy{Name: "daily", Quota: key.DailyQuota, Window: dailyWindow}})
	}
	if p := s.limitAll(st.header, reqs); p != nil {
		return p
	}
	if daily {
		// Spent now, so that concurrent requests cannot create past the quota; given back by requestContext when
		// the request creates nothing (refused body, taken slug, any failure).
		st.spent = &reqs[len(reqs)-1]
	}
	if otherLink {
		return newProblem(problem.NotFound, "There is no such link for this browser key.")
	}
	if !inScope {
		what := "nothing"
		if scope.Name != "" {
			what = scope.Description
			if key.ScopeTarget != "" {
				what += " (" + key.ScopeTarget + ")"
			}
		}
		p := newProblem(problem.InsufficientScope, "This browser key may only do one thing: "+what+".")
		p.RequiredScopes = []string{}
		if op != nil {
			p.RequiredScopes = op.Scopes
		}
		return p.withHeader(echo.HeaderWWWAuthenticate,
			fmt.Sprintf(`Bearer realm="switchboard", error="insufficient_scope", scope=%q`, strings.Join(p.RequiredScopes, " ")))
	}
	st.key = &key
	return nil
}

func firstScope(scopes []string) string {
	if len(scopes) == 0 {
		return ""
	}
	return scopes[0]
}

// limitAll spends one request of every quota of reqs when all allow it, and answers with their RateLimit-Policy
// and RateLimit headers; over any of them it returns rate_limited naming the quotas that refused.
func (s *Server) limitAll(h http.Header, reqs []ratelimit.Request) *Problem {
	ds := make([]ratelimit.Decision, len(reqs))
	s.limiter.TakeAll(reqs, time.Now(), ds)
	var policies, states []string
	var violated []string
	var retry time.Duration
	for i, r := range reqs {
		policies = append(policies, fmt.Sprintf(`%q;q=%d;w=%d`, r.Policy.Name, r.Policy.Quota, int(r.Policy.Window/time.Second)))
		states = append(states, fmt.Sprintf(`%q;r=%d;t=%d`, r.Policy.Name, ds[i].Remaining, ceilSeconds(ds[i].Reset)))
		if !ds[i].Allowed {
			violated = append(violated, r.Policy.Name)
			retry = max(retry, ds[i].RetryAfter)
		}
	}
	if h != nil {
		h["Ratelimit-Policy"] = []string{strings.Join(policies, ", ")}
		h["Ratelimit"] = []string{strings.Join(states, ", ")}
	}
	if len(violated) == 0 {
		return nil
	}
	secs := max(1, ceilSeconds(retry))
	p := newProblem(problem.RateLimited, fmt.Sprintf("Too many requests for this browser key (%s); retry in %d seconds.",
		strings.Join(violated, ", "), secs))
	p.ViolatedPolicies = violated
	return p.withHeader("Retry-After", strconv.Itoa(secs))
}

// browserEventType refuses an event of another type than its browser key's (the authentication cannot see the
// body's type). Secret keys pass.
func browserEventType(key apikey.Key, eventType string) error {
	if !key.Browser() || eventType == key.ScopeTarget {
		return nil
	}
	p := newProblem(problem.InsufficientScope, fmt.Sprintf("This browser key may only publish events of type %s.", key.ScopeTarget))
	p.RequiredScopes = []string{}
	return p
}
