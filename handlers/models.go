package handlers

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/modelcatalog"
)

// ListModels answers GET /api/v1/models with the models enabled for the key's workspace.
func (s *Server) ListModels(ctx context.Context, _ gen.ListModelsRequestObject) (gen.ListModelsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	enabled := s.cfg.Models.ForWorkspace(key.EnabledModels)
	data := make([]gen.Model, len(enabled))
	for i, m := range enabled {
		data[i] = s.models[m.ID]
	}
	return gen.ListModels200JSONResponse{Body: gen.ModelList{Object: gen.ModelListObjectList, Data: data}}, nil
}

// GetModel answers GET /api/v1/models/{model}; a model that is not enabled for the workspace is not found.
func (s *Server) GetModel(ctx context.Context, req gen.GetModelRequestObject) (gen.GetModelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, ok := s.cfg.Models.Get(req.Model, key.EnabledModels)
	if !ok {
		p := newProblem("model_not_found", fmt.Sprintf("No model %q is enabled for this workspace. GET /api/v1/models lists them.", req.Model))
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
