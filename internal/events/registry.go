// Package events is the product's event catalogue and its transactional outbox.
//
// Every event type Switchboard emits is described once, in the API reference: a component schema marked
// x-event-type is the JSON Schema of the event's data, and oapi-codegen generates a Go type of the same name. The
// Registry ties the two together, so that an area publishes a value of the generated type and the event's name
// follows from it — no type names written at emit sites, no hand-written payload structs that could drift from the
// contract. The catalogue served at GET /api/v1/event-types and the opt-in list come from the same Registry, and it
// also holds types defined at run time (a workspace's own types), with the same shape.
package events

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// Extensions of the spec's component schemas that make the catalogue.
const (
	// extEventType names the event type whose data the schema describes.
	extEventType = "x-event-type"
	// extEventOptIn marks a high-volume type that "*" does not subscribe to.
	extEventOptIn = "x-event-opt-in"
)

// Type is one event type of the catalogue.
type Type struct {
	// Name is resource.past_tense ("link.created"); Family is the part before the first dot.
	Name        string
	Family      string
	Description string
	// OptIn marks a high-volume type that "*" leaves out: only subscriptions that name it, or its family, get it.
	OptIn bool
	// Schema is the JSON Schema (draft 2020-12, references inlined) of the event's data; Example an example of it.
	Schema  map[string]any
	Example map[string]any
	// WorkspaceID is the workspace that defined a run-time type; "" for the built-in types every workspace has.
	WorkspaceID string
	// Archived marks a run-time type that refuses new events; it stays in the catalogue for its past events.
	Archived bool

	// payload is the generated Go type of the data of a built-in type (nil for run-time types).
	payload reflect.Type
}

// Registry is a catalogue of event types. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	builtin   map[string]*Type
	byPayload map[reflect.Type]*Type
	// defined holds the run-time types, by workspace and name.
	defined map[string]map[string]*Type
}

// FromSpec reads the built-in types of a spec: each component schema marked x-event-type, tied to the value among
// payloads whose Go type has the schema's name (oapi-codegen names a schema's type after it). It fails when a marked
// schema has no description or object example, names a type twice, contains itself, or has no payload — and when
// a payload has no marked schema: every type the code can publish is in the contract, and every type of the
// contract can be published.
func FromSpec(spec *openapi3.T, payloads ...any) (*Registry, error) {
	r := &Registry{builtin: map[string]*Type{}, byPayload: map[reflect.Type]*Type{}, defined: map[string]map[string]*Type{}}
	byName := map[string]reflect.Type{}
	for _, p := range payloads {
		t := reflect.TypeOf(p)
		if t == nil || t.Kind() != reflect.Struct || t.Name() == "" {
			return nil, fmt.Errorf("events: payload %T is not a named struct type", p)
		}
		byName[t.Name()] = t
	}
	var errs []error
	for component, ref := range spec.Components.Schemas {
		name, ok := ref.Value.Extensions[extEventType].(string)
		if !ok {
			continue
		}
		s := ref.Value
		example, ok := s.Example.(map[string]any)
		if !ok || s.Description == "" {
			errs = append(errs, fmt.Errorf("event type %s (schema %s) needs a description and an object example", name, component))
			continue
		}
		schema, err := jsonSchema(spec, ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("event type %s (schema %s): %w", name, component, err))
			continue
		}
		payload, ok := byName[component]
		if !ok {
			errs = append(errs, fmt.Errorf("event type %s (schema %s) has no registered payload type", name, component))
			continue
		}
		delete(byName, component)
		if r.builtin[name] != nil {
			errs = append(errs, fmt.Errorf("event type %s is defined twice", name))
			continue
		}
		optIn, _ := s.Extensions[extEventOptIn].(bool)
		family, _, _ := strings.Cut(name, ".")
		t := &Type{Name: name, Family: family, Description: strings.TrimSpace(s.Description), OptIn: optIn,
			Schema: schema, Example: example, payload: payload}
		r.builtin[name] = t
		r.byPayload[payload] = t
	}
	for name := range byName {
		errs = append(errs, fmt.Errorf("payload type %s has no component schema marked %s", name, extEventType))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return r, nil
}

// TypeOf returns the built-in type whose data payload is (a value of a generated payload type, or a pointer to one).
func (r *Registry) TypeOf(payload any) (Type, error) {
	t := reflect.TypeOf(payload)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	r.mu.RLock()
	et := r.byPayload[t]
	r.mu.RUnlock()
	if et == nil {
		return Type{}, fmt.Errorf("events: %v is not the payload of a registered event type", t)
	}
	return *et, nil
}

// Lookup returns the type called name that workspaceID sees: a built-in type, or one the workspace defined.
func (r *Registry) Lookup(workspaceID, name string) (Type, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t := r.builtin[name]; t != nil {
		return *t, true
	}
	if t := r.defined[workspaceID][name]; t != nil {
		return *t, true
	}
	return Type{}, false
}

// Types returns the types workspaceID sees, by name: the built-in ones and its own.
func (r *Registry) Types(workspaceID string) []Type {
	r.mu.RLock()
	out := make([]Type, 0, len(r.builtin)+len(r.defined[workspaceID]))
	for _, t := range r.builtin {
		out = append(out, *t)
	}
	for _, t := range r.defined[workspaceID] {
		out = append(out, *t)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Type) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// OptInTypes returns the names of the built-in opt-in types, sorted.
func (r *Registry) OptInTypes() []string {
	var out []string
	for _, t := range r.Types("") {
		if t.OptIn {
			out = append(out, t.Name)
		}
	}
	return out
}

// Define adds (or replaces) a type of t.WorkspaceID at run time. Its name must not be a built-in type's, and its
// Schema must be a JSON object; it has no Go payload type (its data is published as JSON).
func (r *Registry) Define(t Type) error {
	if t.WorkspaceID == "" || t.Name == "" {
		return errors.New("events: a run-time type needs a workspace and a name")
	}
	t.Family, _, _ = strings.Cut(t.Name, ".")
	t.payload = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.builtin[t.Name] != nil {
		return fmt.Errorf("events: %s is a built-in event type", t.Name)
	}
	if r.defined[t.WorkspaceID] == nil {
		r.defined[t.WorkspaceID] = map[string]*Type{}
	}
	r.defined[t.WorkspaceID][t.Name] = &t
	return nil
}

// Forget removes a run-time type of a workspace.
func (r *Registry) Forget(workspaceID, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.defined[workspaceID], name)
}

// Subscribable reports whether a subscription pattern names something workspaceID can receive: "*", a type it sees,
// or the wildcard of a dotted prefix of such a type ("link.*", "webhook.endpoint.*").
func (r *Registry) Subscribable(workspaceID, pattern string) bool {
	if pattern == "*" {
		return true
	}
	if _, ok := r.Lookup(workspaceID, pattern); ok {
		return true
	}
	prefix, ok := strings.CutSuffix(pattern, "*")
	if !ok || !strings.HasSuffix(prefix, ".") {
		return false
	}
	return slices.ContainsFunc(r.Types(workspaceID), func(t Type) bool { return strings.HasPrefix(t.Name, prefix) })
}

// Receives reports whether a subscription to patterns receives events of type t: an exact name, a wildcard of a
// dotted prefix ("link.*" matches "link.created", not "linked.x"), or "*" — which leaves out opt-in types.
func Receives(patterns []string, t Type) bool {
	for _, p := range patterns {
		switch {
		case p == t.Name:
			return true
		case p == "*":
			if !t.OptIn {
				return true
			}
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(t.Name, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
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
