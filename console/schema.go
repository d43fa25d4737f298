package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/problem"
)

// The console's forms are read as the API's request bodies and checked against the spec's schemas of them, so that a
// form obeys exactly the rules an API call does (lengths, patterns, ranges), and the service then judges the rest as
// it does for the API. No limit is written twice.

var (
	specOnce sync.Once
	specDoc  *openapi3.T
	specErr  error
)

func spec() (*openapi3.T, error) {
	specOnce.Do(func() { specDoc, specErr = gen.GetSwagger() })
	return specDoc, specErr
}

// specSchema is the spec's component schema name, or of one of its properties with "Name.property".
func specSchema(path string) (*openapi3.Schema, error) {
	doc, err := spec()
	if err != nil {
		return nil, err
	}
	name, prop, _ := strings.Cut(path, ".")
	ref, ok := doc.Components.Schemas[name]
	if !ok || ref.Value == nil {
		return nil, fmt.Errorf("console: the spec has no schema %s", name)
	}
	s := ref.Value
	if prop != "" {
		p, ok := s.Properties[prop]
		if !ok || p.Value == nil {
			return nil, fmt.Errorf("console: the spec's schema %s has no property %s", name, prop)
		}
		s = p.Value
	}
	return s, nil
}

// requestBody checks doc, a request body as the API would receive it, against the spec's schema name, and decodes it
// into out (a generated request type). The error is validation_failed naming every invalid field by JSON pointer;
// any other error is internal.
func requestBody(name string, doc map[string]any, out any) error {
	s, err := specSchema(name)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var value any
	if err := json.Unmarshal(raw, &value); err != nil {
		return err
	}
	if err := s.VisitJSON(value, openapi3.MultiErrors()); err != nil {
		var fields problem.Fields
		var me openapi3.MultiError
		if !errors.As(err, &me) {
			me = openapi3.MultiError{err}
		}
		for _, e := range me {
			var se *openapi3.SchemaError
			if !errors.As(e, &se) {
				return err
			}
			detail := se.Reason
			// A pattern says nothing to a person; the schema's description says what it allows.
			if se.SchemaField == "pattern" && se.Schema != nil && se.Schema.Description != "" {
				detail = se.Schema.Description
			}
			fields.Add(problem.Pointer(se.JSONPointer()...), detail)
		}
		return fields.Err()
	}
	return json.Unmarshal(raw, out)
}

// fieldErrors are the invalid fields of a refused form by JSON pointer, for the template to show beside each field;
// nil when err is no validation problem.
func fieldErrors(err error) map[string]string {
	var p *problem.Error
	if !errors.As(err, &p) || p.Code != problem.ValidationFailed {
		return nil
	}
	out := map[string]string{}
	for _, f := range p.Fields {
		key := f.Pointer
		if key == "" {
			key = f.Parameter
		}
		if _, seen := out[key]; !seen {
			out[key] = f.Detail
		}
	}
	return out
}

// problemOf is err as a problem the service told, or nil.
func problemOf(err error) *problem.Error {
	var p *problem.Error
	if errors.As(err, &p) {
		return p
	}
	return nil
}

func init() {
	// spec gives templates a schema of the spec ("Slug", "LinkCreate.title") for the limits of form fields, which
	// browsers check before sending.
	templateFuncs["spec"] = specSchema
}
