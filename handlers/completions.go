package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/problem"
)

// CreateChatCompletion answers POST /api/v1/chat/completions: the request goes to the upstream of its model, under
// the workspace's quotas, and the upstream's answer (a completion or its stream) comes back as it is.
func (s *Server) CreateChatCompletion(ctx context.Context, req gen.CreateChatCompletionRequestObject) (gen.CreateChatCompletionResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	// The body was validated against the spec; fields it does not name are kept in AdditionalProperties and
	// encoded again, so that the upstream receives every field the client sent.
	body, err := json.Marshal(req.Body)
	if err != nil {
		return nil, err
	}
	c, err := s.cfg.LLM.Complete(ctx, key.WorkspaceID, body)
	if err != nil {
		return nil, completionProblem(req.Body.Model, err)
	}
	return completionResponse{c: c}, nil
}

// completionProblem maps the llm service's refusals to problems; anything else stays an internal error.
func completionProblem(model string, err error) error {
	var le *llm.LimitError
	var ue *llm.UpstreamError
	switch {
	case errors.Is(err, llm.ErrModelNotFound):
		return modelNotFound(model)
	case errors.As(err, &le):
		secs := max(1, ceilSeconds(le.RetryAfter))
		p := newProblem(problem.RateLimited, fmt.Sprintf("The workspace's model quota (%s) is exhausted; retry in %d seconds.",
			le.Policies[0], secs))
		p.ViolatedPolicies = le.Policies
		return p.withHeader("Retry-After", strconv.Itoa(secs))
	case errors.As(err, &ue) && ue.Status == http.StatusTooManyRequests:
		secs := max(1, ceilSeconds(ue.RetryAfter))
		p := newProblem(problem.RateLimited, "The model's upstream limits requests: "+ue.Message)
		p.ViolatedPolicies = []string{"upstream"}
		return p.withHeader("Retry-After", strconv.Itoa(secs))
	case errors.As(err, &ue) && ue.Rejected:
		return newProblem(problem.UpstreamRejected, ue.Message)
	case errors.As(err, &ue):
		return newProblem(problem.UpstreamError, ue.Message)
	}
	return err
}

// completionResponse writes an upstream's answer through: each read of its body is flushed at once, so that a
// stream's events reach the client as the upstream produces them.
type completionResponse struct{ c *llm.Completion }

// completionWriteTimeout bounds each write of a completion to a client that stopped reading.
const completionWriteTimeout = 30 * time.Second

func (r completionResponse) VisitCreateChatCompletionResponse(w http.ResponseWriter) error {
	defer r.c.Body.Close()
	h := w.Header()
	h.Set("Content-Type", r.c.ContentType)
	h.Set("Cache-Control", "no-store")
	if r.c.Stream {
		h.Set("X-Accel-Buffering", "no") // nginx would hold the chunks back in its buffer
	}
	w.WriteHeader(r.c.Status)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.c.Body.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(completionWriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil // the client left; closing the body ends the upstream's call
			}
			if r.c.Stream {
				_ = rc.Flush()
			}
		}
		if err != nil {
			return nil // the upstream ended (or broke off) the answer, which is already under way
		}
	}
}

// ListModelUpstreams answers GET /api/v1/model-upstreams.
func (s *Server) ListModelUpstreams(ctx context.Context, _ gen.ListModelUpstreamsRequestObject) (gen.ListModelUpstreamsResponseObject, error) {
	ws, svc, err := s.llmService(ctx)
	if err != nil {
		return nil, err
	}
	ups, err := svc.ListUpstreams(ctx, ws)
	if err != nil {
		return nil, err
	}
	return gen.ListModelUpstreams200JSONResponse{Body: gen.ModelUpstreamList{Object: gen.ModelUpstreamListObjectList, Data: ups}}, nil
}

// CreateModelUpstream answers POST /api/v1/model-upstreams.
func (s *Server) CreateModelUpstream(ctx context.Context, req gen.CreateModelUpstreamRequestObject) (gen.CreateModelUpstreamResponseObject, error) {
	ws, svc, err := s.llmService(ctx)
	if err != nil {
		return nil, err
	}
	u, err := svc.CreateUpstream(ctx, ws, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateModelUpstream201JSONResponse{Body: u}, nil
}

// DeleteModelUpstream answers DELETE /api/v1/model-upstreams/{upstream_id}.
func (s *Server) DeleteModelUpstream(ctx context.Context, req gen.DeleteModelUpstreamRequestObject) (gen.DeleteModelUpstreamResponseObject, error) {
	ws, svc, err := s.llmService(ctx)
	if err != nil {
		return nil, err
	}
	if err := svc.DeleteUpstream(ctx, ws, req.UpstreamId); err != nil {
		return nil, err
	}
	return gen.DeleteModelUpstream204Response{}, nil
}

// llmService returns the key's workspace and the model service that keeps its upstreams, or the problem of a server
// built without one.
func (s *Server) llmService(ctx context.Context) (string, *llm.Service, error) {
	key, err := principal(ctx)
	if err != nil {
		return "", nil, err
	}
	if !s.cfg.LLM.HasWorkspaceUpstreams() {
		return "", nil, newProblem(problem.ServiceUnavailable, "This server keeps no model upstreams of workspaces.").
			withHeader("Retry-After", "5")
	}
	return key.WorkspaceID, s.cfg.LLM, nil
}
