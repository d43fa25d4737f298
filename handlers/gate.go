package handlers

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/switchboard/switchboard/internal/problem"
)

// Gate is the HTTP handler of a process whose server is still being built: until Open hands it the server, every
// request is answered at once with 503 service_unavailable and Retry-After. serve takes its address before it
// opens the database, so that a start that cannot serve changes nothing; meanwhile a client that comes early (a
// visitor of a short link while the server restarts) is told to come back instead of waiting in the accept queue,
// perhaps longer than it is willing to wait: a redirect is never served, and its click counted, to a client that
// gave up on it.
type Gate struct{ srv atomic.Pointer[Server] }

// Open makes the gate hand every later request to s.
func (g *Gate) Open(s *Server) { g.srv.Store(s) }

// ServeHTTP implements http.Handler.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := g.srv.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	st := &requestState{ID: newRequestID(), Path: r.URL.Path}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", "1")
	h.Set("X-Request-Id", st.ID)
	w.WriteHeader(http.StatusServiceUnavailable)
	p := newProblem(problem.ServiceUnavailable, "The server is starting; retry in a second.")
	_ = json.NewEncoder(w).Encode(p.body(withRequestState(r.Context(), st)))
}
