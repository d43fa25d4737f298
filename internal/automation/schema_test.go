package automation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard/switchboard/internal/automation/schematest"
	"github.com/switchboard/switchboard/internal/problem"
)

// refusedAt checks that a schema is refused as too complex with a field at pointer whose detail says want.
func refusedAt(t *testing.T, schema, pointer, want string) {
	t.Helper()
	_, err := newTypeSchema([]byte(schema), schemaPrefix, true)
	p, ok := errors.AsType[*problem.Error](err)
	if !ok || p.Code != problem.SchemaTooComplex {
		t.Fatalf("newTypeSchema = %v, want schema_too_complex", err)
	}
	for _, f := range p.Fields {
		if f.Pointer == pointer && strings.Contains(f.Detail, want) {
			return
		}
	}
	t.Fatalf("fields %+v, want %q at %s", p.Fields, want, pointer)
}

// Each bound refuses what it is for, at the pointer of the member that passes it.
func TestSchemaBounds(t *testing.T) {
	var manyPatterns, manySubschemas []string
	for i := range maxPatterns + 1 {
		manyPatterns = append(manyPatterns, fmt.Sprintf(`"p%02d":{"pattern":"^a%d$"}`, i, i))
	}
	for i := range maxSubschemas {
		manySubschemas = append(manySubschemas, fmt.Sprintf(`"p%d":{}`, i))
	}
	// Every level of d<i> names d<i+1> twice: no value is checked against more than two subschemas, but the schema
	// with its references expanded doubles at each level.
	var doubling []string
	for i := range 14 {
		doubling = append(doubling, fmt.Sprintf(`"d%d":{"properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	doubling = append(doubling, `"d14":{}`)
	for _, c := range []struct {
		name, schema, pointer, want string
	}{
		{"nested anyOf over $refs (the report's 1.5 KB schema)", schematest.NestedAnyOfRefs(21),
			"/schema/$defs/a16", "more than 64 subschemas"},
		{"3,000 nested items", schematest.NestedItems(3000), "/schema" + strings.Repeat("/items", 32), "deeper than 32 levels"},
		{"2,000 nested items", schematest.NestedItems(2000), "/schema" + strings.Repeat("/items", 32), "deeper than 32 levels"},
		{"fan-out across levels", `{"allOf":[{"items":{"$ref":"#/$defs/x"}},{"items":{"$ref":"#/$defs/x"}}],"$defs":{"x":` +
			`{"allOf":[{"items":{"$ref":"#/$defs/y"}},{"items":{"$ref":"#/$defs/y"}}]},"y":{"allOf":[` +
			strings.Repeat(`{"type":"integer"},`, 20) + `{}]}}}`, "/schema/$defs/x/allOf/0/items", "a value at /*/* of the data"},
		{"a reference cycle", `{"$defs":{"node":{"properties":{"children":{"items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
			"/schema/$defs/node/properties/children/items/$ref", "cycle"},
		{"a reference to itself", `{"anyOf":[{"$ref":"#"}]}`, "/schema/anyOf/0/$ref", "cycle"},
		{"$dynamicRef", `{"$dynamicAnchor":"n","properties":{"a":{"$dynamicRef":"#n"}}}`, "/schema/properties/a", "$dynamicRef"},
		{"too many patterns", `{"properties":{` + strings.Join(manyPatterns, ",") + `}}`, "/schema/properties/p32/pattern", "pattern number 33"},
		{"a long pattern", `{"patternProperties":{"^` + strings.Repeat("a", maxPatternBytes) + `$":{}}}`,
			"/schema/patternProperties/^" + strings.Repeat("a", maxPatternBytes) + "$", "pattern of 258 bytes"},
		{"too many subschemas", `{"properties":{` + strings.Join(manySubschemas, ",") + `}}`, "/schema", "501 subschemas"},
		{"references that multiply", `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(doubling, ",") + `}}`,
			"/schema/$defs/d11/properties/a", "more than 10000 subschemas"},
	} {
		t.Run(c.name, func(t *testing.T) { refusedAt(t, c.schema, c.pointer, c.want) })
	}
}

// Schemas of the kind people write pass, the costliest one the bounds allow included.
func TestSchemaBoundsAccept(t *testing.T) {
	var errs problem.Fields
	d := documentWalk{errs: &errs}
	d.walk(decoded(t, schematest.Costliest()), "", 1, true, false)
	if d.subschemas != maxSubschemas || len(errs) > 0 {
		t.Errorf("the costliest schema has %d subschemas (%v), the bound is %d", d.subschemas, errs, maxSubschemas)
	}
	for _, schema := range []string{
		`{"type":"object","required":["order_id","amount"],"properties":{"order_id":{"type":"string","maxLength":64},` +
			`"amount":{"type":"integer","minimum":0}}}`,
		`{"$defs":{"money":{"type":"object","properties":{"amount":{"type":"integer"},"currency":{"enum":["EUR","USD"]}}}},` +
			`"type":"object","properties":{"total":{"$ref":"#/$defs/money"},"lines":{"type":"array","items":{"type":"object",` +
			`"properties":{"price":{"$ref":"#/$defs/money"},"sku":{"type":"string","pattern":"^[A-Z0-9-]+$"}}}}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/a"}}}`,
		schematest.NestedAnyOfRefs(4),
		schematest.NestedItems(30),
		schematest.Costliest(),
	} {
		if _, err := newTypeSchema([]byte(schema), schemaPrefix, true); err != nil {
			t.Errorf("%.80s…: %v", schema, err)
		}
	}
}

func decoded(t *testing.T, data string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Validation costs at most checkBudget checks, whatever the data: past it, it stops. It stops too when its context
// ends — the client went away — within a few hundred checks.
func TestValidationBudget(t *testing.T) {
	ts, err := newTypeSchema([]byte(schematest.Costliest()), schemaPrefix, true)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := ts.check(context.Background(), decoded(t, schematest.Body(4<<10)), ""); err != nil || len(f) > 0 {
		t.Fatalf("a small body: %v %v", f, err)
	}
	if _, err := ts.check(context.Background(), decoded(t, schematest.Body(256<<10)), ""); !errors.Is(err, errOverBudget) {
		t.Fatalf("a body past the budget: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := <-ts.free
	err = c.validate(ctx, decoded(t, schematest.Body(64<<10)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("validation after the client left: %v", err)
	}
	if spent := checkBudget - c.meter.left; spent > 2*pollEvery {
		t.Errorf("%d checks spent after the client left", spent)
	}
}

// Draft-07 asserts formats, and the library checks a "regex" string of the data by compiling it (a second for 250 KB
// of "(a)(a)…"): that is charged to the budget by length before it runs, and ordinary ones pass.
func TestRegexFormatIsCharged(t *testing.T) {
	ts, err := newTypeSchema([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"re":{"format":"regex"}}}`),
		schemaPrefix, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.check(context.Background(), decoded(t, `{"re":"`+strings.Repeat("(a)", 1<<10)+`"}`), ""); !errors.Is(err, errOverBudget) {
		t.Errorf("a 3 KB pattern in the data: %v", err)
	}
	if f, err := ts.check(context.Background(), decoded(t, `{"re":"^[a-z]+$"}`), ""); err != nil || len(f) > 0 {
		t.Errorf("an ordinary pattern: %v %v", f, err)
	}
	if f, err := ts.check(context.Background(), decoded(t, `{"re":"(a"}`), ""); err != nil || len(f) != 1 {
		t.Errorf("a broken pattern: %v %v", f, err)
	}
}

// A number the validator would spend long on reading exactly is refused before it runs (1e9999999 also made the
// library dereference nil: a 500 for an unauthenticated sender).
func TestHugeNumbers(t *testing.T) {
	ts, err := newTypeSchema([]byte(`{"properties":{"n":{"minimum":0}}}`), schemaPrefix, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`{"n":1e9999999}`, `{"n":1e-1000000}`, `{"n":1` + strings.Repeat("0", 200) + `}`} {
		f, err := ts.check(context.Background(), decoded(t, data), "")
		if err != nil || len(f) != 1 || f[0].Pointer != "/n" {
			t.Errorf("%.30s: %v %v", data, f, err)
		}
	}
	if f, err := ts.check(context.Background(), decoded(t, `{"n":12345678901234567890123,"m":1.5e300}`), ""); err != nil || len(f) > 0 {
		t.Errorf("ordinary numbers: %v %v", f, err)
	}
}

// The pool hands out a checker per validation at a time and makes no more than it needs.
func TestCheckersAreReused(t *testing.T) {
	ts, err := newTypeSchema([]byte(`{"type":"object"}`), schemaPrefix, true)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if f, err := ts.check(context.Background(), decoded(t, `{}`), ""); err != nil || len(f) > 0 {
			t.Fatal(f, err)
		}
	}
	if ts.made != 1 {
		t.Errorf("%d checkers made for one validation at a time", ts.made)
	}
}
