package automation

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard/switchboard/internal/problem"
)

// analysis bounds a compiled schema: no reference cycle, patterns few and short, and for every value the data can
// hold, the subschemas validation may apply to it — each branch of every combinator and each $ref target counted,
// as the validator evaluates them all to report errors — at most maxChecksPerValue, and the schema with its
// references expanded at most maxExpandedSubschemas.
type analysis struct {
	errs   *problem.Fields
	prefix string
	// here memoizes inPlace.
	here     map[*jsonschema.Schema]int
	expanded int
	reported map[string]bool
}

// maxReported bounds the fields of one refusal: the first few say enough.
const maxReported = 10

func analyse(errs *problem.Fields, root *jsonschema.Schema, prefix string) {
	a := &analysis{errs: errs, prefix: prefix, here: map[*jsonschema.Schema]int{}, reported: map[string]bool{}}
	if !a.acyclic(root) {
		return
	}
	a.explore([]*jsonschema.Schema{root}, "")
}

func (a *analysis) report(kind, pointer, detail string) {
	if a.reported[kind] || len(*a.errs) >= maxReported {
		return
	}
	a.reported[kind] = true
	a.errs.Add(pointer, detail)
}

// edge is a subschema a schema applies, and to what.
type edge struct {
	keyword string // the pointer from the schema to the subschema, without the leading slash
	to      *jsonschema.Schema
	applies target
	name    string // the member, for toNamedMember
}

// target is what of a value an edge's subschema applies to.
type target int

const (
	toValue       target = iota // the value itself
	toNamedMember               // its member edge.name (properties)
	toAnyMember                 // any of its members (patternProperties, additionalProperties, unevaluatedProperties)
	toAnyItem                   // any of its items
	toMemberNames               // the names of its members (propertyNames)
)

// edges lists what validation can apply from s. (contentSchema is not: content is not asserted.)
func edges(s *jsonschema.Schema) []edge {
	var out []edge
	add := func(keyword string, to *jsonschema.Schema, applies target) {
		if to != nil {
			out = append(out, edge{keyword: keyword, to: to, applies: applies})
		}
	}
	addAll := func(keyword string, tos []*jsonschema.Schema, applies target) {
		for i, to := range tos {
			add(keyword+"/"+strconv.Itoa(i), to, applies)
		}
	}
	add("$ref", s.Ref, toValue)
	addAll("allOf", s.AllOf, toValue)
	addAll("anyOf", s.AnyOf, toValue)
	addAll("oneOf", s.OneOf, toValue)
	add("not", s.Not, toValue)
	add("if", s.If, toValue)
	add("then", s.Then, toValue)
	add("else", s.Else, toValue)
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		add("dependentSchemas"+problem.Pointer(k), s.DependentSchemas[k], toValue)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add("dependencies"+problem.Pointer(k), d, toValue)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, edge{keyword: "properties" + problem.Pointer(k), to: s.Properties[k], applies: toNamedMember, name: k})
	}
	for re, p := range s.PatternProperties {
		add("patternProperties"+problem.Pointer(re.String()), p, toAnyMember)
	}
	if p, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		add("additionalProperties", p, toAnyMember)
	}
	add("unevaluatedProperties", s.UnevaluatedProperties, toAnyMember)
	add("propertyNames", s.PropertyNames, toMemberNames)
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		add("items", items, toAnyItem)
	case []*jsonschema.Schema:
		addAll("items", items, toAnyItem)
	}
	if p, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		add("additionalItems", p, toAnyItem)
	}
	addAll("prefixItems", s.PrefixItems, toAnyItem)
	add("items", s.Items2020, toAnyItem)
	add("contains", s.Contains, toAnyItem)
	add("unevaluatedItems", s.UnevaluatedItems, toAnyItem)
	return out
}

// acyclic checks every subschema reachable from root, and reports a reference cycle, dynamic references (which
// exist for recursion) and patterns past their bounds. It returns false when a cycle makes the rest meaningless.
func (a *analysis) acyclic(root *jsonschema.Schema) bool {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	patterns := 0
	ok := true
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		state[s] = visiting
		at := pointerOf(s, a.prefix)
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			a.report("dynamic", at, "uses $dynamicRef or $recursiveRef, which exist for recursive schemas; "+
				"a custom event type's schema cannot be recursive")
		}
		checkPattern := func(pointer, pattern string) {
			if patterns++; patterns > maxPatterns {
				a.report("patterns", pointer, fmt.Sprintf("is pattern number %d of the schema; the limit is %d", patterns, maxPatterns))
			}
			if len(pattern) > maxPatternBytes {
				a.report("pattern-size:"+pointer, pointer, fmt.Sprintf("is a pattern of %d bytes; the limit is %d", len(pattern), maxPatternBytes))
			}
		}
		if s.Pattern != nil {
			checkPattern(at+"/pattern", s.Pattern.String())
		}
		for re := range s.PatternProperties {
			checkPattern(at+"/patternProperties"+problem.Pointer(re.String()), re.String())
		}
		for _, e := range edges(s) {
			switch state[e.to] {
			case visiting:
				ok = false
				a.report("cycle", at+"/"+e.keyword, "closes a cycle of references (the schema is recursive); "+
					"a custom event type's schema cannot be recursive")
			case 0:
				visit(e.to)
			}
		}
		state[s] = done
	}
	visit(root)
	return ok
}

// weight is what one application of s costs (see weightOf); a boolean schema costs one.
func weight(s *jsonschema.Schema) int {
	for _, ext := range s.Extensions {
		if m, ok := ext.(*meterExt); ok {
			return m.weight
		}
	}
	return 1
}

// inPlace is what applying s to a value costs, with everything it applies to that same value: s, each branch of
// its combinators, its $ref target, and so on. It stops counting past maxChecksPerValue.
func (a *analysis) inPlace(s *jsonschema.Schema) int {
	if n, ok := a.here[s]; ok {
		return n
	}
	n := weight(s)
	for _, e := range edges(s) {
		if e.applies == toValue && n <= maxChecksPerValue {
			n += a.inPlace(e.to)
		}
	}
	n = min(n, maxChecksPerValue+1)
	a.here[s] = n
	return n
}

// explore checks the value at path of the data (a pattern: "/*" for any member or item), to which the subschemas
// of frame apply, then the values inside it.
func (a *analysis) explore(frame []*jsonschema.Schema, path string) {
	if len(*a.errs) > 0 {
		return
	}
	cost := 0
	for _, s := range frame {
		cost += a.inPlace(s)
	}
	if cost > maxChecksPerValue {
		a.tooManyChecks(frame, path)
		return
	}
	var applied []*jsonschema.Schema
	for _, s := range frame {
		applied = a.closure(s, applied)
	}
	if a.expanded += len(applied); a.expanded > maxExpandedSubschemas {
		a.report("expanded", pointerOf(frame[0], a.prefix), fmt.Sprintf("expands, with every $ref followed, to more "+
			"than %d subschemas: references may reuse a subschema, not multiply it", maxExpandedSubschemas))
		return
	}
	named := map[string][]*jsonschema.Schema{}
	var anyMember, items, names []*jsonschema.Schema
	for _, s := range applied {
		for _, e := range edges(s) {
			switch e.applies {
			case toNamedMember:
				named[e.name] = append(named[e.name], e.to)
			case toAnyMember:
				anyMember = append(anyMember, e.to)
			case toAnyItem:
				items = append(items, e.to)
			case toMemberNames:
				names = append(names, e.to)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(named)) {
		a.explore(append(named[k], anyMember...), path+problem.Pointer(k))
	}
	if len(anyMember) > 0 {
		a.explore(anyMember, path+"/*")
	}
	if len(items) > 0 {
		a.explore(items, path+"/*")
	}
	if len(names) > 0 {
		a.explore(names, path+" (member names)")
	}
}

// closure appends s and what it applies in place to out, as often as validation applies each.
func (a *analysis) closure(s *jsonschema.Schema, out []*jsonschema.Schema) []*jsonschema.Schema {
	out = append(out, s)
	for _, e := range edges(s) {
		if e.applies == toValue {
			out = a.closure(e.to, out)
		}
	}
	return out
}

// tooManyChecks reports a value checked against too many subschemas, at the combinator where the count passes the
// bound: the subschema past it none of whose in-place subschemas is.
func (a *analysis) tooManyChecks(frame []*jsonschema.Schema, path string) {
	worst := frame[0]
	for _, s := range frame {
		if a.inPlace(s) > a.inPlace(worst) {
			worst = s
		}
	}
	for descended := true; descended && a.inPlace(worst) > maxChecksPerValue; {
		descended = false
		for _, e := range edges(worst) {
			if e.applies == toValue && a.inPlace(e.to) > maxChecksPerValue {
				worst, descended = e.to, true
				break
			}
		}
	}
	value := "the data"
	if path != "" {
		value = "a value at " + path + " of the data"
	}
	a.report("checks", pointerOf(worst, a.prefix), fmt.Sprintf("makes validation check %s against more than %d "+
		"subschemas (every branch of anyOf, oneOf and allOf and every $ref target counts, and they multiply along "+
		"a path); the limit is %d", value, maxChecksPerValue, maxChecksPerValue))
}
