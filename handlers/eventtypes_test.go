package handlers_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

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
// the new type's data — and CustomEventData, the open object of the workspaces' own types.
func TestEventDataListsEveryEventType(t *testing.T) {
	var listed []string
	for _, ref := range specDoc.Components.Schemas["Event"].Value.Properties["data"].Value.AnyOf {
		listed = append(listed, strings.TrimPrefix(ref.Ref, "#/components/schemas/"))
	}
	marked := []string{"CustomEventData"}
	for _, name := range eventTypeSchemas(t) {
		marked = append(marked, name)
	}
	slices.Sort(listed)
	slices.Sort(marked)
	if !slices.Equal(listed, marked) {
		t.Errorf("Event.data anyOf lists %v; the x-event-type schemas are %v", listed, marked)
	}
}
