package handlers

import "github.com/switchboard/switchboard/internal/problem"

// fieldsProblem is the validation_failed problem of the fields, or nil when there are none.
func fieldsProblem(f problem.Fields) *Problem {
	if e := f.Problem(); e != nil {
		return fromError(e)
	}
	return nil
}

// invalidParameter is the validation_failed problem of one query or path parameter.
func invalidParameter(name, detail string) *Problem {
	return fromError(problem.InvalidParameter(name, detail))
}

// deref is the value v points to, or the zero value (a nil slice or map) when it is nil.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}
