package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard/switchboard/internal/problem"
)

// The bounds of a custom type's JSON Schema. Any key with automation:write can create a type, and any sender that
// knows a source's URL can make the server validate a body against it; without bounds a 1.5 KB schema of nested
// anyOf over $refs made one `{}` cost 14 s and 1.5 GB, and 3,000 nested items took 29 s to compile. Each bound
// caps one way the cost grows; together they keep compiling a schema around 100 ms and checking one value of the
// data at a small constant, and the budget below caps a whole validation whatever the data.
const (
	// maxSchemaBytes bounds a schema as JSON.
	maxSchemaBytes = 64 << 10
	// maxSchemaDepth bounds the nesting of the schema document (objects and arrays): compiling costs each
	// subschema in proportion to its depth.
	maxSchemaDepth = 32
	// maxSubschemas bounds the objects of the document that can be subschemas (everything but the values of const,
	// enum, default and examples): compiling checks each against the meta-schema.
	maxSubschemas = 500
	// maxExpandedSubschemas bounds the schema with every $ref replaced by its target: references may reuse a
	// subschema, not multiply it. A reference cycle (a recursive schema) has no bound and is refused.
	maxExpandedSubschemas = 10000
	// maxChecksPerValue bounds how many subschemas can apply to one value of the data, counting every branch of
	// anyOf, oneOf and allOf, $ref targets and the members of the value's parents: the product of combinators along
	// a path.
	maxChecksPerValue = 64
	// maxPatterns and maxPatternBytes bound the regular expressions of pattern and patternProperties.
	maxPatterns     = 32
	maxPatternBytes = 256
	// maxNumberChars bounds a number of the data as written (ingest keeps the digits a sender sent; the validator
	// reads each number exactly, and a thousand-digit or 1e1000000 number costs it milliseconds to seconds), and
	// maxNumberExponent its power of ten.
	maxNumberChars    = 100
	maxNumberExponent = 400
	// checkBudget is the most one validation may cost, in checks: one for each subschema applied to a value, plus
	// its share of the value's members and of the enum, required and pattern work it does (see weightOf and
	// meteredRegexp). The data of an event that needs more is refused. Spending it costs about 12 ms of one core
	// (the costliest schema the bounds accept against a 256 KiB body), which leaves room within the 50 ms a
	// validation may take; data of a plain schema (a few checks a value) fits by the hundreds of kilobytes.
	checkBudget = 50_000
)

// schemaPrefix is where a schema of a request is; pointers of its limits start there.
const schemaPrefix = "/schema"

// schemaURL names the one resource of a type's schema.
const schemaURL = "urn:switchboard:schema"

// typeSchema is a type's schema, checked against the bounds, with its pool of checkers.
type typeSchema struct {
	raw []byte
	// free holds idle checkers; made counts those compiled, at most cap(free).
	free chan *checker
	mu   sync.Mutex
	made int
}

// checker is a compiled copy of a schema whose extensions and patterns charge its meter: it validates one value
// at a time. The library has no per-validation context, so each copy carries its own.
type checker struct {
	schema *jsonschema.Schema
	meter  *meter
}

// meter counts the checks of one validation and stops it, by panicking out of the library (the library keeps no
// state of a validation outside its own call), when the budget is spent or the request's context ends.
type meter struct {
	ctx    context.Context
	left   int
	polled int
}

// overBudget and stopped are the meter's panics, recovered by checker.validate.
type overBudget struct{}

type stopped struct{ err error }

// pollEvery is how many checks pass between two looks at the context.
const pollEvery = 256

func (m *meter) charge(n int) {
	m.left -= n
	if m.left < 0 {
		panic(overBudget{})
	}
	if m.polled += n; m.polled >= pollEvery {
		m.polled = 0
		if err := m.ctx.Err(); err != nil {
			panic(stopped{err})
		}
	}
}

// errOverBudget is a validation stopped for costing more than checkBudget.
var errOverBudget = errors.New("automation: validation over its budget")

// meterExt is the extension every object subschema of a checker gets: validation calls it once for each value the
// subschema applies to, after the subschema's own keywords.
type meterExt struct {
	m      *meter
	weight int
}

func (e *meterExt) Validate(_ *jsonschema.ValidatorContext, v any) {
	n := e.weight
	switch v := v.(type) {
	case map[string]any:
		n += len(v) / 16
	case []any:
		n += len(v) / 16
	}
	e.m.charge(n)
}

// weightOf is what one application of a subschema costs in checks: one, and a share of the lists it compares the
// value with (enum values, required and dependentRequired names).
func weightOf(obj map[string]any) int {
	n := 1
	if enum, ok := obj["enum"].([]any); ok {
		n += len(enum) / 8
	}
	if req, ok := obj["required"].([]any); ok {
		n += len(req) / 16
	}
	if deps, ok := obj["dependentRequired"].(map[string]any); ok {
		for _, d := range deps {
			if names, ok := d.([]any); ok {
				n += len(names) / 16
			}
		}
	}
	return n
}

// meteredRegexp is a pattern of a checker: a match is charged before it runs, by the length of the text times the
// size of the compiled program (Go's matcher walks the program for each byte at worst).
type meteredRegexp struct {
	re    *regexp.Regexp
	insts int
	m     *meter
}

// patternWorkPerCheck is how many (byte, instruction) steps of a match cost one check.
const patternWorkPerCheck = 32

func (r meteredRegexp) MatchString(s string) bool {
	r.m.charge(1 + len(s)*r.insts/patternWorkPerCheck)
	return r.re.MatchString(s)
}

func (r meteredRegexp) String() string { return r.re.String() }

// programSize is the number of instructions of a pattern's compiled program.
func programSize(pattern string) (int, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// newCompiler returns a compiler for a type's schema: draft 2020-12 unless the schema names another draft, and
// references to other documents refused (the loader reads nothing, so a schema can never make the server fetch a
// URL). With a meter, every object subschema and pattern of what it compiles charges it.
func newCompiler(m *meter) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if m == nil {
		return c
	}
	c.RegisterVocabulary(&jsonschema.Vocabulary{URL: "urn:switchboard:meter",
		Compile: func(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
			return &meterExt{m: m, weight: weightOf(obj)}, nil
		}})
	c.AssertVocabs()
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, err
		}
		insts, err := programSize(s)
		if err != nil {
			return nil, err
		}
		return meteredRegexp{re: re, insts: insts, m: m}, nil
	})
	return c
}

func compileWith(c *jsonschema.Compiler, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// noLoader refuses every external reference of a schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references to other documents (%s) are not supported", url)
}

// newChecker compiles a metered copy of a schema.
func newChecker(raw []byte) (*checker, error) {
	m := &meter{}
	sch, err := compileWith(newCompiler(m), raw)
	if err != nil {
		return nil, err
	}
	meterFormats(sch, m)
	return &checker{schema: sch, meter: m}, nil
}

// Format checks, which drafts 4 to 7 assert, are charged by the length of the string before they run. The library
// reads a "regex" string of the data by compiling it — 4 µs a byte of "(a)(a)…", 13 of "\pL\pL…", and a format it
// lets no one replace — so that one costs 64 checks a byte (a pattern of a few hundred bytes is still cheap); the
// others (URI templates, international addresses) walk the string once, a check for every 64 bytes.
const (
	regexFormatChecksPerByte = 64
	formatBytesPerCheck      = 64
)

// meterFormats makes every format check of a compiled copy charge m. The copy's subschemas are its own, so their
// Format can be replaced; the formats they pointed to are shared and stay as they are.
func meterFormats(root *jsonschema.Schema, m *meter) {
	seen := map[*jsonschema.Schema]bool{}
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		if f := s.Format; f != nil {
			s.Format = &jsonschema.Format{Name: f.Name, Validate: func(v any) error {
				if str, ok := v.(string); ok {
					if f.Name == "regex" {
						m.charge(1 + len(str)*regexFormatChecksPerByte)
					} else {
						m.charge(1 + len(str)/formatBytesPerCheck)
					}
				}
				return f.Validate(v)
			}}
		}
		for _, e := range edges(s) {
			visit(e.to)
		}
	}
	visit(root)
}

// validate checks v against the schema within checkBudget, and stops when ctx ends. Returns errOverBudget, ctx's
// error, or the library's *jsonschema.ValidationError.
func (c *checker) validate(ctx context.Context, v any) (err error) {
	c.meter.ctx, c.meter.left, c.meter.polled = ctx, checkBudget, 0
	defer func() {
		switch r := recover().(type) {
		case nil:
		case overBudget:
			err = errOverBudget
		case stopped:
			err = r.err
		default:
			panic(r)
		}
	}()
	return c.schema.Validate(v)
}

// newTypeSchema checks a schema against the bounds and returns it ready to validate with. Strict, it also holds it
// to the meta-schema of its draft exactly (a type being created or changed: the checkers' compiler, whose extra
// vocabulary changes how the library picks the meta-schema, is laxer about annotations). Returns a
// ValidationFailed problem for a schema that does not compile and a SchemaTooComplex problem naming each bound it
// exceeds at its pointer (under prefix).
func newTypeSchema(raw []byte, prefix string, strict bool) (*typeSchema, error) {
	var errs problem.Fields
	checkDocument(&errs, raw, prefix)
	if len(errs) > 0 {
		return nil, tooComplex(errs)
	}
	if strict {
		if _, err := compileWith(newCompiler(nil), raw); err != nil {
			return nil, problem.Invalid(prefix, "is not a usable JSON Schema: "+err.Error())
		}
	}
	c, err := newChecker(raw)
	if err != nil {
		return nil, problem.Invalid(prefix, "is not a usable JSON Schema: "+err.Error())
	}
	analyse(&errs, c.schema, prefix)
	if len(errs) > 0 {
		return nil, tooComplex(errs)
	}
	ts := &typeSchema{raw: raw, free: make(chan *checker, runtime.GOMAXPROCS(0)), made: 1}
	ts.free <- c
	return ts, nil
}

func tooComplex(errs problem.Fields) *problem.Error {
	e := problem.Errorf(problem.SchemaTooComplex, "The schema exceeds %d bound(s) that keep validation cheap.", len(errs))
	e.Fields = errs
	return e
}

// acquire takes an idle checker, compiles another while there are fewer than GOMAXPROCS (validation is CPU work:
// more at once would not finish sooner), or waits for one until ctx ends.
func (ts *typeSchema) acquire(ctx context.Context) (*checker, error) {
	select {
	case c := <-ts.free:
		return c, nil
	default:
	}
	ts.mu.Lock()
	compile := ts.made < cap(ts.free)
	if compile {
		ts.made++
	}
	ts.mu.Unlock()
	if compile {
		c, err := newChecker(ts.raw)
		if err != nil {
			ts.mu.Lock()
			ts.made--
			ts.mu.Unlock()
		}
		return c, err
	}
	select {
	case c := <-ts.free:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (ts *typeSchema) release(c *checker) {
	c.meter.ctx = nil
	ts.free <- c
}

// checkDocument bounds the schema document before it is compiled: its depth and how many subschemas it can hold.
func checkDocument(errs *problem.Fields, raw []byte, prefix string) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		errs.Add(prefix, "is not JSON: "+err.Error())
		return
	}
	d := documentWalk{errs: errs}
	d.walk(doc, prefix, 1, true, false)
	if d.subschemas > maxSubschemas {
		errs.Add(prefix, fmt.Sprintf("has %d subschemas; the limit is %d", d.subschemas, maxSubschemas))
	}
}

type documentWalk struct {
	errs       *problem.Fields
	subschemas int
	deep       bool
}

// valueKeywords hold values, not subschemas; schemaMaps hold subschemas by name.
var (
	valueKeywords = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}
	schemaMaps    = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true}
)

// walk visits v at pointer, depth levels deep. Objects count as subschemas when counted, but for maps of them.
func (d *documentWalk) walk(v any, pointer string, depth int, counted, isMap bool) {
	if depth > maxSchemaDepth && !d.deep {
		d.deep = true
		d.errs.Add(pointer, fmt.Sprintf("nests deeper than %d levels, the limit of a schema", maxSchemaDepth))
	}
	switch v := v.(type) {
	case map[string]any:
		if counted && !isMap {
			d.subschemas++
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			d.walk(v[k], pointer+problem.Pointer(k), depth+1, counted && (isMap || !valueKeywords[k]), !isMap && schemaMaps[k])
		}
	case []any:
		for i, item := range v {
			d.walk(item, pointer+"/"+strconv.Itoa(i), depth+1, counted, false)
		}
	}
}

// pointerOf is the pointer, under prefix, of a compiled subschema.
func pointerOf(s *jsonschema.Schema, prefix string) string {
	_, frag, _ := strings.Cut(s.Location, "#")
	return prefix + frag
}
