package handlers

import (
	"fmt"

	"github.com/switchboard/switchboard/gen"
)

// invalidFields collects the invalid fields of a request that the spec's schema cannot judge (a URL that is not
// allowed, a taken combination), or of one item of a bulk request, with pointers relative to it.
type invalidFields []gen.ProblemFieldError

func (f *invalidFields) add(pointer, detail string) {
	*f = append(*f, gen.ProblemFieldError{Pointer: &pointer, Detail: detail})
}

func (f *invalidFields) addParameter(name, detail string) {
	*f = append(*f, gen.ProblemFieldError{Parameter: &name, Detail: detail})
}

// problem is the validation_failed problem of the fields, or nil when there are none.
func (f invalidFields) problem() *Problem {
	if len(f) == 0 {
		return nil
	}
	detail := "The request has 1 invalid field."
	if len(f) > 1 {
		detail = fmt.Sprintf("The request has %d invalid fields.", len(f))
	}
	p := newProblem("validation_failed", detail)
	p.Errors = f
	return p
}

// invalidParameter is the validation_failed problem of one query or path parameter.
func invalidParameter(name, detail string) *Problem {
	var f invalidFields
	f.addParameter(name, detail)
	return f.problem()
}
