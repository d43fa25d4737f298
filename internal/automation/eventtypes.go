package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// CustomPrefix starts every custom event type's name. Built-in types never do, so a workspace's type can never
// collide with one the product adds later, and "custom.*" subscribes to all of a workspace's own.
const CustomPrefix = "custom."

// maxSchemaBytes bounds a type's JSON Schema.
const maxSchemaBytes = 64 << 10

// anyObject is the schema of a type created for a source without one: any JSON object.
var anyObject = json.RawMessage(`{"type":"object"}`)

// NewType is a custom event type as a client describes it.
type NewType struct {
	Name, Description string
	Schema, Example   map[string]any
}

// TypeChange is a partial update of a custom type: nil members stay.
type TypeChange struct {
	Description     *string
	Schema, Example map[string]any
	Archived        *bool
}

// compiledType is a type's compiled schema, valid while the type's updated_at is unchanged.
type compiledType struct {
	updatedAt time.Time
	schema    *jsonschema.Schema
}

type schemaCache struct {
	mu sync.Mutex
	m  map[string]compiledType
}

// compileSchema compiles a JSON Schema (draft 2020-12 unless it names another draft). References to other
// documents are refused: the loader reads nothing, so a schema can never make the server fetch a URL.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("urn:switchboard:schema", doc); err != nil {
		return nil, err
	}
	return c.Compile("urn:switchboard:schema")
}

// noLoader refuses every external reference of a schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references to other documents (%s) are not supported", url)
}

// dataErrors validates data (decoded by jsonschema.UnmarshalJSON) against sch and returns its failures with
// pointers under prefix ("/data" for a published event, "" for a source's body).
func dataErrors(sch *jsonschema.Schema, data any, prefix string) problem.Fields {
	err := sch.Validate(data)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return problem.Fields{{Pointer: prefix, Detail: err.Error()}}
	}
	var out problem.Fields
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil || len(out) == 50 {
			continue
		}
		out = append(out, problem.Field{Pointer: prefix + u.InstanceLocation, Detail: u.Error.String()})
	}
	if len(out) == 0 {
		out = problem.Fields{{Pointer: prefix, Detail: ve.Error()}}
	}
	return out
}

// checkTypeName refuses a name outside the custom namespace.
func checkTypeName(errs *problem.Fields, pointer, name string) {
	if !strings.HasPrefix(name, CustomPrefix) {
		errs.Add(pointer, "custom event type names start with "+CustomPrefix)
	}
}

// checkSchemaAndExample compiles schema and checks example against it; it returns the encoded pair.
func checkSchemaAndExample(errs *problem.Fields, schema, example map[string]any) (json.RawMessage, json.RawMessage) {
	rawSchema, _ := json.Marshal(schema)
	if example == nil {
		example = map[string]any{}
	}
	rawExample, _ := json.Marshal(example)
	if len(rawSchema) > maxSchemaBytes {
		errs.Add("/schema", fmt.Sprintf("is %d bytes as JSON; the limit is %d", len(rawSchema), maxSchemaBytes))
		return nil, nil
	}
	sch, err := compileSchema(rawSchema)
	if err != nil {
		errs.Add("/schema", "is not a usable JSON Schema: "+err.Error())
		return nil, nil
	}
	ex, _ := jsonschema.UnmarshalJSON(bytes.NewReader(rawExample))
	for _, f := range dataErrors(sch, ex, "/example") {
		errs.Add(f.Pointer, f.Detail)
	}
	return rawSchema, rawExample
}

// CreateType adds a custom event type to a workspace. Returns a ValidationFailed problem for a name outside the
// custom namespace, a schema that does not compile or an example that does not match it, and an EventTypeExists
// problem if the workspace has a type of that name.
func (s *Service) CreateType(ctx context.Context, workspaceID string, n NewType) (events.Type, error) {
	var errs problem.Fields
	checkTypeName(&errs, "/name", n.Name)
	schema, example := checkSchemaAndExample(&errs, n.Schema, n.Example)
	if err := errs.Err(); err != nil {
		return events.Type{}, err
	}
	def := store.EventTypeDef{WorkspaceID: workspaceID, Name: n.Name, Description: strings.TrimSpace(n.Description),
		Schema: schema, Example: example}
	if err := s.db.EventTypes.Create(ctx, nil, &def); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return events.Type{}, problem.Errorf(problem.EventTypeExists,
				"This workspace already has the event type %s; change it with PATCH /api/v1/event-types/%s.", n.Name, n.Name)
		}
		return events.Type{}, err
	}
	return s.define(def)
}

// UpdateType changes a workspace's custom type. Returns a NotFound problem if the workspace has no custom type of
// that name (built-in types cannot be changed), and a ValidationFailed problem for a schema that does not compile
// or an example that does not match it.
//
// The change is computed from the type as read — the schema compiled and the example checked outside any
// transaction, so that the writer is not held for that work — and written only if the type is still that version;
// a change made meanwhile makes it start over from the new version, so that concurrent changes of different fields
// all stay.
func (s *Service) UpdateType(ctx context.Context, workspaceID, name string, c TypeChange) (events.Type, error) {
	for {
		def, err := s.db.EventTypes.Get(ctx, nil, workspaceID, name)
		if errors.Is(err, store.ErrNotFound) {
			return events.Type{}, noType(name)
		}
		if err != nil {
			return events.Type{}, err
		}
		if err := s.changeType(&def, c); err != nil {
			return events.Type{}, err
		}
		err = s.db.EventTypes.Update(ctx, &def)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrNotFound):
			return events.Type{}, noType(name)
		case err != nil:
			return events.Type{}, err
		}
		return s.define(def)
	}
}

// changeType applies c to def. Returns a ValidationFailed problem for a schema that does not compile or an example
// that does not match it.
func (s *Service) changeType(def *store.EventTypeDef, c TypeChange) error {
	if c.Description != nil {
		def.Description = strings.TrimSpace(*c.Description)
	}
	if c.Archived != nil {
		def.Archived = *c.Archived
	}
	if c.Schema == nil && c.Example == nil {
		return nil
	}
	schema, example := c.Schema, c.Example
	if schema == nil {
		_ = json.Unmarshal(def.Schema, &schema)
	}
	if example == nil {
		_ = json.Unmarshal(def.Example, &example)
	}
	var errs problem.Fields
	def.Schema, def.Example = checkSchemaAndExample(&errs, schema, example)
	return errs.Err()
}

// Types returns the catalogue a workspace sees: the built-in types and its own, by name, its own read again so that
// changes made by another process show.
func (s *Service) Types(ctx context.Context, workspaceID string) ([]events.Type, error) {
	defs, err := s.db.EventTypes.List(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if _, err := s.define(d); err != nil {
			return nil, err
		}
	}
	return s.types.Types(workspaceID), nil
}

// Type returns one type a workspace sees. Returns a NotFound problem if there is none of that name.
func (s *Service) Type(ctx context.Context, workspaceID, name string) (events.Type, error) {
	if strings.HasPrefix(name, CustomPrefix) {
		t, _, err := s.customType(ctx, nil, workspaceID, name)
		return t, err
	}
	t, ok := s.types.Lookup(workspaceID, name)
	if !ok {
		return events.Type{}, problem.Errorf(problem.NotFound, "There is no event type %q. GET /api/v1/event-types lists them.", name)
	}
	return t, nil
}

func noType(name string) *problem.Error {
	return problem.Errorf(problem.NotFound, "This workspace has no custom event type %q. GET /api/v1/event-types lists them.", name)
}

// define puts a stored type into the registry (replacing an older version of it) and returns it.
func (s *Service) define(d store.EventTypeDef) (events.Type, error) {
	var schema, example map[string]any
	if err := json.Unmarshal(d.Schema, &schema); err != nil {
		return events.Type{}, fmt.Errorf("automation: event type %s: schema: %w", d.Name, err)
	}
	if err := json.Unmarshal(d.Example, &example); err != nil {
		return events.Type{}, fmt.Errorf("automation: event type %s: example: %w", d.Name, err)
	}
	t := events.Type{Name: d.Name, Description: d.Description, Schema: schema, Example: example,
		WorkspaceID: d.WorkspaceID, Archived: d.Archived}
	if err := s.types.Define(t); err != nil {
		return events.Type{}, err
	}
	t, _ = s.types.Lookup(d.WorkspaceID, d.Name)
	return t, nil
}

// customType reads a workspace's custom type on db (nil: the reader) — from the database, so that a change made by
// another process counts — and returns it with its compiled schema. Returns a NotFound problem if there is none.
func (s *Service) customType(ctx context.Context, db bun.IDB, workspaceID, name string) (events.Type, *jsonschema.Schema, error) {
	def, err := s.db.EventTypes.Get(ctx, db, workspaceID, name)
	if errors.Is(err, store.ErrNotFound) {
		return events.Type{}, nil, noType(name)
	}
	if err != nil {
		return events.Type{}, nil, err
	}
	key := workspaceID + "\x00" + name
	s.schemas.mu.Lock()
	c, ok := s.schemas.m[key]
	s.schemas.mu.Unlock()
	if !ok || !c.updatedAt.Equal(def.UpdatedAt) {
		sch, err := compileSchema(def.Schema)
		if err != nil {
			return events.Type{}, nil, fmt.Errorf("automation: stored schema of %s: %w", name, err)
		}
		c = compiledType{updatedAt: def.UpdatedAt, schema: sch}
		s.schemas.mu.Lock()
		s.schemas.m[key] = c
		s.schemas.mu.Unlock()
	}
	t, known := s.types.Lookup(workspaceID, name)
	if !known || t.Archived != def.Archived || t.Description != def.Description {
		if t, err = s.define(def); err != nil {
			return events.Type{}, nil, err
		}
	}
	t.Archived = def.Archived
	return t, c.schema, nil
}

// checkPublishable reads the type an event is published as and checks data (decoded by jsonschema.UnmarshalJSON)
// against it. Returns a NotFound problem if the workspace has no such type, an EventTypeArchived problem if it is
// archived, and an EventDataInvalid problem with a pointer (under prefix) per failure.
func (s *Service) checkPublishable(ctx context.Context, workspaceID, name string, data any, prefix string) error {
	t, sch, err := s.customType(ctx, nil, workspaceID, name)
	if err != nil {
		return err
	}
	if t.Archived {
		return problem.Errorf(problem.EventTypeArchived,
			"The event type %s is archived and refuses new events; un-archive it with PATCH /api/v1/event-types/%s.", name, name)
	}
	if fields := dataErrors(sch, data, prefix); len(fields) > 0 {
		e := problem.Errorf(problem.EventDataInvalid, "The data does not match the schema of %s (%d failure(s)).", name, len(fields))
		e.Fields = fields
		return e
	}
	return nil
}

// Publish records an event of a workspace's custom type with its deliveries. Returns a ValidationFailed problem
// for a name outside the custom namespace, a NotFound problem if the workspace has no such type, an
// EventTypeArchived problem if it is archived, and an EventDataInvalid problem if data does not match its schema.
func (s *Service) Publish(ctx context.Context, workspaceID, typeName string, data map[string]any) (store.Event, error) {
	var errs problem.Fields
	checkTypeName(&errs, "/type", typeName)
	if err := errs.Err(); err != nil {
		return store.Event{}, err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return store.Event{}, err
	}
	decoded, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return store.Event{}, err
	}
	if err := s.checkPublishable(ctx, workspaceID, typeName, decoded, "/data"); err != nil {
		return store.Event{}, err
	}
	var ev store.Event
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		ev, err = s.outbox.EmitJSON(ctx, tx, workspaceID, typeName, raw)
		return err
	})
	return ev, err
}
