package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// CustomPrefix starts every custom event type's name. Built-in types never do, so a workspace's type can never
// collide with one the product adds later, and "custom.*" subscribes to all of a workspace's own.
const CustomPrefix = "custom."

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

// schemaCache holds the checked schemas of custom types by workspace and name, each valid while its type's
// updated_at is unchanged.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]cachedSchema
}

type cachedSchema struct {
	updatedAt time.Time
	schema    *typeSchema
	// err is the problem of a stored schema past the bounds (stored before they existed): kept, so that each event
	// published into it does not compile it again only to refuse it.
	err error
}

func cacheKey(workspaceID, name string) string { return workspaceID + "\x00" + name }

func (c *schemaCache) get(key string, updatedAt time.Time) (cachedSchema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, ok := c.m[key]
	return cs, ok && cs.updatedAt.Equal(updatedAt)
}

func (c *schemaCache) put(key string, cs cachedSchema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = cs
}

// check validates data (decoded by jsonschema.UnmarshalJSON) against the schema and returns its failures with
// pointers under prefix ("/data" for a published event, "" for a source's body, "/example" for a type's example).
// Returns errOverBudget when validating costs more than checkBudget, and ctx's error when it ends first.
func (ts *typeSchema) check(ctx context.Context, data any, prefix string) (problem.Fields, error) {
	if f := checkNumbers(data, prefix); len(f) > 0 {
		return f, nil
	}
	c, err := ts.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer ts.release(c)
	err = c.validate(ctx, data)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
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
	return out, nil
}

// checkNumbers refuses numbers the validator would spend long on reading exactly: longer than maxNumberChars as
// written, or with a power of ten beyond maxNumberExponent. (Only a source's body keeps numbers as sent; the API
// reads them as float64, which has neither.)
func checkNumbers(v any, pointer string) problem.Fields {
	switch v := v.(type) {
	case json.Number:
		if !ordinaryNumber(string(v)) {
			return problem.Fields{{Pointer: pointer, Detail: fmt.Sprintf("is a number beyond what an event carries "+
				"(at most %d characters, powers of ten within ±%d)", maxNumberChars, maxNumberExponent)}}
		}
	case map[string]any:
		for k, m := range v {
			if f := checkNumbers(m, pointer+problem.Pointer(k)); len(f) > 0 {
				return f
			}
		}
	case []any:
		for i, item := range v {
			if f := checkNumbers(item, pointer+"/"+strconv.Itoa(i)); len(f) > 0 {
				return f
			}
		}
	}
	return nil
}

func ordinaryNumber(n string) bool {
	if len(n) > maxNumberChars {
		return false
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err == nil && exp >= -maxNumberExponent && exp <= maxNumberExponent
}

// checkTypeName refuses a name outside the custom namespace.
func checkTypeName(errs *problem.Fields, pointer, name string) {
	if !strings.HasPrefix(name, CustomPrefix) {
		errs.Add(pointer, "custom event type names start with "+CustomPrefix)
	}
}

// checkedType is a type's schema and example as a client sent them, checked.
type checkedType struct {
	schema, example json.RawMessage
	checked         *typeSchema
}

// checkSchemaAndExample checks a type's schema — its size, its bounds, that it compiles — and its example against
// it. Problems of the request (errs: the name, a schema that does not compile, an example that does not match)
// come first, as a ValidationFailed problem; then a SchemaTooComplex problem for a schema past its bounds or an
// example that costs more than checkBudget to validate. Returns ctx's error if it ends first.
func checkSchemaAndExample(ctx context.Context, errs problem.Fields, schema, example map[string]any) (checkedType, error) {
	rawSchema, _ := json.Marshal(schema)
	if example == nil {
		example = map[string]any{}
	}
	rawExample, _ := json.Marshal(example)
	if len(rawSchema) > maxSchemaBytes {
		errs.Add(schemaPrefix, fmt.Sprintf("is %d bytes as JSON; the limit is %d", len(rawSchema), maxSchemaBytes))
		return checkedType{}, errs.Err()
	}
	ts, err := newTypeSchema(rawSchema, schemaPrefix, true)
	if p, ok := errors.AsType[*problem.Error](err); ok && p.Code == problem.ValidationFailed {
		return checkedType{}, append(errs, p.Fields...).Err()
	}
	if err := errs.Err(); err != nil {
		return checkedType{}, err
	}
	if err != nil {
		return checkedType{}, err
	}
	ex, _ := jsonschema.UnmarshalJSON(bytes.NewReader(rawExample))
	fields, err := ts.check(ctx, ex, "/example")
	if errors.Is(err, errOverBudget) {
		return checkedType{}, tooComplex(problem.Fields{{Pointer: "/example", Detail: fmt.Sprintf(
			"costs more than %d checks to validate against the schema, the most an event may cost", checkBudget)}})
	}
	if err != nil {
		return checkedType{}, err
	}
	if err := fields.Err(); err != nil {
		return checkedType{}, err
	}
	return checkedType{schema: rawSchema, example: rawExample, checked: ts}, nil
}

// CreateType adds a custom event type to a workspace. Returns a ValidationFailed problem for a name outside the
// custom namespace, a schema that does not compile or an example that does not match it, a SchemaTooComplex problem
// for a schema past its bounds, and an EventTypeExists problem if the workspace has a type of that name.
func (s *Service) CreateType(ctx context.Context, workspaceID string, n NewType) (events.Type, error) {
	var errs problem.Fields
	checkTypeName(&errs, "/name", n.Name)
	checked, err := checkSchemaAndExample(ctx, errs, n.Schema, n.Example)
	if err != nil {
		return events.Type{}, err
	}
	def := store.EventTypeDef{WorkspaceID: workspaceID, Name: n.Name, Description: strings.TrimSpace(n.Description),
		Schema: checked.schema, Example: checked.example}
	if err := s.db.EventTypes.Create(ctx, nil, &def); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return events.Type{}, problem.Errorf(problem.EventTypeExists,
				"This workspace already has the event type %s; change it with PATCH /api/v1/event-types/%s.", n.Name, n.Name)
		}
		return events.Type{}, err
	}
	s.schemas.put(cacheKey(workspaceID, def.Name), cachedSchema{updatedAt: def.UpdatedAt, schema: checked.checked})
	return s.define(def)
}

// UpdateType changes a workspace's custom type. Returns a NotFound problem if the workspace has no custom type of
// that name (built-in types cannot be changed), a ValidationFailed problem for a schema that does not compile or an
// example that does not match it, and a SchemaTooComplex problem for a schema past its bounds.
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
		checked, err := s.changeType(ctx, &def, c)
		if err != nil {
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
		if checked != nil {
			s.schemas.put(cacheKey(workspaceID, name), cachedSchema{updatedAt: def.UpdatedAt, schema: checked})
		}
		return s.define(def)
	}
}

// changeType applies c to def and returns its new schema checked (nil when c changes neither schema nor
// example). Returns the problems of checkSchemaAndExample.
func (s *Service) changeType(ctx context.Context, def *store.EventTypeDef, c TypeChange) (*typeSchema, error) {
	if c.Description != nil {
		def.Description = strings.TrimSpace(*c.Description)
	}
	if c.Archived != nil {
		def.Archived = *c.Archived
	}
	if c.Schema == nil && c.Example == nil {
		return nil, nil
	}
	schema, example := c.Schema, c.Example
	if schema == nil {
		_ = json.Unmarshal(def.Schema, &schema)
	}
	if example == nil {
		_ = json.Unmarshal(def.Example, &example)
	}
	checked, err := checkSchemaAndExample(ctx, nil, schema, example)
	if err != nil {
		return nil, err
	}
	def.Schema, def.Example = checked.schema, checked.example
	return checked.checked, nil
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
		t, _, err := s.customType(ctx, workspaceID, name)
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

// customType reads a workspace's custom type — from the database, so that a change made by another process
// counts — and returns it with its stored form. Returns a NotFound problem if there is none.
func (s *Service) customType(ctx context.Context, workspaceID, name string) (events.Type, store.EventTypeDef, error) {
	def, err := s.db.EventTypes.Get(ctx, nil, workspaceID, name)
	if errors.Is(err, store.ErrNotFound) {
		return events.Type{}, def, noType(name)
	}
	if err != nil {
		return events.Type{}, def, err
	}
	t, known := s.types.Lookup(workspaceID, name)
	if !known || t.Archived != def.Archived || t.Description != def.Description {
		if t, err = s.define(def); err != nil {
			return events.Type{}, def, err
		}
	}
	t.Archived = def.Archived
	return t, def, nil
}

// schemaOf returns the checked schema of a stored type, checked once per version. A stored schema past the bounds
// (stored before they existed) is a SchemaTooComplex problem: it is not run.
func (s *Service) schemaOf(def store.EventTypeDef) (*typeSchema, error) {
	key := cacheKey(def.WorkspaceID, def.Name)
	if cs, ok := s.schemas.get(key, def.UpdatedAt); ok {
		return cs.schema, cs.err
	}
	ts, err := newTypeSchema(def.Schema, "", false)
	if p, ok := errors.AsType[*problem.Error](err); ok {
		var bounds []string
		for _, f := range p.Fields {
			bounds = append(bounds, f.Pointer+": "+f.Detail)
		}
		err = problem.Errorf(problem.SchemaTooComplex, "The schema of %s passes bounds that keep validation cheap "+
			"(%s); change it with PATCH /api/v1/event-types/%s.", def.Name, strings.Join(bounds, "; "), def.Name)
	} else if err != nil {
		return nil, fmt.Errorf("automation: stored schema of %s: %w", def.Name, err)
	}
	s.schemas.put(key, cachedSchema{updatedAt: def.UpdatedAt, schema: ts, err: err})
	return ts, err
}

// checkPublishable reads the type an event is published as and checks data (decoded by jsonschema.UnmarshalJSON)
// against it. Returns a NotFound problem if the workspace has no such type, an EventTypeArchived problem if it is
// archived, an EventDataInvalid problem with a pointer (under prefix) per failure, a SchemaTooComplex problem if
// its schema passes the bounds or validating data costs more than an event may, and ctx's error if it ends first
// (validation stops then).
func (s *Service) checkPublishable(ctx context.Context, workspaceID, name string, data any, prefix string) error {
	t, def, err := s.customType(ctx, workspaceID, name)
	if err != nil {
		return err
	}
	if t.Archived {
		return problem.Errorf(problem.EventTypeArchived,
			"The event type %s is archived and refuses new events; un-archive it with PATCH /api/v1/event-types/%s.", name, name)
	}
	ts, err := s.schemaOf(def)
	if err != nil {
		return err
	}
	fields, err := ts.check(ctx, data, prefix)
	if errors.Is(err, errOverBudget) {
		return problem.Errorf(problem.SchemaTooComplex, "Validating this data against the schema of %s costs more "+
			"than %d checks, the most one event may cost; send less data in one event, or simplify the schema.",
			name, checkBudget)
	}
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		e := problem.Errorf(problem.EventDataInvalid, "The data does not match the schema of %s (%d failure(s)).", name, len(fields))
		e.Fields = fields
		return e
	}
	return nil
}

// Publish records an event of a workspace's custom type with its deliveries. Returns a ValidationFailed problem
// for a name outside the custom namespace, a NotFound problem if the workspace has no such type, an
// EventTypeArchived problem if it is archived, and an EventDataInvalid problem if data does not match its schema.
func (s *Service) Publish(ctx context.Context, workspaceID, typeName string, data map[string]any) (events.Event, error) {
	var errs problem.Fields
	checkTypeName(&errs, "/type", typeName)
	if err := errs.Err(); err != nil {
		return events.Event{}, err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return events.Event{}, err
	}
	decoded, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return events.Event{}, err
	}
	if err := s.checkPublishable(ctx, workspaceID, typeName, decoded, "/data"); err != nil {
		return events.Event{}, err
	}
	var ev store.Event
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		ev, err = s.outbox.EmitJSON(ctx, tx, workspaceID, typeName, raw)
		return err
	})
	return events.Of(ev), err
}
