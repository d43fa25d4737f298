package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchboard/switchboard/gen"
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
	cacheKey := "*"
	if key.EnabledModels != nil {
		cacheKey = "=" + strings.Join(key.EnabledModels, ",")
	}
	if body, ok := s.modelLists.Load(cacheKey); ok {
		return encodedModelList(body.([]byte)), nil
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
	body = append(body, '\n')
	if s.modelListCount.Add(1) <= maxCachedModelLists {
		s.modelLists.Store(cacheKey, body)
	}
	return encodedModelList(body), nil
}

// maxCachedModelLists bounds the encoded lists kept: one per distinct set of enabled models in use.
const maxCachedModelLists = 1024

// encodedModelList is a 200 response of listModels whose body is already encoded.
type encodedModelList []byte

func (b encodedModelList) VisitListModelsResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}

// GetModel answers GET /api/v1/models/{model}; a model that is not enabled for the workspace is not found.
func (s *Server) GetModel(ctx context.Context, req gen.GetModelRequestObject) (gen.GetModelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, ok := s.cfg.Models.Get(req.Model, key.EnabledModels)
	if !ok {
		p := newProblem(problem.ModelNotFound, fmt.Sprintf("No model %q is enabled for this workspace. GET /api/v1/models lists them.", req.Model))
		return gen.GetModel404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: gen.NotFoundApplicationProblemPlusJSONResponse{Body: p.body(ctx)}}, nil
	}
	return gen.GetModel200JSONResponse{Body: s.models[m.ID]}, nil
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
