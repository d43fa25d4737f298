// Package schematest builds the JSON Schemas that probe the bounds of custom event types: the adversarial ones a
// hostile key holder sent (tests expect them refused) and the costliest one the bounds accept (tests and the
// benchmark measure it).
package schematest

import (
	"fmt"
	"strings"
)

// NestedAnyOfRefs is the 1.5 KB schema of the report for levels = 21: each level an anyOf of two $refs to the
// next, so that a value is checked against 2^levels subschemas. Accepted before there were bounds, it made one
// `{}` cost 14 s and 1.5 GB.
func NestedAnyOfRefs(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/a0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"a%d":{"anyOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{"type":"object"}}}`, levels)
	return b.String()
}

// NestedItems is {"items":{"items":…}} levels deep: 3,000 levels (30 KB) took 29 s to create.
func NestedItems(levels int) string {
	return strings.Repeat(`{"items":`, levels) + `{}` + strings.Repeat(`}`, levels)
}

// Variants is how many kinds of item Costliest has: each item is checked against 1 + 4 × Variants subschemas.
const Variants = 15

// Costliest is a schema at the bounds: each item of its data checked against 61 subschemas (a oneOf of 15
// variants, each an allOf of a shared $ref and members of its own), 32 patterns, and 500 subschemas, most
// of them nested 30 levels deep, which is what makes compiling cost.
func Costliest() string {
	var variants []string
	for v := range Variants {
		variants = append(variants, fmt.Sprintf(`{"allOf":[{"$ref":"#/$defs/base"},{"type":"object",`+
			`"required":["kind"],"properties":{"kind":{"const":"k%d"},"f0":{"type":"string","maxLength":64,"pattern":"^f0-%d-[a-z]+$"},`+
			`"f1":{"type":"string","pattern":"^[a-z]+[0-9]{0,4}$"},"f2":{"type":"integer","minimum":0,"maximum":1000000}}}]}`, v, v))
	}
	var filler []string
	for i := range 373 {
		filler = append(filler, fmt.Sprintf(`"x%d":{"type":"string","maxLength":32}`, i))
	}
	deep := `{"properties":{` + strings.Join(filler, ",") + `}}`
	for i := range 13 {
		deep = fmt.Sprintf(`{"properties":{"l%d":%s}}`, i, deep)
	}
	return `{"$defs":{"base":{"type":"object","properties":{"id":{"type":"string","maxLength":64,"pattern":"^ord_[0-9a-z]+$"},` +
		`"at":{"type":"integer"},"tags":{"type":"array","maxItems":16,"items":{"type":"string","pattern":"^[a-z]{1,32}$"}}}},` +
		`"unused":` + deep + `},"type":"object","required":["items"],"properties":{"items":{"type":"array",` +
		`"items":{"oneOf":[` + strings.Join(variants, ",") + `]}}}}`
}

// Body returns data for Costliest of about size bytes, valid against it: items of the last variant, the one
// oneOf reaches after failing all the others.
func Body(size int) string {
	item := fmt.Sprintf(`{"kind":"k%d","id":"ord_0123456789","at":1732752000,"tags":["paid","eu"],"f0":"f0-%d-abc","f1":"abc12","f2":99}`,
		Variants-1, Variants-1)
	n := max(1, (size-len(`{"items":[]}`))/(len(item)+1))
	return `{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
}
