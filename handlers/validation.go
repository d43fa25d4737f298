package handlers

import (
	"errors"
	"fmt"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/problem"
)

// validatorFor returns the middleware that validates requests of one operation against the spec: security
// (through authenticate), parameters, body and formats. Failures become problems: auth failures win over
// validation failures, so a caller without a valid key learns nothing about the operation's schema.
//
// It is kin-openapi's openapi3filter, as oapi-codegen's echo-middleware runs it, but fed the route Echo already
// matched: the middleware would route every request a second time through gorilla/mux regular expressions (a
// tenth of the hot path), and needs spec.Servers cleared and no Prefix to work at all.
func (s *Server) validatorFor(route *routers.Route) echo.MiddlewareFunc {
	opts := &openapi3filter.Options{AuthenticationFunc: s.authenticate, MultiError: true, KeepValidatedValue: true}
	security, securityOnly := securityOnlyPlan(route)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			names, values := c.ParamNames(), c.ParamValues()
			if securityOnly && len(names) == 0 && (req.Body == nil || req.Body == http.NoBody) {
				// Nothing but the security requirements to validate: see securityOnlyPlan.
				nul, _ := nulFields(req, nil)
				if e := nul.Err(); e != nil {
					return e
				}
				err := s.validateSecurity(req, route, opts, security)
				if err == nil {
					return next(c)
				}
				return validationError(openapi3.MultiError{err}, err)
			}
			params := make(map[string]string, len(names))
			for i, name := range names {
				v := values[i]
				if req.URL.RawPath != "" { // Echo matched the escaped path: its parameters are still escaped
					if u, err := url.PathUnescape(v); err == nil {
						v = u
					}
				}
				params[name] = v
			}
			nul, err := nulFields(req, params)
			if p := tooLarge(err); p != nil {
				return p
			}
			if e, ok := errors.AsType[errNotUTF8](err); ok {
				return newProblem(problem.MalformedJSON, e.Error())
			}
			if err != nil {
				// The client went away (or stalled) in the middle of its body: its fault, not a 5xx.
				return newProblem(problem.MalformedJSON, "The request body ended before it was complete.")
			}
			if e := nul.Err(); e != nil {
				return e
			}
			err = openapi3filter.ValidateRequest(req.Context(), &openapi3filter.RequestValidationInput{
				Request: req, PathParams: params, Route: route, Options: opts,
			})
			if err == nil {
				return next(c)
			}
			var pe *openapi3filter.ParseError
			if errors.As(err, &pe) {
				if f := multipartFields(req, route); len(f) > 0 {
					return fieldsProblem(f)
				}
			}
			var me openapi3.MultiError
			if !errors.As(err, &me) {
				me = openapi3.MultiError{err}
			}
			return validationError(me, err)
		}
	}
}

// validationError is the answer to a request the validator refused with err (its errors me): a problem, or an
// internal error when the key check itself failed (the database is down), logged with its cause.
func validationError(me openapi3.MultiError, err error) error {
	if p := validationProblem(me); p != nil {
		return p
	}
	return fmt.Errorf("validate request: %w", err)
}

// securityScheme is one scheme of a security requirement, resolved once.
type securityScheme struct {
	name   string
	scheme *openapi3.SecurityScheme
	scopes []string
}

// securityOnlyPlan resolves, for an operation without parameters or request body, its security requirements
// (alternatives, each a list of schemes sorted by name, as openapi3filter tries them) and reports true: for a
// request of such an operation without a body, validating it is only running them, which validateSecurity does
// without the validator's per-request sorting, copies and body handling (a fifth of the middleware's cost on the
// reference first call). Operations with parameters or a body, and requests with a body, take the validator.
func securityOnlyPlan(route *routers.Route) ([][]securityScheme, bool) {
	op := route.Operation
	if len(op.Parameters) > 0 || len(route.PathItem.Parameters) > 0 || op.RequestBody != nil {
		return nil, false
	}
	var plan [][]securityScheme
	for _, sr := range *securityOf(route) {
		names := slices.Sorted(maps.Keys(sr))
		alt := make([]securityScheme, 0, len(names))
		for _, name := range names {
			var ref *openapi3.SecuritySchemeRef
			if route.Spec.Components != nil {
				ref = route.Spec.Components.SecuritySchemes[name]
			}
			if ref == nil || ref.Value == nil {
				return nil, false // undeclared: the validator's own error says so
			}
			alt = append(alt, securityScheme{name: name, scheme: ref.Value, scopes: sr[name]})
		}
		plan = append(plan, alt)
	}
	return plan, true
}

// validateSecurity is openapi3filter.ValidateSecurityRequirements over a resolved plan, for a request without a
// body: the first alternative whose every scheme authenticates admits the request; otherwise the errors of all
// alternatives, as the validator reports them.
func (s *Server) validateSecurity(req *http.Request, route *routers.Route, opts *openapi3filter.Options,
	plan [][]securityScheme) error {
	if len(plan) == 0 {
		return nil
	}
	input := &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: opts}
	var errs []error
	for _, alt := range plan {
		var err error
		for _, sc := range alt {
			if err = s.authenticate(req.Context(), &openapi3filter.AuthenticationInput{RequestValidationInput: input,
				SecuritySchemeName: sc.name, SecurityScheme: sc.scheme, Scopes: sc.scopes}); err != nil {
				break
			}
		}
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return &openapi3filter.SecurityRequirementsError{SecurityRequirements: *securityOf(route), Errors: errs}
}

// securityOf is the security requirements of a route's operation: its own, else the spec's.
func securityOf(route *routers.Route) *openapi3.SecurityRequirements {
	if route.Operation.Security != nil {
		return route.Operation.Security
	}
	return &route.Spec.Security
}

// apiRoutes builds the kin-openapi route of every operation of the embedded spec, by operationId.
func apiRoutes() (map[string]*routers.Route, error) {
	spec, err := gen.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	routes := map[string]*routers.Route{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			routes[op.OperationID] = &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return routes, nil
}

// validationProblem picks the problem for a set of validator errors: a security failure first, then a body that
// is too large, of the wrong media type or not JSON, and otherwise validation_failed with every field. It returns
// nil when authentication failed for a reason of the server's own.
func validationProblem(errs []error) *Problem {
	var fields problem.Fields
	for _, err := range errs {
		var sre *openapi3filter.SecurityRequirementsError
		if errors.As(err, &sre) {
			for _, e := range sre.Errors {
				var p *Problem
				if errors.As(e, &p) {
					return p
				}
			}
			for _, e := range sre.Errors {
				if p := tooLarge(e); p != nil {
					return p
				}
			}
			return nil
		}
	}
	for _, err := range errs {
		if p := tooLarge(err); p != nil {
			return p
		}
		var re *openapi3filter.RequestError
		if !errors.As(err, &re) {
			fields = append(fields, problem.Field{Detail: err.Error()})
			continue
		}
		if re.RequestBody != nil && re.Err == nil && strings.HasPrefix(re.Reason, "header Content-Type has unexpected value") {
			return newProblem(problem.UnsupportedMediaType, "Send the request body with Content-Type: application/json.")
		}
		var pe *openapi3filter.ParseError
		if re.RequestBody != nil && errors.As(re.Err, &pe) {
			if re.Input != nil && !isJSON(re.Input.Request.Header.Get(echo.HeaderContentType)) {
				// A form the validator cannot decode: no JSON to blame, and the field it names, if any.
				path := make([]string, 0, len(pe.Path()))
				for _, seg := range pe.Path() {
					path = append(path, fmt.Sprint(seg))
				}
				fields = append(fields, problem.Field{Pointer: problem.Pointer(path...), Detail: pe.Error()})
				continue
			}
			return newProblem(problem.MalformedJSON, "The request body is not valid JSON: "+pe.Error())
		}
		fields = append(fields, requestFields(re)...)
	}
	p := fieldsProblem(fields)
	if p != nil && len(p.Fields) > maxFieldErrors {
		p.Fields = p.Fields[:maxFieldErrors] // the detail still counts them all
	}
	return p
}

// isJSON reports whether a Content-Type is JSON (application/json, application/merge-patch+json, …).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json"))
}

// multipartFields names what is wrong with the parts of a multipart/form-data body the validator could not decode:
// each part the operation's schema does not define, and each required part that is missing. The validator stops at
// the first part it does not know and names no field; the body is read again (the validator put it back) for all.
func multipartFields(req *http.Request, route *routers.Route) problem.Fields {
	mt, params, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEMultipartForm || route.Operation.RequestBody == nil || req.GetBody == nil {
		return nil
	}
	media := route.Operation.RequestBody.Value.Content.Get(mt)
	if media == nil || media.Schema == nil {
		return nil
	}
	schema := media.Schema.Value
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	known := slices.Sorted(maps.Keys(schema.Properties))
	var fields problem.Fields
	seen := map[string]bool{}
	mr := multipart.NewReader(body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			break // the end, or a broken body: the parts read so far are judged
		}
		name := part.FormName()
		if schema.Properties[name] == nil && !seen[name] {
			fields.Add(problem.Pointer(name), fmt.Sprintf("is not a part of this request (its parts: %s)",
				strings.Join(known, ", ")))
		}
		seen[name] = true
	}
	for _, name := range schema.Required {
		if !seen[name] {
			fields.Add(problem.Pointer(name), fmt.Sprintf("a part named %s is required", name))
		}
	}
	return fields
}

// maxFieldErrors is how many invalid fields a problem lists (the spec's maxItems of errors).
const maxFieldErrors = 100

// fieldErrors locates each failure of one request error: a parameter or header by name, a body field by JSON pointer.
func requestFields(re *openapi3filter.RequestError) []problem.Field {
	var schemaErrs []*openapi3.SchemaError
	var me openapi3.MultiError
	var se *openapi3.SchemaError
	switch {
	case errors.As(re.Err, &me):
		for _, e := range me {
			if errors.As(e, &se) {
				schemaErrs = append(schemaErrs, se)
			}
		}
	case errors.As(re.Err, &se):
		schemaErrs = append(schemaErrs, se)
	}
	locate := func(f *problem.Field, pointer string) {
		switch {
		case re.Parameter != nil && re.Parameter.In == openapi3.ParameterInHeader:
			f.Header = re.Parameter.Name
		case re.Parameter != nil:
			f.Parameter = re.Parameter.Name
		default:
			f.Pointer = pointer
		}
	}
	if len(schemaErrs) == 0 {
		reason := re.Reason
		if re.Err != nil {
			reason = re.Err.Error()
		}
		if re.Parameter == nil && errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			reason = "a request body is required"
		}
		f := problem.Field{Detail: reason}
		locate(&f, "")
		return []problem.Field{f}
	}
	out := make([]problem.Field, 0, len(schemaErrs))
	for _, se := range schemaErrs {
		f := problem.Field{Detail: se.Reason}
		locate(&f, schemaPointer(se))
		out = append(out, f)
	}
	return out
}

// schemaPointer is the JSON pointer of the member a schema error is about. The validator reports a member the
// schema does not allow at its object (`property "x" is unsupported`, pointing at the object); the pointer names
// the member itself, the one a client has to remove or rename.
func schemaPointer(se *openapi3.SchemaError) string {
	path := se.JSONPointer()
	if se.SchemaField == "properties" {
		name, ok := strings.CutPrefix(se.Reason, "property ")
		if name, ok2 := strings.CutSuffix(name, " is unsupported"); ok && ok2 {
			if unquoted, err := strconv.Unquote(name); err == nil {
				path = append(path, unquoted)
			}
		}
	}
	return problem.Pointer(path...)
}

// tooLarge returns the request_too_large problem when reading the body failed on the body limit, else nil.
func tooLarge(err error) *Problem {
	if err == nil {
		return nil // without the errors.As below, whose target escapes: an allocation per request
	}
	var e *http.MaxBytesError
	if !errors.As(err, &e) {
		return nil
	}
	return bodyTooLarge(-1, e.Limit)
}

// bodyTooLarge is the request_too_large problem of a body over limit bytes; length is the size its Content-Length
// declares, or -1 when reading it passed the limit.
func bodyTooLarge(length, limit int64) *Problem {
	detail := fmt.Sprintf("The request body is larger than the limit of %d bytes.", limit)
	if length >= 0 {
		detail = fmt.Sprintf("The request body is %d bytes; the limit is %d bytes.", length, limit)
	}
	return newProblem(problem.RequestTooLarge, detail)
}
