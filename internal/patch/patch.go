// Package patch is how capability services take partial updates (PATCH): each field of an update is left alone,
// cleared, or set. An optional field that cannot be cleared is a plain pointer (nil: left alone); a field that can
// be cleared is a Field, because "absent" and "null" mean different things.
package patch

// Field is a clearable field of an update. The zero value leaves the field alone.
type Field[T any] struct {
	given bool
	null  bool
	value T
}

// Set is a Field that sets the value.
func Set[T any](v T) Field[T] { return Field[T]{given: true, value: v} }

// Clear is a Field that clears the value.
func Clear[T any]() Field[T] { return Field[T]{given: true, null: true} }

// Given reports whether the update names the field (to set or to clear it).
func (f Field[T]) Given() bool { return f.given }

// Value returns the value a Set field sets; ok is false for a field left alone or cleared.
func (f Field[T]) Value() (v T, ok bool) { return f.value, f.given && !f.null }

// Apply changes *dst as the field says: left alone, cleared (nil) or set.
func (f Field[T]) Apply(dst **T) {
	switch {
	case !f.given:
	case f.null:
		*dst = nil
	default:
		v := f.value
		*dst = &v
	}
}

// Nullable is a clearable field as a generated API type carries it (oapi-codegen's nullable.Nullable).
type Nullable[T any] interface {
	IsSpecified() bool
	IsNull() bool
	MustGet() T
}

// Of reads a clearable field as it was sent: absent leaves it alone, null clears it, a value sets it.
func Of[T any, N Nullable[T]](n N) Field[T] {
	switch {
	case !n.IsSpecified():
		return Field[T]{}
	case n.IsNull():
		return Clear[T]()
	}
	return Set(n.MustGet())
}
