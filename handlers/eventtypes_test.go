package handlers_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

type eventTypeBody struct {
	Object      string         `json:"object"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Family      string         `json:"family"`
	OptIn       bool           `json:"opt_in"`
	Schema      map[string]any `json:"schema"`
	Example     map[string]any `json:"example"`
}

// eventTypeSchemas returns the names of the spec's component schemas marked x-event-type, by event type.
func eventTypeSchemas(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, s := range specDoc.Components.Schemas {
		if typ, ok := s.Value.Extensions["x-event-type"].(string); ok {
			out[typ] = name
		}
	}
	if len(out) == 0 {
		t.Fatal("the spec has no x-event-type schema")
	}
	return out
}

// hasRef reports whether a JSON value contains a $ref anywhere.
func hasRef(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["$ref"]; ok {
			return true
		}
		for _, y := range x {
			if hasRef(y) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasRef)
	}
	return false
}

// The catalogue is every x-event-type schema of the spec, as plain JSON Schema, with examples that validate
// against it.
func TestEventTypes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		read, _ := h.key(h.ws.ID, "webhooks:read")
		var l struct {
			Object string          `json:"object"`
			Data   []eventTypeBody `json:"data"`
		}
		h.do(request{path: "/api/v1/event-types", key: read}).json(t, &l)
		schemas := eventTypeSchemas(t)
		var names []string
		for _, et := range l.Data {
			names = append(names, et.Name)
			component := specDoc.Components.Schemas[schemas[et.Name]].Value
			optIn, _ := component.Extensions["x-event-opt-in"].(bool)
			if et.Object != "event_type" || et.Family != strings.Split(et.Name, ".")[0] || et.OptIn != optIn ||
				et.Description != strings.TrimSpace(component.Description) {
				t.Errorf("%s: %+v", et.Name, et)
			}
			if hasRef(et.Schema) || et.Schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("%s: the schema is not plain JSON Schema: %v", et.Name, et.Schema)
			}
			b, _ := json.Marshal(et.Schema)
			var schema openapi3.Schema
			if err := json.Unmarshal(b, &schema); err != nil {
				t.Fatalf("%s: %v", et.Name, err)
			}
			if err := schema.VisitJSON(et.Example, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("%s: the example does not validate against the schema: %v", et.Name, err)
			}
			if err := component.VisitJSON(et.Example); err != nil {
				t.Errorf("%s: the example does not validate against the spec's component: %v", et.Name, err)
			}
			broken := map[string]any{}
			if err := schema.VisitJSON(broken, openapi3.EnableJSONSchema2020()); err == nil {
				t.Errorf("%s: the schema accepts an empty object: %v", et.Name, et.Schema)
			}
		}
		if !slices.IsSorted(names) || len(names) != len(schemas) {
			t.Errorf("names %v, want the %d x-event-type schemas by name", names, len(schemas))
		}

		var one eventTypeBody
		h.do(request{path: "/api/v1/event-types/webhook.endpoint.disabled", key: read}).json(t, &one)
		failingSince, _ := one.Schema["properties"].(map[string]any)["failing_since"].(map[string]any)
		webhookID, _ := one.Schema["properties"].(map[string]any)["webhook_id"].(map[string]any)
		if !slices.Equal(failingSince["type"].([]any), []any{"string", "null"}) || failingSince["nullable"] != nil {
			t.Errorf("nullable is not a null type: %v", failingSince)
		}
		if webhookID["pattern"] != "^whk_[0-9A-HJKMNP-TV-Z]{26}$" {
			t.Errorf("the WebhookID $ref was not inlined: %v", webhookID)
		}
		h.do(request{path: "/api/v1/event-types/nothing.happened", key: read}).problem(t, http.StatusNotFound, "not_found")
	})
}

// Event.data's anyOf must list every event type's schema, or generated SDKs and response validation would not know
// the new type's data.
func TestEventDataListsEveryEventType(t *testing.T) {
	var listed []string
	for _, ref := range specDoc.Components.Schemas["Event"].Value.Properties["data"].Value.AnyOf {
		listed = append(listed, strings.TrimPrefix(ref.Ref, "#/components/schemas/"))
	}
	var marked []string
	for _, name := range eventTypeSchemas(t) {
		marked = append(marked, name)
	}
	slices.Sort(listed)
	slices.Sort(marked)
	if !slices.Equal(listed, marked) {
		t.Errorf("Event.data anyOf lists %v; the x-event-type schemas are %v", listed, marked)
	}
}

// fixture is a spec with an opt-in type whose schema refers to others.
const eventFixture = `
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

func loadFixture(t *testing.T, text string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The catalogue reads each marked schema of a spec: its type, family, x-event-opt-in and plain JSON Schema.
func TestEventCatalogue(t *testing.T) {
	c, err := handlers.NewEventCatalogue(loadFixture(t, eventFixture))
	if err != nil {
		t.Fatal(err)
	}
	if created, ok := c.Type("link.created"); !ok || created.OptIn {
		t.Errorf("link.created: %+v, %v; want an ordinary type", created, ok)
	}
	if _, ok := c.Type("link.deleted"); ok {
		t.Error("a type outside the spec is in the catalogue")
	}
	clicked, _ := c.Type("link.clicked")
	if !clicked.OptIn {
		t.Errorf("link.clicked is marked x-event-opt-in but the catalogue says %+v", clicked)
	}
	props := clicked.Schema["properties"].(map[string]any)
	country := props["place"].(map[string]any)["properties"].(map[string]any)["country"].(map[string]any)
	tags := props["tags"].(map[string]any)["items"].(map[string]any)
	if !slices.Equal(country["enum"].([]any), []any{"FR", "DE", nil}) || tags["pattern"] != "^lnk_" ||
		!slices.Equal(tags["examples"].([]any), []any{"lnk_1"}) || hasRef(clicked.Schema) {
		t.Errorf("schema %v", clicked.Schema)
	}
	if types := c.Types(); len(types) != 2 || types[0].Name != "link.clicked" || types[1].Family != "link" {
		t.Errorf("types %+v", types)
	}

	real, err := gen.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handlers.NewEventCatalogue(real); err != nil {
		t.Errorf("the real spec: %v", err)
	}
}

// The spec's x-event-opt-in (what GET /api/v1/event-types shows) and the store's opt-in types (what "*" leaves
// out at run time) name the same types, so the contract and the engine cannot drift apart.
func TestOptInTypesMatchTheStore(t *testing.T) {
	real, err := gen.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	c, err := handlers.NewEventCatalogue(real)
	if err != nil {
		t.Fatal(err)
	}
	var spec []string
	for _, et := range c.Types() { // by name, as OptInEventTypes
		if et.OptIn {
			spec = append(spec, et.Name)
		}
	}
	if engine := store.OptInEventTypes(); len(spec) == 0 || !slices.Equal(spec, engine) {
		t.Errorf("the spec marks %v x-event-opt-in; the store treats %v as opt-in", spec, engine)
	}
}

func TestEventCatalogueRefusesBrokenSpecs(t *testing.T) {
	for name, spec := range map[string]string{
		"no example": strings.Replace(eventFixture, "      example: {link_id: lnk_1}\n    LinkCreatedEvent", "    LinkCreatedEvent", 1),
		"twice":      strings.Replace(eventFixture, "x-event-type: link.created", "x-event-type: link.clicked", 1),
		"cycle": eventFixture + `    Loop:
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
`,
	} {
		if _, err := handlers.NewEventCatalogue(loadFixture(t, spec)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
