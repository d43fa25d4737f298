package handlers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
)

// channelHookRoute is where networks that push over HTTP (Telegram, WhatsApp Cloud) deliver an instance's updates.
// No API key: the provider verifies each push over its raw body with the instance's own secret, which is why these
// routes are served outside the generated strict server.
const channelHookRoute = "/hooks/channels/:instance_id"

var instanceIDPattern = regexp.MustCompile(`^ins_[0-9A-HJKMNP-TV-Z]{26}$`)

// registerChannelHooks adds the hook URL of instances: POST takes a push, GET answers a URL check.
func (s *Server) registerChannelHooks(e *echo.Echo) {
	e.POST(channelHookRoute, s.channelPush)
	e.GET(channelHookRoute, s.channelPush)
}

// channelPush verifies a push (or URL check) with the named instance's secret and answers once what it carries is
// stored.
func (s *Server) channelPush(c echo.Context) error {
	id := c.Param("instance_id")
	if !instanceIDPattern.MatchString(id) {
		return newProblem(problem.NotFound, "There is no instance at this URL.")
	}
	policy := ratelimit.Policy{Name: "hook", Quota: s.cfg.HookRateLimit, Window: time.Minute}
	d := s.limiter.Take("hook:"+id, policy, time.Now())
	setRateHeaders(c.Response().Header(), policy, d)
	if !d.Allowed {
		secs := max(1, ceilSeconds(d.RetryAfter))
		return newProblem(problem.RateLimited, fmt.Sprintf("This instance's hook URL takes %d pushes a minute; retry in %d seconds.",
			s.cfg.HookRateLimit, secs)).withHeader("Retry-After", strconv.Itoa(secs))
	}
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		if p := tooLarge(err); p != nil {
			return p
		}
		return newProblem(problem.MalformedJSON, "The request body could not be read to its end.")
	}
	// The network is answered only after the push is stored; a client that hangs up does not cut that short.
	ctx := context.WithoutCancel(req.Context())
	ans, err := s.channels.Receive(ctx, id, channels.Push{Method: req.Method, Header: req.Header,
		Query: req.URL.Query(), Body: body})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodGet {
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(ans.Challenge))
	}
	return c.JSON(http.StatusOK, gen.ChannelPushResult{Object: gen.ChannelPushResultObjectChannelPushResult, Applied: ans.Applied})
}

// ListTemplates answers GET /api/v1/instances/{instance_id}/templates.
func (s *Server) ListTemplates(ctx context.Context, req gen.ListTemplatesRequestObject) (gen.ListTemplatesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.channels.Templates(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	out := gen.TemplateList{Object: gen.TemplateListObjectList, Data: make([]gen.Template, len(list))}
	for i, t := range list {
		comps := t.Components
		if comps == nil {
			comps = []map[string]any{}
		}
		out.Data[i] = gen.Template{Object: gen.TemplateObjectTemplate, Name: t.Name, Language: t.Language,
			Status: t.Status, Category: t.Category, Components: comps}
	}
	return gen.ListTemplates200JSONResponse{Body: out}, nil
}
