package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/switchboard/switchboard/store"
)

// Filter operations.
const (
	FilterEquals = "equals"
	FilterIn     = "in"
	FilterExists = "exists"
	FilterPrefix = "prefix"
)

// Matches reports whether an event's data (decoded JSON, numbers as json.Number or float64) meets every filter: the
// value at the filter's JSON pointer equals its value, is one of its values, exists (or, with value false, does
// not), or is a string with its prefix. No filters match every event.
func Matches(filters []store.WebhookFilter, data any) bool {
	for _, f := range filters {
		v, found := PointerValue(data, f.Pointer)
		var ok bool
		switch f.Op {
		case FilterEquals:
			ok = found && sameJSON(v, f.Value)
		case FilterIn:
			for _, want := range f.Values {
				if found && sameJSON(v, want) {
					ok = true
					break
				}
			}
		case FilterExists:
			want, isBool := f.Value.(bool)
			ok = found == (want || !isBool)
		case FilterPrefix:
			s, isString := v.(string)
			prefix, _ := f.Value.(string)
			ok = found && isString && strings.HasPrefix(s, prefix)
		}
		if !ok {
			return false
		}
	}
	return true
}

// DecodeData decodes an event's data for Matches; numbers keep their exact text.
func DecodeData(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

// sameJSON compares two decoded JSON values, numbers by value whatever their Go types.
func sameJSON(a, b any) bool {
	na, aNum := number(a)
	nb, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && na == nb
	}
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// normalize turns the numbers inside a decoded value into float64, so that DeepEqual compares them by value.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	if f, ok := number(v); ok {
		return f
	}
	return v
}

// PointerValue resolves an RFC 6901 JSON pointer in a decoded JSON value and reports whether it names a value.
func PointerValue(v any, pointer string) (any, bool) {
	if pointer == "" {
		return v, true
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(pointer, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}
