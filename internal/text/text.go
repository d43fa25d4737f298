// Package text is what Switchboard keeps of text that comes from outside — a sender's body, a network's message, a
// receiver's answer. Both databases keep text as UTF-8 without the character U+0000: PostgreSQL refuses NUL in text
// and JSONB and refuses bytes that are not UTF-8, and the query builder fails a statement that would carry NUL
// (it formats every value into the statement's text). So text from outside is either refused where the sender can
// be told (Check: a 400 naming each place) or, where it cannot (a network's push, a receiver's answer), made
// storable (Clean, Cleaned) before it reaches the store: nothing from outside can fail a statement.
package text

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/internal/problem"
)

// Replacement stands for what could not be kept: U+0000 and byte sequences that are not UTF-8.
const Replacement = "\uFFFD"

// Storable reports whether both databases keep s as it is: valid UTF-8 without U+0000.
func Storable(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// Clean returns s as both databases keep it: each U+0000, and each run of bytes that is not UTF-8, is Replacement.
func Clean(s string) string {
	if Storable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, Replacement), "\x00", Replacement)
}

// Bytes is Clean of raw bytes.
func Bytes(b []byte) string { return Clean(string(b)) }

// Check adds to errs the pointer of every string and member name of v, a decoded JSON value found at pointer, that
// is not Storable (a decoder that replaces bytes that are not UTF-8 leaves only U+0000 to find). Members are visited
// in name order, so the errors read the same on every run.
func Check(v any, pointer string, errs *problem.Fields) {
	switch x := v.(type) {
	case string:
		if d := Fault(x); d != "" {
			errs.Add(orRoot(pointer), d)
		}
	case []any:
		for i, e := range x {
			Check(e, pointer+"/"+strconv.Itoa(i), errs)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := pointer + problem.Pointer(k)
			if d := Fault(k); d != "" {
				errs.Add(p, "a member name "+d)
				continue
			}
			Check(x[k], p, errs)
		}
	}
}

// Fault says what is wrong with s ("must not contain the character U+0000", "must be valid UTF-8"), or "" when
// it is Storable.
func Fault(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain the character U+0000"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	return ""
}

// orRoot locates the whole body as "/": a problem's field needs a locator, and "" would read as none.
func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Cleaned returns a copy of v in which every string — of fields, elements, map keys and values, behind pointers and
// interfaces — is Clean. What a network reports goes through it before it is stored, so that a field added to a
// report later is covered without anyone remembering to. Functions and channels are kept as they are; unexported
// fields are copied untouched.
func Cleaned[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	return cleaned(rv).Interface().(T)
}

func cleaned(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !Storable(s) {
			out := reflect.New(v.Type()).Elem()
			out.SetString(Clean(s))
			return out
		}
		return v
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(cleaned(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(cleaned(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(cleaned(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8 {
			return v // raw bytes (credentials, media) are not text
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(cleaned(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(cleaned(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(cleaned(it.Key()), cleaned(it.Value()))
		}
		return out
	}
	return v
}
