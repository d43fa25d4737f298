package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
)

// authenticate is the validator's AuthenticationFunc for bearerAuth. In order: header shape, key checksum, cache,
// lookup, revoked/expired (all in apikey.Verifier), then the operation's scopes, then the key's and the workspace's
// rate limits. Failures are problems; on success the key becomes the request's principal.
//
// The event stream also takes a stream token (the streamToken scheme, tried first): a request without one goes on
// to bearerAuth, whose problem is the one answered.
func (s *Server) authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	req := in.RequestValidationInput.Request
	st := stateFrom(req.Context())
	if in.SecuritySchemeName == streamTokenScheme {
		return s.authenticateStreamToken(in)
	}
	token, p := bearerToken(req.Header.Get(echo.HeaderAuthorization))
	var key apikey.Key
	if p == nil {
		var err error
		key, err = s.verifier.Verify(req.Context(), token)
		switch {
		case errors.Is(err, apikey.ErrMalformed), errors.Is(err, apikey.ErrUnknown):
			p = unauthorized(problem.InvalidAPIKey, "The API key is not valid. Check that it was copied whole; create keys at /user/api.")
		case errors.Is(err, apikey.ErrRevoked):
			p = unauthorized(problem.APIKeyRevoked, "This API key was revoked. Create a new key at /user/api.")
		case errors.Is(err, apikey.ErrExpired):
			p = unauthorized(problem.APIKeyExpired, fmt.Sprintf("This API key expired at %s. Create a new key at /user/api.",
				key.ExpiresAt.UTC().Format(time.RFC3339)))
		case err != nil:
			return fmt.Errorf("verify API key: %w", err)
		}
	}
	return s.admit(in, st, key, p)
}

// admit decides on a request whose key was verified (p nil) or refused (p): the page's origin, the quota of the key
// (or of the client address without a valid key or from a page the key refuses), then the operation's scopes. On
// success the key becomes the request's principal. Stream tokens come here too: a token is no way around its key's
// origins.
func (s *Server) admit(in *openapi3filter.AuthenticationInput, st *requestState, key apikey.Key, p *Problem) error {
	if p == nil {
		p = s.allowOrigin(in.RequestValidationInput.Request, st.header, key)
	}
	if p != nil {
		// No valid key, or one used from a page it may not be used from: the request is charged to its client
		// address instead (401 or 403 within the quota, 429 above).
		if lp := s.limitAddress(st); lp != nil {
			return lp
		}
		return p
	}
	op := s.ops.byID[in.RequestValidationInput.Route.Operation.OperationID]
	if key.Browser() {
		return s.admitBrowser(in, st, key, op)
	}
	// The quota first: every request of a valid key counts and is answered with its RateLimit headers, the ones
	// refused for scope included.
	if p := s.limit(st, key); p != nil {
		return p
	}
	if op == nil || !apikey.GrantsAll(key.Scopes, op.Scopes) {
		var required []string
		if op != nil {
			required = op.Scopes
		}
		p := newProblem(problem.InsufficientScope, "This API key lacks the scope this operation needs: "+strings.Join(required, ", ")+".")
		p.RequiredScopes = required
		return p.withHeader(echo.HeaderWWWAuthenticate,
			fmt.Sprintf(`Bearer realm="switchboard", error="insufficient_scope", scope=%q`, strings.Join(required, " ")))
	}
	if p := admitInstances(in, key, op); p != nil {
		return p
	}
	st.key = &key
	return nil
}

// bearerToken extracts the token of an "Authorization: Bearer …" header.
func bearerToken(header string) (string, *Problem) {
	if header == "" {
		return "", newProblem(problem.MissingAPIKey, `Send your API key as "Authorization: Bearer sb_sk_…". Create keys at /user/api.`).
			withHeader(echo.HeaderWWWAuthenticate, `Bearer realm="switchboard"`)
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", unauthorized(problem.InvalidAPIKey, `Use the Bearer scheme: "Authorization: Bearer sb_sk_…".`)
	}
	return strings.TrimSpace(token), nil
}

func unauthorized(code problem.Code, detail string) *Problem {
	return newProblem(code, detail).withHeader(echo.HeaderWWWAuthenticate,
		fmt.Sprintf(`Bearer realm="switchboard", error="invalid_token", error_description=%q`, title(code)))
}

// limit applies the key's and then the workspace's quota and sets the RateLimit-Policy and RateLimit headers on
// st's header. The limiter's requests and decisions, and the RateLimit header's value, are kept in st, which every
// request allocates anyway; both limiter keys are cut from one string.
func (s *Server) limit(st *requestState, key apikey.Key) *Problem {
	// Both quotas in one decision (one round trip with a shared limiter): a request refused by either spends neither.
	keys := "k:" + key.ID + "w:" + key.WorkspaceID
	split := len("k:") + len(key.ID)
	st.quotas = [2]ratelimit.Request{{Key: keys[:split], Policy: s.keyPolicy}, {Key: keys[split:], Policy: s.workspacePolicy}}
	ds := &st.decisions
	s.limiter.TakeAll(st.quotas[:], time.Now(), ds[:])
	kd, wd := ds[0], ds[1]
	if h := st.header; h != nil {
		h["Ratelimit-Policy"] = s.policyHeader
		b := make([]byte, 0, 64)
		b = append(b, `"key";r=`...)
		b = strconv.AppendInt(b, int64(kd.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, int64(ceilSeconds(kd.Reset)), 10)
		b = append(b, `, "workspace";r=`...)
		b = strconv.AppendInt(b, int64(wd.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, int64(ceilSeconds(wd.Reset)), 10)
		st.rateHeader[0] = string(b)
		h["Ratelimit"] = st.rateHeader[:]
	}
	if kd.Allowed && wd.Allowed {
		return nil
	}
	var violated []string
	retry := wd.RetryAfter
	who := "its workspace"
	if !kd.Allowed {
		violated, retry, who = []string{"key"}, kd.RetryAfter, "this API key"
	} else {
		violated = []string{"workspace"}
	}
	secs := max(1, ceilSeconds(retry))
	p := newProblem(problem.RateLimited, fmt.Sprintf("Too many requests for %s; retry in %d seconds.", who, secs))
	p.ViolatedPolicies = violated
	return p.withHeader("Retry-After", strconv.Itoa(secs))
}

func ceilSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// countRefusedEarly charges the quota of a valid key whose request was refused before authentication ran (a method
// the route does not take, a body over the limit) and sets the RateLimit headers on the answer, so that every
// answer to an authenticated request carries them. A missing or invalid key changes nothing: its answer stays.
func (s *Server) countRefusedEarly(c echo.Context) {
	h := c.Response().Header()
	if h.Get("Ratelimit") != "" || !strings.HasPrefix(c.Request().URL.Path, "/api/") {
		return
	}
	token, p := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
	if p != nil {
		return
	}
	key, err := s.verifier.Verify(c.Request().Context(), token)
	if err != nil {
		return
	}
	_ = s.limit(&requestState{header: h}, key)
}
