package handlers

import (
	"context"
	"errors"
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
// stored. A verified push is charged to the instance's quota; one that is refused (no such instance, a provider
// that takes none, a signature that does not verify) to the sender's address, like a request without a valid API
// key: whoever knows an instance's ID cannot spend its quota, and a flood of forged pushes from one address stops
// at the address quota before it costs a lookup.
func (s *Server) channelPush(c echo.Context) error {
	req := c.Request()
	st := stateFrom(req.Context())
	refused := func(p error) error {
		if lp := s.limitAddress(st); lp != nil {
			return lp
		}
		return p
	}
	id := c.Param("instance_id")
	if !instanceIDPattern.MatchString(id) {
		return refused(newProblem(problem.NotFound, "There is no instance at this URL."))
	}
	if !s.limiter.Peek(addressKey(c), s.addressPolicy, time.Now()).Allowed {
		if lp := s.limitAddress(st); lp != nil {
			return lp
		}
	}
	// The instance's quota is taken before the push is verified, so that the pushes its network sends at once
	// cannot all pass it, and given back when the push is refused.
	policy := ratelimit.Policy{Name: "hook", Quota: s.cfg.HookRateLimit, Window: time.Minute}
	key := "hook:" + id
	d := s.limiter.Take(key, policy, time.Now())
	if !d.Allowed {
		setRateHeaders(c.Response().Header(), policy, d)
		secs := max(1, ceilSeconds(d.RetryAfter))
		return newProblem(problem.RateLimited, fmt.Sprintf("This instance's hook URL takes %d pushes a minute; retry in %d seconds.",
			s.cfg.HookRateLimit, secs)).withHeader("Retry-After", strconv.Itoa(secs))
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		s.limiter.Refund(key, policy)
		if p := tooLarge(err); p != nil {
			return refused(p)
		}
		return refused(newProblem(problem.MalformedJSON, "The request body could not be read to its end."))
	}
	// The network is answered only after the push is stored; a client that hangs up does not cut that short.
	ans, err := s.channels.Receive(context.WithoutCancel(req.Context()), id, channels.Push{Method: req.Method,
		Header: req.Header, Query: req.URL.Query(), Body: body})
	if pushRefused(err) {
		s.limiter.Refund(key, policy)
		return refused(err)
	}
	setRateHeaders(c.Response().Header(), policy, d)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodGet {
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(ans.Challenge))
	}
	return c.JSON(http.StatusOK, gen.ChannelPushResult{Object: gen.ChannelPushResultObjectChannelPushResult, Applied: ans.Applied})
}

// pushRefused reports whether a push was refused before it was verified: the instance it names does not exist,
// takes no pushes, or did not verify it.
func pushRefused(err error) bool {
	var pe *problem.Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case problem.NotFound, problem.HooksNotSupported, problem.SignatureInvalid:
		return true
	}
	return false
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
