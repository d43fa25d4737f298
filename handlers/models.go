package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/problem"
)

// ListModels answers GET /api/v1/models with the models enabled for the key's workspace. The JSON of each distinct
// set of enabled models is encoded once: this is the reference first call and the hottest read of the API.
func (s *Server) ListModels(ctx context.Context, _ gen.ListModelsRequestObject) (gen.ListModelsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if ms, ok := s.upstreamModels(ctx, key.WorkspaceID); ok {
		data := make([]gen.Model, len(ms))
		for i, m := range ms {
			data[i] = upstreamModel(m)
		}
		return gen.ListModels200JSONResponse{Body: gen.ModelList{Object: gen.ModelListObjectList, Data: data}}, nil
	}
	cacheKey := "*"
	if key.EnabledModels != nil {
		cacheKey = "=" + strings.Join(key.EnabledModels, ",")
	}
	if list, ok := s.modelLists.Load(cacheKey); ok {
		return list.(*encodedModelList), nil
	}
	enabled := s.cfg.Models.ForWorkspace(key.EnabledModels)
	data := make([]gen.Model, len(enabled))
	for i, m := range enabled {
		data[i] = s.models[m.ID]
	}
	body, err := json.Marshal(gen.ModelList{Object: gen.ModelListObjectList, Data: data})
	if err != nil {
		return nil, err
	}
	list := &encodedModelList{body: append(body, '\n')}
	if s.modelListCount.Add(1) <= maxCachedModelLists {
		s.modelLists.Store(cacheKey, list)
	}
	return list, nil
}

// maxCachedModelLists bounds the encoded lists kept: one per distinct set of enabled models in use.
const maxCachedModelLists = 1024

// jsonContentType is shared by every answer of encodedModelList: the header needs no slice of its own.
var jsonContentType = []string{"application/json"}

// encodedModelList is a 200 response of listModels whose body is already encoded. The cache holds the pointer, which
// is returned as the response as it is: a cached answer allocates nothing to be handed to the strict server.
type encodedModelList struct{ body []byte }

func (l *encodedModelList) VisitListModelsResponse(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(l.body)
	return err
}

// GetModel answers GET /api/v1/models/{model}; a model that is not enabled for the workspace is not found.
func (s *Server) GetModel(ctx context.Context, req gen.GetModelRequestObject) (gen.GetModelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := s.upstreamModels(ctx, key.WorkspaceID); ok {
		m, _, ok := s.cfg.LLM.Lookup(ctx, key.WorkspaceID, req.Model)
		if !ok {
			return nil, modelNotFound(req.Model)
		}
		return gen.GetModel200JSONResponse{Body: upstreamModel(m)}, nil
	}
	m, ok := s.cfg.Models.Get(req.Model, key.EnabledModels)
	if !ok {
		return nil, modelNotFound(req.Model)
	}
	return gen.GetModel200JSONResponse{Body: s.models[m.ID]}, nil
}

// upstreamModels returns the models a workspace's upstreams serve, the operator's and its own; false when neither
// has any upstream, where the catalogue serves instead.
func (s *Server) upstreamModels(ctx context.Context, workspaceID string) ([]llm.Model, bool) {
	ms := s.cfg.LLM.Models(ctx, workspaceID)
	return ms, s.cfg.LLM.Configured() || len(ms) > 0
}

// modelNotFound is the problem of a model the workspace cannot use.
func modelNotFound(id string) *Problem {
	return newProblem(problem.ModelNotFound, fmt.Sprintf("No model %q is enabled for this workspace. GET /api/v1/models lists them.", id))
}

// upstreamModel maps a model an upstream serves to the API's Model.
func upstreamModel(m llm.Model) gen.Model {
	return gen.Model{Id: m.ID, Object: gen.ModelObjectModel, Created: m.Created, OwnedBy: m.OwnedBy, Upstream: &m.Upstream}
}

// apiModel maps a catalogue entry to the API's Model.
func apiModel(m modelcatalog.Model) gen.Model {
	out := gen.Model{Id: m.ID, Object: gen.ModelObjectModel, Created: m.Created, OwnedBy: m.OwnedBy}
	if m.DisplayName != "" {
		out.DisplayName = &m.DisplayName
	}
	if m.Description != "" {
		out.Description = &m.Description
	}
	if len(m.Capabilities) > 0 {
		caps := make([]gen.ModelCapabilities, len(m.Capabilities))
		for i, c := range m.Capabilities {
			caps[i] = gen.ModelCapabilities(c)
		}
		out.Capabilities = &caps
	}
	if m.ContextWindow > 0 {
		out.ContextWindow = &m.ContextWindow
	}
	return out
}
