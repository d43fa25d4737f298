package events

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
)

// fixture is a spec with an opt-in type whose schema refers to others.
const fixture = `
openapi: 3.0.3
info: {title: fixture, version: "1"}
paths: {}
components:
  schemas:
    LinkID: {type: string, pattern: '^lnk_', example: lnk_1}
    Place:
      type: object
      properties:
        country: {type: string, nullable: true, enum: [FR, DE]}
    LinkClickedEvent:
      type: object
      description: Someone followed a short link.
      x-event-type: link.clicked
      x-event-opt-in: true
      required: [link_id]
      properties:
        link_id: {$ref: '#/components/schemas/LinkID'}
        place: {$ref: '#/components/schemas/Place'}
        tags: {type: array, items: {$ref: '#/components/schemas/LinkID'}}
      example: {link_id: lnk_1}
    LinkCreatedEvent:
      type: object
      description: A short link was created.
      x-event-type: link.created
      properties:
        link_id: {$ref: '#/components/schemas/LinkID'}
      example: {link_id: lnk_1}
`

// The fixture's payload types: named like its schemas, as oapi-codegen names them.
type (
	LinkClickedEvent struct{ LinkID string }
	LinkCreatedEvent struct{ LinkID string }
	UnmarkedEvent    struct{}
)

func load(t *testing.T, text string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The registry reads each marked schema of a spec: its type, family, x-event-opt-in and plain JSON Schema, and
// names events after their payload's Go type.
func TestFromSpec(t *testing.T) {
	r, err := FromSpec(load(t, fixture), LinkClickedEvent{}, LinkCreatedEvent{})
	if err != nil {
		t.Fatal(err)
	}
	if created, ok := r.Lookup("", "link.created"); !ok || created.OptIn {
		t.Errorf("link.created: %+v, %v; want an ordinary type", created, ok)
	}
	if _, ok := r.Lookup("", "link.deleted"); ok {
		t.Error("a type outside the spec is in the catalogue")
	}
	clicked, _ := r.Lookup("", "link.clicked")
	if !clicked.OptIn {
		t.Errorf("link.clicked is marked x-event-opt-in but the catalogue says %+v", clicked)
	}
	props := clicked.Schema["properties"].(map[string]any)
	country := props["place"].(map[string]any)["properties"].(map[string]any)["country"].(map[string]any)
	tags := props["tags"].(map[string]any)["items"].(map[string]any)
	if !slices.Equal(country["enum"].([]any), []any{"FR", "DE", nil}) || tags["pattern"] != "^lnk_" ||
		!slices.Equal(tags["examples"].([]any), []any{"lnk_1"}) || strings.Contains(strings.Join(keys(clicked.Schema), ","), "$ref") {
		t.Errorf("schema %v", clicked.Schema)
	}
	if types := r.Types(""); len(types) != 2 || types[0].Name != "link.clicked" || types[1].Family != "link" {
		t.Errorf("types %+v", types)
	}
	for _, payload := range []any{LinkCreatedEvent{}, &LinkCreatedEvent{}} {
		if typ, err := r.TypeOf(payload); err != nil || typ.Name != "link.created" {
			t.Errorf("TypeOf(%T) = %+v, %v", payload, typ, err)
		}
	}
	if _, err := r.TypeOf(UnmarkedEvent{}); err == nil {
		t.Error("an unregistered payload has a type")
	}
	if got := r.OptInTypes(); !slices.Equal(got, []string{"link.clicked"}) {
		t.Errorf("OptInTypes() = %v", got)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A spec event schema without a registered payload, a payload without a schema, and broken schemas are refused.
func TestFromSpecRefuses(t *testing.T) {
	cycle := fixture + `    Loop:
      type: object
      properties:
        next: {$ref: '#/components/schemas/Loop'}
    LoopEvent:
      type: object
      description: Loops.
      x-event-type: loop.happened
      properties:
        loop: {$ref: '#/components/schemas/Loop'}
      example: {}
`
	type LoopEvent struct{}
	both := []any{LinkClickedEvent{}, LinkCreatedEvent{}}
	for name, tc := range map[string]struct {
		spec     string
		payloads []any
	}{
		"no example":              {strings.Replace(fixture, "      example: {link_id: lnk_1}\n    LinkCreatedEvent", "    LinkCreatedEvent", 1), both},
		"twice":                   {strings.Replace(fixture, "x-event-type: link.created", "x-event-type: link.clicked", 1), both},
		"cycle":                   {cycle, append(both, LoopEvent{})},
		"schema without payload":  {fixture, []any{LinkClickedEvent{}}},
		"payload without schema":  {fixture, append(both, UnmarkedEvent{})},
		"payload that is no type": {fixture, append(both, "link.created")},
	} {
		if _, err := FromSpec(load(t, tc.spec), tc.payloads...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Every x-event-type schema of the real spec has a registered payload and every registered payload a schema: the
// contract and the code that publishes events cannot drift apart.
func TestBuiltinMatchesTheSpec(t *testing.T) {
	spec, err := gen.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromSpec(spec, builtinPayloads...); err != nil {
		t.Fatal(err)
	}
	var marked int
	for _, s := range spec.Components.Schemas {
		if _, ok := s.Value.Extensions[extEventType]; ok {
			marked++
		}
	}
	if n := len(Builtin().Types("")); n != marked || n != len(builtinPayloads) {
		t.Errorf("%d built-in types, %d marked schemas, %d payloads", n, marked, len(builtinPayloads))
	}
}

func TestReceives(t *testing.T) {
	r := Builtin()
	typ := func(name string) Type {
		if t, ok := r.Lookup("", name); ok {
			return t
		}
		return Type{Name: name}
	}
	tests := []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{[]string{"link.created"}, "link.created", true},
		{[]string{"link.created"}, "link.deleted", false},
		{[]string{"link.*"}, "link.max_clicks_reached", true},
		{[]string{"link.*"}, "linked.created", false},
		{[]string{"link.*"}, "link.clicked", true},
		{[]string{"webhook.endpoint.*"}, "webhook.endpoint.disabled", true},
		{[]string{"webhook.endpoint.*"}, "webhook.ping", false},
		{[]string{"*"}, "message.received", true},
		{[]string{"*"}, "link.clicked", false},
		{[]string{"*"}, "link.listed", false},
		{[]string{"*", "link.clicked"}, "link.clicked", true},
		{nil, "link.created", false},
	}
	for _, tt := range tests {
		if got := Receives(tt.patterns, typ(tt.typ)); got != tt.want {
			t.Errorf("Receives(%v, %s) = %v", tt.patterns, tt.typ, got)
		}
	}
	if got := r.OptInTypes(); !slices.Equal(got, []string{"link.clicked", "link.listed", "message.status_updated", "presence.updated"}) {
		t.Errorf("OptInTypes() = %v", got)
	}
}

// Run-time types are seen by their workspace only, cannot take a built-in name, and can be subscribed to.
func TestDefine(t *testing.T) {
	r := Builtin()
	if err := r.Define(Type{WorkspaceID: "ws_a", Name: "link.created"}); err == nil {
		t.Error("a run-time type took a built-in name")
	}
	if err := r.Define(Type{Name: "order.paid"}); err == nil {
		t.Error("a run-time type without a workspace was accepted")
	}
	if err := r.Define(Type{WorkspaceID: "ws_a", Name: "order.paid", Description: "Paid.",
		Schema: map[string]any{"type": "object"}, Example: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Lookup("ws_a", "order.paid"); !ok || got.Family != "order" {
		t.Errorf("ws_a: %+v, %v", got, ok)
	}
	if _, ok := r.Lookup("ws_b", "order.paid"); ok {
		t.Error("another workspace sees ws_a's type")
	}
	if !r.Subscribable("ws_a", "order.*") || r.Subscribable("ws_b", "order.*") || !r.Subscribable("ws_b", "link.*") {
		t.Error("Subscribable does not follow the workspace's types")
	}
	if n := len(r.Types("ws_a")) - len(r.Types("ws_b")); n != 1 {
		t.Errorf("ws_a sees %d more types than ws_b, want 1", n)
	}
	r.Forget("ws_a", "order.paid")
	if _, ok := r.Lookup("ws_a", "order.paid"); ok {
		t.Error("a forgotten type is still there")
	}
}
