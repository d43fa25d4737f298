package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/switchboard/switchboard/internal/problem"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
)

// Extensions of the spec's component schemas that make the event catalogue.
const (
	// extEventType names the event type whose data the schema describes.
	extEventType = "x-event-type"
	// extEventOptIn marks a high-volume type that "*" does not subscribe to.
	extEventOptIn = "x-event-opt-in"
)

// EventCatalogue is every event type Switchboard emits, read from the spec's component schemas marked
// x-event-type: the one source for GET /api/v1/event-types, for the subscriptions endpoints may take and for test
// pings. Which types are opt-in at run time is the store's to decide (store.OptInEventTypes); the catalogue shows
// the spec's x-event-opt-in, and a test keeps the two equal. It is immutable.
type EventCatalogue struct {
	types  []gen.EventType // by name
	byName map[string]*gen.EventType
}

// NewEventCatalogue reads the catalogue of a spec. It fails when a marked schema has no description or example, or
// names a type twice.
func NewEventCatalogue(spec *openapi3.T) (*EventCatalogue, error) {
	c := &EventCatalogue{byName: map[string]*gen.EventType{}}
	for component, ref := range spec.Components.Schemas {
		name, ok := ref.Value.Extensions[extEventType].(string)
		if !ok {
			continue
		}
		s := ref.Value
		example, ok := s.Example.(map[string]any)
		if !ok || s.Description == "" {
			return nil, fmt.Errorf("event type %s (schema %s) needs a description and an object example", name, component)
		}
		schema, err := jsonSchema(spec, ref)
		if err != nil {
			return nil, fmt.Errorf("event type %s (schema %s): %w", name, component, err)
		}
		optIn, _ := s.Extensions[extEventOptIn].(bool)
		family, _, _ := strings.Cut(name, ".")
		c.types = append(c.types, gen.EventType{Object: gen.EventTypeObjectEventType, Name: name, Family: family,
			Description: strings.TrimSpace(s.Description), OptIn: optIn, Schema: schema, Example: example})
	}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	for i := range c.types {
		t := &c.types[i]
		if c.byName[t.Name] != nil {
			return nil, fmt.Errorf("event type %s is defined twice", t.Name)
		}
		c.byName[t.Name] = t
	}
	return c, nil
}

// Types returns every event type, by name. The slice is shared: do not modify it.
func (c *EventCatalogue) Types() []gen.EventType { return c.types }

// Type returns the event type called name.
func (c *EventCatalogue) Type(name string) (gen.EventType, bool) {
	if t := c.byName[name]; t != nil {
		return *t, true
	}
	return gen.EventType{}, false
}

// subscribable reports whether an endpoint may subscribe to pattern: "*", a type of the catalogue, or the wildcard
// of one of its families ("link.*").
func (c *EventCatalogue) subscribable(pattern string) bool {
	if pattern == "*" || c.byName[pattern] != nil {
		return true
	}
	// A wildcard is any prefix of dotted names that some type of the catalogue starts with: "link.*", and also
	// deeper ones such as "webhook.endpoint.*" (store.Subscribed matches them the same way).
	prefix, ok := strings.CutSuffix(pattern, "*")
	if !ok || !strings.HasSuffix(prefix, ".") {
		return false
	}
	for name := range c.byName {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// ListEventTypes answers GET /api/v1/event-types with the whole catalogue.
func (s *Server) ListEventTypes(context.Context, gen.ListEventTypesRequestObject) (gen.ListEventTypesResponseObject, error) {
	return gen.ListEventTypes200JSONResponse{Body: gen.EventTypeList{Object: gen.EventTypeListObjectList, Data: s.eventTypes.Types()}}, nil
}

// GetEventType answers GET /api/v1/event-types/{event_type}.
func (s *Server) GetEventType(_ context.Context, req gen.GetEventTypeRequestObject) (gen.GetEventTypeResponseObject, error) {
	t, ok := s.eventTypes.Type(req.EventType)
	if !ok {
		return nil, newProblem(problem.NotFound, fmt.Sprintf("There is no event type %q. GET /api/v1/event-types lists them.", req.EventType))
	}
	return gen.GetEventType200JSONResponse{Body: t}, nil
}

// jsonSchema converts a component schema of spec to a plain JSON Schema (draft 2020-12) object for API clients:
// every $ref inlined, OpenAPI's nullable turned into a "null" type, example into examples, and the spec's x-
// extensions left out. It fails on a $ref cycle (a schema that contains itself cannot be inlined).
func jsonSchema(spec *openapi3.T, ref *openapi3.SchemaRef) (map[string]any, error) {
	c := schemaConverter{components: spec.Components.Schemas, inlining: map[string]bool{}}
	v, err := c.decode(ref.Value)
	if err != nil {
		return nil, err
	}
	out, err := c.schema(v)
	if err != nil {
		return nil, err
	}
	out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return out, nil
}

// schemaConverter converts the JSON form of an OpenAPI 3.0 schema, resolving references to components.
type schemaConverter struct {
	components openapi3.Schemas
	// inlining holds the components being inlined, to refuse cycles.
	inlining map[string]bool
}

// decode returns the JSON form of a schema; its subschemas that are references stay {"$ref": …}.
func (c schemaConverter) decode(s *openapi3.Schema) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	return v, json.Unmarshal(b, &v)
}

// schema converts one schema object, its subschemas included.
func (c schemaConverter) schema(v map[string]any) (map[string]any, error) {
	if ref, ok := v["$ref"].(string); ok {
		return c.inline(ref)
	}
	out := make(map[string]any, len(v))
	for k, x := range v {
		if !strings.HasPrefix(k, "x-") && k != "nullable" && k != "example" {
			out[k] = x
		}
	}
	if ex, ok := v["example"]; ok {
		out["examples"] = []any{ex}
	}
	if v["nullable"] == true {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
		if enum, ok := out["enum"].([]any); ok && !slices.Contains(enum, nil) {
			out["enum"] = append(enum, nil)
		}
	}
	var err error
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := out[k].(map[string]any); ok {
			if out[k], err = c.schema(sub); err != nil {
				return nil, err
			}
		}
	}
	if props, ok := out["properties"].(map[string]any); ok {
		conv := make(map[string]any, len(props))
		for name, p := range props {
			if conv[name], err = c.subschema(p); err != nil {
				return nil, fmt.Errorf("property %s: %w", name, err)
			}
		}
		out["properties"] = conv
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, ok := out[k].([]any)
		if !ok {
			continue
		}
		conv := make([]any, len(list))
		for i, x := range list {
			if conv[i], err = c.subschema(x); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", k, i, err)
			}
		}
		out[k] = conv
	}
	return out, nil
}

func (c schemaConverter) subschema(x any) (map[string]any, error) {
	v, ok := x.(map[string]any)
	if !ok {
		return nil, errors.New("not a schema object")
	}
	return c.schema(v)
}

// inline returns the converted component a $ref names.
func (c schemaConverter) inline(ref string) (map[string]any, error) {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	target := c.components[name]
	switch {
	case !ok || target == nil || target.Value == nil:
		return nil, fmt.Errorf("$ref %s names no component schema", ref)
	case c.inlining[name]:
		return nil, fmt.Errorf("$ref %s contains itself", ref)
	}
	c.inlining[name] = true
	defer delete(c.inlining, name)
	v, err := c.decode(target.Value)
	if err != nil {
		return nil, err
	}
	return c.schema(v)
}
