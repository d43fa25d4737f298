package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// ListProviders answers GET /api/v1/providers.
func (s *Server) ListProviders(ctx context.Context, _ gen.ListProvidersRequestObject) (gen.ListProvidersResponseObject, error) {
	out := gen.ProviderList{Object: "list", Data: []gen.Provider{}}
	for _, info := range s.channels.Providers() {
		out.Data = append(out.Data, providerAPI(info))
	}
	return gen.ListProviders200JSONResponse{Body: out}, nil
}

// GetProvider answers GET /api/v1/providers/{provider}.
func (s *Server) GetProvider(ctx context.Context, req gen.GetProviderRequestObject) (gen.GetProviderResponseObject, error) {
	info, err := s.channels.Provider(req.Provider)
	if err != nil {
		return nil, err
	}
	return gen.GetProvider200JSONResponse{Body: providerAPI(info)}, nil
}

// providerAPI is the API's Provider of a provider's Info.
func providerAPI(info channels.Info) gen.Provider {
	out := gen.Provider{Object: gen.ProviderObjectProvider, Name: info.Name, Title: info.Title,
		Description: info.Description, Capabilities: []gen.Capability{}, AuthMethods: []gen.AuthMethod{},
		ConfigSchema: info.ConfigSchema, AddressFormat: info.AddressFormat, AddressExample: info.AddressExample}
	for _, c := range info.Capabilities {
		out.Capabilities = append(out.Capabilities, gen.Capability(c))
	}
	for _, m := range info.AuthMethods {
		out.AuthMethods = append(out.AuthMethods, gen.AuthMethod(m))
	}
	if out.ConfigSchema == nil {
		out.ConfigSchema = map[string]any{"type": "object"}
	}
	return out
}

func instanceLocation(id string) *string {
	loc := "/api/v1/instances/" + id
	return &loc
}

// CreateInstance answers POST /api/v1/instances.
func (s *Server) CreateInstance(ctx context.Context, req gen.CreateInstanceRequestObject) (gen.CreateInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	inst, err := s.channels.Create(ctx, key.WorkspaceID, channels.NewInstance{Name: b.Name, Provider: b.Provider,
		Config: deref(b.Config), Metadata: deref(b.Metadata), Pacing: pacingOf(b.Pacing), Calls: callsOf(b.Calls),
		Proxy: proxyOf(b.Proxy)})
	if err != nil {
		return nil, err
	}
	return gen.CreateInstance201JSONResponse{Body: s.channels.InstanceAPI(inst),
		Headers: gen.CreateInstance201ResponseHeaders{Location: instanceLocation(inst.ID)}}, nil
}

// ListInstances answers GET /api/v1/instances.
func (s *Server) ListInstances(ctx context.Context, req gen.ListInstancesRequestObject) (gen.ListInstancesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	page, err := pageFrom(q.Limit, q.Cursor, "ins_", false)
	if err != nil {
		return nil, err
	}
	var f store.InstanceFilter
	if q.Status != nil {
		f.Status = string(*q.Status)
	}
	if q.Provider != nil {
		f.Provider = *q.Provider
	}
	if key.Limited() {
		f.IDs = key.InstanceIDs
	}
	rows, more, err := s.channels.List(ctx, key.WorkspaceID, f, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(i store.Instance) string { return i.ID },
		func(i store.Instance) (gen.Instance, error) { return s.channels.InstanceAPI(i), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListInstances200JSONResponse{Body: gen.InstanceList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetInstance answers GET /api/v1/instances/{instance_id}.
func (s *Server) GetInstance(ctx context.Context, req gen.GetInstanceRequestObject) (gen.GetInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := s.channels.Get(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.GetInstance200JSONResponse{Body: s.channels.InstanceAPI(inst)}, nil
}

// UpdateInstance answers PATCH /api/v1/instances/{instance_id}.
func (s *Server) UpdateInstance(ctx context.Context, req gen.UpdateInstanceRequestObject) (gen.UpdateInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	u := channels.InstanceUpdate{Name: b.Name, Config: b.Config, Metadata: (*map[string]any)(b.Metadata),
		Pacing: pacingOf(b.Pacing), Calls: callsOf(b.Calls), RemoveProxy: b.Proxy.IsNull()}
	if p, err := b.Proxy.Get(); err == nil {
		u.Proxy = proxyOf(&p)
	}
	inst, err := s.channels.Update(ctx, key.WorkspaceID, req.InstanceId, u)
	if err != nil {
		return nil, err
	}
	return gen.UpdateInstance200JSONResponse{Body: s.channels.InstanceAPI(inst)}, nil
}

// DeleteInstance answers DELETE /api/v1/instances/{instance_id}.
func (s *Server) DeleteInstance(ctx context.Context, req gen.DeleteInstanceRequestObject) (gen.DeleteInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.channels.Delete(ctx, key.WorkspaceID, req.InstanceId); err != nil {
		return nil, err
	}
	return gen.DeleteInstance204Response{}, nil
}

// ConnectInstance answers POST /api/v1/instances/{instance_id}/connect.
func (s *Server) ConnectInstance(ctx context.Context, req gen.ConnectInstanceRequestObject) (gen.ConnectInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := s.channels.Connect(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.ConnectInstance200JSONResponse{Body: s.channels.InstanceAPI(inst)}, nil
}

// DisconnectInstance answers POST /api/v1/instances/{instance_id}/disconnect.
func (s *Server) DisconnectInstance(ctx context.Context, req gen.DisconnectInstanceRequestObject) (gen.DisconnectInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := s.channels.Disconnect(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.DisconnectInstance200JSONResponse{Body: s.channels.InstanceAPI(inst)}, nil
}

// LogoutInstance answers POST /api/v1/instances/{instance_id}/logout.
func (s *Server) LogoutInstance(ctx context.Context, req gen.LogoutInstanceRequestObject) (gen.LogoutInstanceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := s.channels.Logout(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.LogoutInstance200JSONResponse{Body: s.channels.InstanceAPI(inst)}, nil
}

// GetInstanceQR answers GET /api/v1/instances/{instance_id}/qr.
func (s *Server) GetInstanceQR(ctx context.Context, req gen.GetInstanceQRRequestObject) (gen.GetInstanceQRResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := s.channels.QR(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	qr, err := channels.QRCodeOf(inst)
	if err != nil {
		return nil, err
	}
	return gen.GetInstanceQR200JSONResponse{Body: gen.InstanceQR{Object: gen.InstanceQRObjectInstanceQr,
		InstanceId: qr.InstanceID, Code: qr.Code, Image: qr.Image, ExpiresAt: qr.ExpiresAt}}, nil
}

// pacingOf is the service's pacing of the API's (nil stays nil).
func pacingOf(p *gen.InstancePacing) *channels.Pacing {
	if p == nil {
		return nil
	}
	return &channels.Pacing{Rate: int(p.RatePerMinute), Burst: int(p.Burst)}
}

// callsOf is an instance's calls setting as the API gives it (nil: not given).
func callsOf(c *gen.InstanceCalls) *channels.Calls {
	if c == nil {
		return nil
	}
	return &channels.Calls{Reject: c.Reject, Message: deref(c.Message)}
}

// proxyOf is an instance's proxy as the API gives it (nil: not given).
func proxyOf(p *gen.InstanceProxy) *channels.ProxySetting {
	if p == nil {
		return nil
	}
	return &channels.ProxySetting{URL: p.Url, Username: deref(p.Username), Password: p.Password}
}
