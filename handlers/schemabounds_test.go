package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/automation/schematest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// typeBody is a POST /api/v1/event-types body with the schema given.
func typeBody(name, schema string) string {
	return fmt.Sprintf(`{"name":%q,"description":"probe","schema":%s}`, name, schema)
}

// costliestType is the body that creates custom.costliest, the costliest type the bounds accept.
var costliestType = fmt.Sprintf(`{"name":"custom.costliest","description":"probe","schema":%s,"example":{"items":[]}}`,
	schematest.Costliest())

// The adversarial schemas of the report are refused at creation and on update with 422 schema_too_complex, naming
// the bound at its pointer — the 1.5 KB schema of nested anyOf over $refs (a `{}` then cost 14 s and 1.5 GB), the
// 2,000 and 3,000 nested items (8 s and 29 s to create) — quickly, and the type keeps its schema; the costliest
// schema the bounds allow is accepted.
func TestSchemaBoundsAtCreation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		for _, c := range []struct{ name, schema, pointer string }{
			{"nested anyOf over $refs", schematest.NestedAnyOfRefs(21), "/schema/$defs/a16"},
			{"3,000 nested items", schematest.NestedItems(3000), "/schema" + strings.Repeat("/items", 32)},
			{"2,000 nested items", schematest.NestedItems(2000), "/schema" + strings.Repeat("/items", 32)},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
					body: typeBody("custom.probe", c.schema)}).problem(t, http.StatusUnprocessableEntity, "schema_too_complex")
				if !slices.ContainsFunc(p.Errors, func(e map[string]string) bool { return e["pointer"] == c.pointer }) {
					t.Errorf("errors %v, want one at %s", p.Errors, c.pointer)
				}
			})
		}
		a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: typeBody("custom.kept", `{"type":"object"}`)})
		p := a.do(request{method: http.MethodPatch, path: "/api/v1/event-types/custom.kept", key: a.key,
			body: fmt.Sprintf(`{"schema":%s}`, schematest.NestedAnyOfRefs(21))}).
			problem(t, http.StatusUnprocessableEntity, "schema_too_complex")
		if len(p.Errors) != 1 || p.Errors[0]["pointer"] != "/schema/$defs/a16" {
			t.Errorf("update: errors %v", p.Errors)
		}
		var kept eventTypeBody
		a.do(request{path: "/api/v1/event-types/custom.kept", key: a.key}).json(t, &kept)
		if kept.Schema["type"] != "object" || len(kept.Schema) != 1 {
			t.Errorf("the refused update changed the schema: %v", kept.Schema)
		}
		if res := a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: costliestType}); res.StatusCode != http.StatusCreated {
			t.Fatalf("the costliest schema within the bounds: %d %s", res.StatusCode, res.body)
		}
	})
}

// A schema stored before there were bounds is not run: publishing `{}` into the report's nested anyOf — by API key
// or, without one, through a source's URL — answers 422 schema_too_complex at once (it took 14 s and grew the heap
// by 1.5 GB), and the source's log keeps the refusal with its reason.
func TestStoredSchemaPastTheBounds(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		if err := db.EventTypes.Create(context.Background(), nil, &store.EventTypeDef{WorkspaceID: a.ws.ID,
			Name: "custom.legacy", Schema: json.RawMessage(schematest.NestedAnyOfRefs(21)), Example: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		a.do(request{method: http.MethodPost, path: "/api/v1/events", key: a.key,
			body: `{"type":"custom.legacy","data":{}}`}).problem(t, http.StatusUnprocessableEntity, "schema_too_complex")
		src := a.createSource(`{"name":"Legacy","event_type":"custom.legacy","verification":{"scheme":"none"}}`)
		a.send(src.IngestURL, "application/json", `{}`, nil).problem(t, http.StatusUnprocessableEntity, "schema_too_complex")
		if log := a.requests(src.ID); len(log) != 1 || log[0].Reason == nil || *log[0].Reason != "schema_too_complex" {
			t.Errorf("request log %+v", log)
		}
	})
}

// Validation has a budget: a sender cannot make one request cost more than 50,000 checks, whatever it sends. Past
// it the body is refused with 422 schema_too_complex, and the refusal is in the source's log; the same schema takes
// a smaller body.
func TestIngestPastTheCheckBudget(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		if res := a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key, body: costliestType}); res.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		src := a.createSource(`{"name":"Costly","event_type":"custom.costliest","verification":{"scheme":"none"}}`)
		if res := a.send(src.IngestURL, "application/json", schematest.Body(2<<10), nil); res.StatusCode != http.StatusOK {
			t.Fatalf("a small body: %d %s", res.StatusCode, res.body)
		}
		a.send(src.IngestURL, "application/json", schematest.Body(200<<10), nil).
			problem(t, http.StatusUnprocessableEntity, "schema_too_complex")
		if log := a.requests(src.ID); len(log) != 2 || log[0].Reason == nil || *log[0].Reason != "schema_too_complex" {
			t.Errorf("request log %+v", log)
		}
	})
}

// A number the validator would spend long on reading exactly — or, for 1e9999999, crash on (a 500 for anyone who
// knew a source's URL) — is refused as invalid data at its pointer, before validation runs.
func TestIngestHugeNumber(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		a.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: a.key,
			body: typeBody("custom.amount", `{"properties":{"n":{"minimum":0}}}`)})
		src := a.createSource(`{"name":"Amounts","event_type":"custom.amount","verification":{"scheme":"none"}}`)
		for _, n := range []string{"1e9999999", "1e1000000"} {
			p := a.send(src.IngestURL, "application/json", `{"n":`+n+`}`, nil).
				problem(t, http.StatusUnprocessableEntity, "event_data_invalid")
			if len(p.Errors) != 1 || p.Errors[0]["pointer"] != "/n" {
				t.Errorf("%s: errors %v", n, p.Errors)
			}
		}
		if res := a.send(src.IngestURL, "application/json", `{"n":1e300}`, nil); res.StatusCode != http.StatusOK {
			t.Errorf("an ordinary number: %d %s", res.StatusCode, res.body)
		}
	})
}
