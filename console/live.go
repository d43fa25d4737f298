package console

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/eventstream"
)

// Live pages. The instance page, an endpoint's delivery log and the event log follow the workspace's events: a
// small static module (static/console.js, no inline script) asks POST /user/stream-token for a stream token, opens
// the API's event stream (GET /api/v1/events/stream) with it, and on each event fetches the page again and swaps in
// the sections marked data-live, which the server draws as on any load; the module interprets no event data.
//
// The token is the console's own kind (eventstream.IssueConsoleToken): sealed with the server key, valid five
// minutes for opening streams, acting in the session's workspace with webhooks:read only, and refused once the
// session ends or its user leaves the workspace. No API key is made or shown for it. It is minted by a POST that
// carries the session's CSRF token and passes the same-origin check, and its answer is JSON a page of another
// origin cannot read. Without script the pages reload themselves as before (a Refresh in <noscript>).

// streamTokenAnswer is the JSON of POST /user/stream-token.
type streamTokenAnswer struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// URL is the stream's path, for the module to add its filters to.
	URL string `json:"url"`
}

// streamToken answers POST /user/stream-token: a stream token for the session's workspace, or 404 when the console
// has no workspace to follow or the server serves no streams.
func (c *Console) streamToken(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil || c.cfg.StreamBox == nil {
		return ec.JSON(http.StatusNotFound, map[string]string{"error": "nothing to follow"})
	}
	token, expires := eventstream.IssueConsoleToken(c.cfg.StreamBox, ses.ID, ses.Workspace.ID, time.Now())
	ec.Response().Header().Set("Cache-Control", "no-store")
	return ec.JSON(http.StatusOK, streamTokenAnswer{Token: token, ExpiresAt: expires, URL: "/api/v1/events/stream"})
}
