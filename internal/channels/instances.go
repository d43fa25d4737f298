package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/qrcode"
	"github.com/switchboard/switchboard/store"
)

// NewInstance is an instance as a client describes it.
type NewInstance struct {
	Name, Provider string
	Config         map[string]any
	Metadata       map[string]any
	// Pacing is the instance's own send pacing (nil: the server's default).
	Pacing *Pacing
	// Calls is what it does with incoming calls (nil: nothing set).
	Calls *Calls
	// Proxy is the forward proxy its connections go through (nil: none).
	Proxy *ProxySetting
}

// Calls is what an instance does with incoming calls: Reject declines each at once, and Message (when not empty)
// is sent to the caller afterwards.
type Calls struct {
	Reject  bool
	Message string
}

// Pacing is an instance's send pacing: at most Rate messages a minute on average (0: no pacing), Burst back to back.
type Pacing struct{ Rate, Burst int }

// InstanceUpdate is a partial update of an instance; nil fields stay as they are.
type InstanceUpdate struct {
	Name *string
	// Config replaces the config; secrets left out keep their stored value.
	Config   *map[string]any
	Metadata *map[string]any
	Pacing   *Pacing
	Calls    *Calls
	// Proxy replaces the proxy; RemoveProxy drops it.
	Proxy       *ProxySetting
	RemoveProxy bool
}

// transitions are the moves of the state machine: created → connecting → awaiting_auth → connected ↔ reconnecting →
// disconnected | logged_out | failed, and back to connecting from the last three (a new connect). Any live state
// may become restricted (a temporary ban), which goes back to connecting when it ends.
var transitions = map[Status][]Status{
	StatusCreated:      {StatusConnecting, StatusDisconnected},
	StatusConnecting:   {StatusAwaitingAuth, StatusConnected, StatusReconnecting, StatusRestricted, StatusDisconnected, StatusLoggedOut, StatusFailed},
	StatusAwaitingAuth: {StatusAwaitingAuth, StatusConnecting, StatusConnected, StatusReconnecting, StatusRestricted, StatusDisconnected, StatusLoggedOut, StatusFailed},
	StatusConnected:    {StatusReconnecting, StatusRestricted, StatusDisconnected, StatusLoggedOut, StatusFailed},
	StatusReconnecting: {StatusConnecting, StatusAwaitingAuth, StatusConnected, StatusRestricted, StatusDisconnected, StatusLoggedOut, StatusFailed},
	StatusRestricted:   {StatusConnecting, StatusAwaitingAuth, StatusConnected, StatusReconnecting, StatusRestricted, StatusDisconnected, StatusLoggedOut, StatusFailed},
	StatusDisconnected: {StatusConnecting, StatusLoggedOut},
	StatusLoggedOut:    {StatusConnecting},
	StatusFailed:       {StatusConnecting, StatusDisconnected, StatusLoggedOut},
}

// CanMove reports whether the state machine allows a move from one status to another.
func CanMove(from, to Status) bool { return slices.Contains(transitions[from], to) }

// offline are the states in which an instance holds no session.
func offline(s Status) bool {
	return s == StatusCreated || s == StatusDisconnected || s == StatusLoggedOut || s == StatusFailed
}

// Limits of an instance's own data beyond the schema.
const maxMetadataBytes = 8 << 10

func checkMetadata(errs *problem.Fields, m map[string]any) {
	if b, err := json.Marshal(m); err != nil || len(b) > maxMetadataBytes {
		errs.Add("/metadata", fmt.Sprintf("must be a JSON object of at most %d bytes", maxMetadataBytes))
	}
}

// checkConfig validates a config against the provider's JSON Schema and its own rules, and splits it into the
// part shown to clients and the secrets (the schema's writeOnly properties).
func (s *Service) checkConfig(errs *problem.Fields, p Provider, config map[string]any) (public, secrets map[string]any) {
	if config == nil {
		config = map[string]any{}
	}
	info := p.Info()
	sch, err := compileSchema(info.ConfigSchema)
	if err != nil {
		s.log.Error("provider config schema does not compile", "provider", info.Name, "error", err)
		errs.Add("/config", "the provider's config schema is broken; the operator's log has the reason")
		return nil, nil
	}
	doc, err := jsonValue(config)
	if err == nil {
		err = sch.Validate(doc)
	}
	var verr *jsonschema.ValidationError
	switch {
	case errors.As(err, &verr):
		for _, u := range leaves(verr) {
			errs.Add("/config"+u.pointer, u.message)
		}
		return nil, nil
	case err != nil:
		errs.Add("/config", err.Error())
		return nil, nil
	}
	if err := p.ValidateConfig(config); err != nil {
		errs.Add("/config", err.Error())
		return nil, nil
	}
	public, secrets = map[string]any{}, map[string]any{}
	props, _ := info.ConfigSchema["properties"].(map[string]any)
	for k, v := range config {
		if prop, _ := props[k].(map[string]any); prop["writeOnly"] == true {
			secrets[k] = v
		} else {
			public[k] = v
		}
	}
	return public, secrets
}

// compileSchema compiles a provider's config schema (JSON Schema 2020-12 unless it says otherwise).
func compileSchema(schema map[string]any) (*jsonschema.Schema, error) {
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	doc, err := jsonValue(schema)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("config.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("config.json")
}

// jsonValue turns a Go value into the plain JSON value the validator takes.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytesReader(b))
}

// printer words the validator's messages.
var printer = message.NewPrinter(language.English)

type violation struct{ pointer, message string }

// leaves are the innermost failures of a validation error, each at its JSON Pointer.
func leaves(e *jsonschema.ValidationError) []violation {
	if len(e.Causes) == 0 {
		ptr := ""
		for _, seg := range e.InstanceLocation {
			ptr += problem.Pointer(seg)
		}
		return []violation{{ptr, e.ErrorKind.LocalizedString(printer)}}
	}
	var out []violation
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// Create stores a new instance in state created and emits instance.created. Returns a ValidationFailed problem
// for an unknown provider, a config its schema or rules refuse, or metadata too large.
func (s *Service) Create(ctx context.Context, workspaceID string, n NewInstance) (store.Instance, error) {
	var errs problem.Fields
	p, ok := s.provider(n.Provider)
	if !ok {
		errs.Add("/provider", fmt.Sprintf("there is no provider %q; use one of: %s", n.Provider, s.providerNames()))
		return store.Instance{}, errs.Err()
	}
	public, secrets := s.checkConfig(&errs, p, n.Config)
	if n.Metadata != nil {
		checkMetadata(&errs, n.Metadata)
	}
	if err := errs.Err(); err != nil {
		return store.Instance{}, err
	}
	inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: workspaceID, Name: n.Name, Provider: n.Provider,
		Status: string(StatusCreated), StatusReason: "created", Config: public, Metadata: n.Metadata}
	if n.Pacing != nil {
		inst.PacingRate, inst.PacingBurst = &n.Pacing.Rate, &n.Pacing.Burst
	}
	if n.Calls != nil {
		if err := checkCalls(p, *n.Calls); err != nil {
			return store.Instance{}, err
		}
		setCalls(&inst, *n.Calls)
	}
	if n.Proxy != nil {
		if err := s.setProxy(ctx, p, &inst, *n.Proxy); err != nil {
			return store.Instance{}, err
		}
	}
	s.sealSecrets(&inst, secrets)
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := s.db.Instances.Create(ctx, tx, &inst); err != nil {
			return err
		}
		return s.emit(ctx, tx, &inst, func(api gen.Instance) any {
			return gen.InstanceCreatedEvent{Instance: api, InstanceId: inst.ID}
		})
	})
	if err != nil {
		return store.Instance{}, storeError(err, "workspace", workspaceID)
	}
	return inst, nil
}

// sealSecrets stores an instance's secret config sealed for its ID (nil when it has none).
func (s *Service) sealSecrets(inst *store.Instance, secrets map[string]any) {
	inst.SealedSecrets = nil
	if len(secrets) == 0 {
		return
	}
	b, _ := json.Marshal(secrets)
	sealed := s.sealer.Seal(b, []byte(inst.ID))
	inst.SealedSecrets = &sealed
}

// openSecrets returns an instance's secret config.
func (s *Recorder) openSecrets(inst store.Instance) (map[string]any, error) {
	out := map[string]any{}
	if inst.SealedSecrets == nil {
		return out, nil
	}
	b, err := s.sealer.Open(*inst.SealedSecrets, []byte(inst.ID))
	if err != nil {
		return nil, fmt.Errorf("channels: instance %s: secrets do not open with the server key: %w", inst.ID, err)
	}
	return out, json.Unmarshal(b, &out)
}

// Get returns an instance of a workspace. Returns a NotFound problem if it is not in the workspace.
func (s *Service) Get(ctx context.Context, workspaceID, id string) (store.Instance, error) {
	inst, err := s.db.Instances.Get(ctx, workspaceID, id)
	return inst, storeError(err, "instance", id)
}

// List returns a page of a workspace's instances and whether more follow. Its errors are internal.
func (s *Service) List(ctx context.Context, workspaceID string, f store.InstanceFilter, p store.Page) ([]store.Instance, bool, error) {
	return s.db.Instances.List(ctx, workspaceID, f, p)
}

// Update changes an instance's name, config or metadata and emits instance.updated when anything changed. A new
// config applies at the next connect. Returns a NotFound problem if the instance is not in the workspace and a
// ValidationFailed problem for a config or metadata that is refused.
func (s *Service) Update(ctx context.Context, workspaceID, id string, u InstanceUpdate) (store.Instance, error) {
	var inst store.Instance
	err := s.change(ctx, workspaceID, id, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		var errs problem.Fields
		var changed []string
		if u.Name != nil && *u.Name != i.Name {
			i.Name, changed = *u.Name, append(changed, "name")
		}
		if u.Metadata != nil {
			checkMetadata(&errs, *u.Metadata)
			i.Metadata, changed = *u.Metadata, append(changed, "metadata")
		}
		if u.Pacing != nil && (i.PacingRate == nil || *i.PacingRate != u.Pacing.Rate || *i.PacingBurst != u.Pacing.Burst) {
			i.PacingRate, i.PacingBurst = &u.Pacing.Rate, &u.Pacing.Burst
			changed = append(changed, "pacing")
		}
		if u.Calls != nil && (i.CallsReject == nil || *i.CallsReject != u.Calls.Reject || deref(i.CallsMessage) != u.Calls.Message) {
			if p, ok := s.provider(i.Provider); ok {
				if err := checkCalls(p, *u.Calls); err != nil {
					return err
				}
			}
			setCalls(i, *u.Calls)
			changed = append(changed, "calls")
		}
		switch {
		case u.RemoveProxy:
			if clearProxy(i) {
				changed = append(changed, "proxy")
			}
		case u.Proxy != nil:
			p, ok := s.provider(i.Provider)
			if !ok {
				return problem.Errorf(problem.Conflict, "The provider %q of this instance is not available on this server.", i.Provider)
			}
			before := [3]string{deref(i.ProxyURL), deref(i.ProxyUsername), deref(i.ProxySealedPassword)}
			if err := s.setProxy(ctx, p, i, *u.Proxy); err != nil {
				return err
			}
			if before != [3]string{deref(i.ProxyURL), deref(i.ProxyUsername), deref(i.ProxySealedPassword)} {
				changed = append(changed, "proxy")
			}
		}
		if u.Config != nil {
			p, ok := s.provider(i.Provider)
			if !ok {
				return problem.Errorf(problem.Conflict, "The provider %q of this instance is not available on this server.", i.Provider)
			}
			old, err := s.openSecrets(*i)
			if err != nil {
				return err
			}
			config := maps.Clone(*u.Config)
			props, _ := p.Info().ConfigSchema["properties"].(map[string]any)
			for k, v := range old {
				if _, sent := config[k]; !sent && props[k] != nil {
					config[k] = v
				}
			}
			public, secrets := s.checkConfig(&errs, p, config)
			if errs.Err() == nil {
				i.Config = public
				s.sealSecrets(i, secrets)
				changed = append(changed, "config")
			}
		}
		if err := errs.Err(); err != nil {
			return err
		}
		if len(changed) > 0 {
			if err := s.db.Instances.Save(ctx, tx, i); err != nil {
				return err
			}
			if err := s.emit(ctx, tx, i, func(api gen.Instance) any {
				return gen.InstanceUpdatedEvent{Instance: api, Changed: changed, InstanceId: i.ID}
			}); err != nil {
				return err
			}
		}
		inst = *i
		return nil
	})
	return inst, err
}

// change runs fn on the workspace's instance, locked, inside a transaction. Returns a NotFound problem if the
// instance is not in the workspace, and what fn returns.
func (s *Service) change(ctx context.Context, workspaceID, id string, fn func(ctx context.Context, tx store.Tx, i *store.Instance) error) error {
	err := s.inTxFor(ctx, []string{id}, func(ctx context.Context, tx store.Tx) error {
		i, err := s.db.Instances.Lock(ctx, tx, id)
		if err != nil {
			return err
		}
		if i.WorkspaceID != workspaceID {
			return store.ErrNotFound
		}
		return fn(ctx, tx, &i)
	})
	return storeError(err, "instance", id)
}

// Delete logs an instance out (best effort: its session may be offline) and deletes it with its messages, chats,
// contacts and groups, emitting instance.deleted. Returns a NotFound problem if it is not in the workspace.
func (s *Service) Delete(ctx context.Context, workspaceID, id string) error {
	inst, err := s.Get(ctx, workspaceID, id)
	if err != nil {
		return err
	}
	if !offline(Status(inst.Status)) {
		if _, err := s.sessions.Do(ctx, id, Command{Op: cmdLogout.Op()}); err != nil && !errors.Is(err, ErrNotConnected) {
			s.log.Warn("instance delete: logout failed; deleting anyway", "instance_id", id, "error", err)
		}
		if err := s.sessions.Stop(ctx, id); err != nil {
			s.log.Warn("instance delete: stop failed", "instance_id", id, "error", err)
		}
	}
	err = s.inTxFor(ctx, []string{id}, func(ctx context.Context, tx store.Tx) error {
		last, err := s.db.Instances.Lock(ctx, tx, id)
		if err != nil {
			return err
		}
		if last.WorkspaceID != workspaceID {
			return store.ErrNotFound
		}
		// The event is numbered and recorded before the row goes, in the same transaction: its deliveries do not
		// reference the instance.
		if err := s.emit(ctx, tx, &last, func(api gen.Instance) any {
			return gen.InstanceDeletedEvent{Instance: api, InstanceId: id}
		}); err != nil {
			return err
		}
		_, err = s.db.Instances.Delete(ctx, tx, workspaceID, id)
		return err
	})
	return storeError(err, "instance", id)
}

// Connect asks for an instance to be connected: it moves to connecting (from created, disconnected, logged_out or
// failed) and the runtime opens its session. Connecting an instance that is connecting or connected changes
// nothing. Returns a NotFound problem if it is not in the workspace, and an InstanceNotConnected problem on a
// server that runs no channel runtime.
func (s *Service) Connect(ctx context.Context, workspaceID, id string) (store.Instance, error) {
	if nr, none := s.sessions.(noRuntime); none {
		return store.Instance{}, nr.refusal()
	}
	var inst store.Instance
	err := s.change(ctx, workspaceID, id, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		if _, ok := s.provider(i.Provider); !ok {
			return problem.Errorf(problem.Conflict, "The provider %q of this instance is not available on this server.", i.Provider)
		}
		if offline(Status(i.Status)) {
			i.ReconnectAttempt, i.ReconnectNextAt = 0, nil
			if err := s.move(ctx, tx, i, StatusConnecting, "connect requested"); err != nil {
				return err
			}
		}
		inst = *i
		return nil
	})
	if err != nil {
		return store.Instance{}, err
	}
	if err := s.sessions.Start(ctx, id); err != nil {
		return store.Instance{}, err
	}
	return inst, nil
}

// Disconnect closes an instance's connection and keeps its credentials (state disconnected); queued messages wait.
// Returns a NotFound problem if it is not in the workspace.
func (s *Service) Disconnect(ctx context.Context, workspaceID, id string) (store.Instance, error) {
	return s.stop(ctx, workspaceID, id, StatusDisconnected, "disconnected by request", false)
}

// Logout ends an instance's session on the network and drops its credentials (state logged_out). Returns a
// NotFound problem if it is not in the workspace.
func (s *Service) Logout(ctx context.Context, workspaceID, id string) (store.Instance, error) {
	return s.stop(ctx, workspaceID, id, StatusLoggedOut, "logged out by request", true)
}

func (s *Service) stop(ctx context.Context, workspaceID, id string, to Status, reason string, logout bool) (store.Instance, error) {
	inst, err := s.Get(ctx, workspaceID, id)
	if err != nil {
		return store.Instance{}, err
	}
	if !offline(Status(inst.Status)) {
		if logout {
			if _, err := s.sessions.Do(ctx, id, Command{Op: cmdLogout.Op()}); err != nil && !errors.Is(err, ErrNotConnected) {
				s.log.Warn("instance logout: the network was not told", "instance_id", id, "error", err)
			}
		}
		if err := s.sessions.Stop(ctx, id); err != nil {
			return store.Instance{}, err
		}
	}
	err = s.change(ctx, workspaceID, id, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		if logout {
			i.Credentials, i.Account = nil, nil
		}
		if Status(i.Status) != to && (CanMove(Status(i.Status), to) || logout) {
			if err := s.move(ctx, tx, i, to, reason); err != nil {
				return err
			}
		} else if logout {
			if err := s.db.Instances.Save(ctx, tx, i); err != nil {
				return err
			}
		}
		inst = *i
		return nil
	})
	return inst, err
}

// noRuntime is the problem of a call that needs a live session on a server without a channel runtime.

// move changes an instance's status inside tx (the caller saves nothing else afterwards): the reason, the time,
// the auth method and QR code that only belong to awaiting_auth, and the instance.status_changed event.
func (s *Recorder) move(ctx context.Context, tx store.Querier, i *store.Instance, to Status, reason string) error {
	from := Status(i.Status)
	moveTo(i, to, reason)
	if err := s.db.Instances.Save(ctx, tx, i); err != nil {
		return err
	}
	return s.emitNumbered(ctx, tx, s.statusChanged(*i, from))
}

// moveTo sets an instance's state to to with the reason (not saved): since now, the pairing fields dropped unless it
// awaits pairing, the reconnect attempt reset once it is connected or offline.
func moveTo(i *store.Instance, to Status, reason string) {
	i.Status, i.StatusReason, i.StatusSince = string(to), reason, time.Now().UTC().Truncate(time.Microsecond)
	if to != StatusAwaitingAuth {
		i.AuthMethod, i.QRCode, i.QRExpiresAt = nil, nil, nil
	}
	if to == StatusConnected || offline(to) {
		i.ReconnectAttempt, i.ReconnectNextAt = 0, nil
	}
}

// statusChanged is the instance.status_changed event of an instance moved from a state to the one it has now.
func (s *Recorder) statusChanged(i store.Instance, from Status) events.Pending {
	return events.Pending{WorkspaceID: i.WorkspaceID, InstanceID: i.ID, Payload: gen.InstanceStatusChangedEvent{
		Instance: s.InstanceAPI(i), PreviousStatus: gen.InstanceStatus(from), Status: gen.InstanceStatus(i.Status),
		Reason: i.StatusReason, InstanceId: i.ID}}
}

// emit records an event of an instance inside tx with the instance's next sequence number (see emitNumbered: in a
// shared transaction, numbered at its end, after the events emitted before it); build makes the payload from the
// instance as the API shows it.
func (s *Recorder) emit(ctx context.Context, tx store.Querier, i *store.Instance, build func(api gen.Instance) any) error {
	return s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: i.WorkspaceID, InstanceID: i.ID, Payload: build(s.InstanceAPI(*i))})
}

// QR returns the pairing QR code an instance waits to have scanned. Returns a NotFound problem if it is not in the
// workspace, CapabilityNotSupported if its provider does not pair by QR, and Conflict when it is not waiting for a
// scan.
func (s *Service) QR(ctx context.Context, workspaceID, id string) (store.Instance, error) {
	inst, err := s.Get(ctx, workspaceID, id)
	if err != nil {
		return inst, err
	}
	if p, ok := s.provider(inst.Provider); ok && !p.Info().Has(CapAuthQR) {
		return inst, notSupported(inst.Provider, CapAuthQR)
	}
	if Status(inst.Status) != StatusAwaitingAuth || inst.QRCode == nil || inst.QRExpiresAt == nil ||
		!inst.QRExpiresAt.After(time.Now()) {
		return inst, problem.Errorf(problem.Conflict,
			"Instance %s is %s and has no QR code to scan now; connect it and fetch the code while it is awaiting_auth.",
			id, inst.Status)
	}
	return inst, nil
}

// InstanceAPI is the API's Instance of a stored instance: the one shape of an instance in answers and events.
// Secrets are never part of it.
func (s *Recorder) InstanceAPI(i store.Instance) gen.Instance {
	out := gen.Instance{Id: i.ID, Object: gen.InstanceObjectInstance, Name: i.Name, Provider: i.Provider,
		Status: gen.InstanceStatus(i.Status), StatusReason: i.StatusReason, StatusSince: i.StatusSince,
		Capabilities: []gen.Capability{}, Config: i.Config, Metadata: i.Metadata, CreatedAt: i.CreatedAt,
		UpdatedAt: i.UpdatedAt}
	if out.Config == nil {
		out.Config = map[string]any{}
	}
	if out.Metadata == nil {
		out.Metadata = gen.Metadata{}
	}
	if p, ok := s.provider(i.Provider); ok {
		for _, c := range capabilities(p.Info()) {
			out.Capabilities = append(out.Capabilities, gen.Capability(c))
		}
	}
	if u := s.HookURL(i); u != "" {
		out.HookUrl = &u
	}
	if i.AuthMethod != nil {
		m := gen.InstanceAuthMethod(*i.AuthMethod)
		out.AuthMethod = &m
	}
	if i.Account != nil {
		out.Account = &gen.Party{Address: i.Account.Address, DisplayName: nonEmpty(i.Account.DisplayName)}
	}
	if st := Status(i.Status); st == StatusReconnecting || st == StatusRestricted {
		out.Reconnect = &gen.InstanceReconnect{Attempt: i.ReconnectAttempt, NextAt: i.ReconnectNextAt}
	}
	if i.PacingRate != nil && i.PacingBurst != nil {
		out.Pacing = &gen.InstancePacing{RatePerMinute: *i.PacingRate, Burst: *i.PacingBurst}
	}
	if i.CallsReject != nil {
		out.Calls = &gen.InstanceCalls{Reject: *i.CallsReject, Message: i.CallsMessage}
	}
	out.Proxy = proxyAPI(i)
	return out
}

// HookURL is where the network pushes an instance's updates: "" for providers that take no pushes, or when the
// server was given no public URL.
func (s *Recorder) HookURL(i store.Instance) string {
	p, ok := s.provider(i.Provider)
	if _, push := p.(PushReceiver); !ok || !push || s.baseURL == "" {
		return ""
	}
	return s.baseURL + "/hooks/channels/" + i.ID
}

// nonEmpty is s, or nil when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// QRCode is the pairing QR code of an instance awaiting a scan: the code as text and as a PNG data URL.
type QRCode struct {
	InstanceID, Code, Image string
	ExpiresAt               time.Time
}

// QRCodeOf is the QR code of an instance awaiting a QR scan (see QR).
func QRCodeOf(i store.Instance) (QRCode, error) {
	if i.QRCode == nil || i.QRExpiresAt == nil {
		return QRCode{}, fmt.Errorf("channels: instance %s has no QR code", i.ID)
	}
	image, err := qrcode.DataURL(*i.QRCode)
	if err != nil {
		return QRCode{}, err
	}
	return QRCode{InstanceID: i.ID, Code: *i.QRCode, Image: image, ExpiresAt: *i.QRExpiresAt}, nil
}

// InstanceSecrets returns the secret config of an instance, whatever its workspace (what a provider's session
// needs). Returns a NotFound problem if there is no such instance.
func (s *Service) InstanceSecrets(ctx context.Context, id string) (map[string]any, error) {
	inst, err := s.db.Instances.ByID(ctx, s.db.Reader(), id)
	if err != nil {
		return nil, storeError(err, "instance", id)
	}
	return s.openSecrets(inst)
}

// checkCalls refuses to decline calls on a network the provider cannot decline them on.
func checkCalls(p Provider, c Calls) error {
	if c.Reject && !p.Info().Has(CapCallsReject) {
		return notSupported(p.Info().Name, CapCallsReject)
	}
	return nil
}

func setCalls(i *store.Instance, c Calls) {
	i.CallsReject, i.CallsMessage = &c.Reject, nil
	if c.Message != "" {
		i.CallsMessage = &c.Message
	}
}
