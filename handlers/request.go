package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/store"
)

// requestState is what the layers of one request share: set up by requestContext, completed by authenticate, read
// by handlers, problems and the access log. It is one pointer in the request context, so adding the principal
// costs no copy of the request; it is the context itself (a value context of its own), so that carrying it costs
// no allocation besides its own.
type requestState struct {
	// Context is the request's context below the state.
	context.Context
	ID string
	// Path is the request's path with its secrets redacted (see publicPath): what logs and problems show.
	Path string
	// key is the authenticated API key, nil on public routes and before authentication.
	key *apikey.Key
	// header is the response's header map, for headers decided before the handler runs (rate limits).
	header http.Header
	// echo is the request's Echo context: its RealIP is the client address (the connection's, or the trusted
	// proxy's X-Forwarded-For).
	echo echo.Context
	log  *slog.Logger
	// spent is a quota spent for what the request would create (a browser key's daily quota), given back when
	// the request creates nothing: only what is accepted counts.
	spent *ratelimit.Request
	// idHeader holds the X-Request-Id header's value, allocated with the state.
	idHeader [1]string
	// quotas, decisions and rateHeader are the key quotas' scratch (see limit): part of the state's allocation.
	quotas     [2]ratelimit.Request
	decisions  [2]ratelimit.Decision
	rateHeader [1]string
	// txTimeout is the bound of the request's transactions (Config.TxTimeout, boxed once for every request), which
	// the state answers as store.WithTxTimeout's context would.
	txTimeout any
}

type requestStateKey struct{}

// withRequestState returns ctx carrying st (st becomes that context).
func withRequestState(ctx context.Context, st *requestState) context.Context {
	st.Context = ctx
	return st
}

// Value answers the state itself for requestStateKey, as context.WithValue would, and asks the parent otherwise.
func (st *requestState) Value(key any) any {
	if _, ok := key.(requestStateKey); ok {
		return st
	}
	if key == store.TxTimeoutKey && st.txTimeout != nil {
		return st.txTimeout
	}
	return st.Context.Value(key)
}

// stateFrom returns the request's state; outside a request (tests of helpers) an empty one.
func stateFrom(ctx context.Context) *requestState {
	if st, ok := ctx.Value(requestStateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{}
}

// loggerFrom returns a logger that carries the request's ID, or fallback outside a request. It is built on first
// use: most requests log only their access line, which names the ID itself.
func loggerFrom(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	st, ok := ctx.Value(requestStateKey{}).(*requestState)
	if !ok {
		return fallback
	}
	if st.log == nil {
		st.log = fallback.With("request_id", st.ID)
	}
	return st.log
}

// principal returns the key that authenticated the request. Every authenticated operation has one; its absence is
// a wiring bug, reported as an internal error.
func principal(ctx context.Context) (apikey.Key, error) {
	if st := stateFrom(ctx); st.key != nil {
		return *st.key, nil
	}
	return apikey.Key{}, errors.New("handlers: no authenticated key in context")
}

// secretPrefixes are the type prefixes of the product's secrets: a redacted secret keeps its own, so that a reader
// tells an ingest token from a key.
var secretPrefixes = []string{"in_", "sb_sk_", "sb_pk_", "whsec_"}

// redacted is how logs and problems show a secret: its type prefix and its last four characters ("in_***Qz3k", like
// the token_last4 the API shows of a source), enough to tell which one it was and nothing more; the mask is ASCII,
// so a redacted path is still a URI reference. A value too short to spare four characters shows none.
func redacted(secret string) string {
	prefix := ""
	for _, p := range secretPrefixes {
		if strings.HasPrefix(secret, p) {
			prefix = p
			break
		}
	}
	if len(secret)-len(prefix) < 16 {
		return prefix + "***"
	}
	return prefix + "***" + secret[len(secret)-4:]
}

// publicPath is a request's path as the access log and problems show it (metrics name routes, never paths). An ingest URL's path is its
// source's only credential when the source verifies nothing else (scheme none), so its token is redacted — on any
// path under /in/, routed or not.
func publicPath(escapedPath string) string {
	rest, ok := strings.CutPrefix(escapedPath, "/in/")
	if !ok || rest == "" {
		return escapedPath
	}
	token, tail, more := strings.Cut(rest, "/")
	if more {
		tail = "/" + tail
	}
	return "/in/" + redacted(token) + tail
}
