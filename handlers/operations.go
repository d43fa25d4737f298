package handlers

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/internal/apikey"
)

// operation is what the server enforces for one operation of the spec, read once at start-up. Scopes, deprecation
// and metrics labels all come from here, keyed by operationId and by route.
type operation struct {
	ID     string
	Method string
	// Path is the spec's path ("/api/v1/models/{model}"); Route is Echo's ("/api/v1/models/:model").
	Path   string
	Route  string
	Public bool
	Scopes []string
	// Idempotent operations declare the Idempotency-Key header and run behind the idempotency middleware.
	Idempotent bool
	// Deprecation and Sunset are preformatted header values ("" when the operation is not deprecated).
	Deprecation string
	Sunset      string
}

// operations indexes the spec's operations.
type operations struct {
	byID    map[string]*operation
	byRoute map[echoRoute]*operation
	routes  []*regexp.Regexp // for Allow on 405
	methods [][]string
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// indexOperations reads every operation of doc. It fails when an authenticated operation has no
// x-required-scopes, names an unknown scope, or is deprecated without x-deprecated-at and x-sunset dates.
func indexOperations(doc *openapi3.T) (*operations, error) {
	ops := &operations{byID: map[string]*operation{}, byRoute: map[echoRoute]*operation{}}
	known := apikey.All()
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		item := doc.Paths.Value(path)
		route := pathParam.ReplaceAllString(path, ":$1")
		var methods []string
		for method, op := range item.Operations() {
			o := &operation{ID: op.OperationID, Method: method, Path: path, Route: route}
			security := doc.Security
			if op.Security != nil {
				security = *op.Security
			}
			o.Public = len(security) == 0
			scopes, err := stringList(op.Extensions["x-required-scopes"])
			if err != nil {
				return nil, fmt.Errorf("%s %s: x-required-scopes: %w", method, path, err)
			}
			// An empty list is a decision (any valid key may call it, as GET /api/v1/me), a missing one an oversight.
			if _, declared := op.Extensions["x-required-scopes"]; !o.Public && !declared {
				return nil, fmt.Errorf("%s %s: authenticated operations need x-required-scopes", method, path)
			}
			for _, s := range scopes {
				if !slices.Contains(known, s) {
					return nil, fmt.Errorf("%s %s: unknown scope %q", method, path, s)
				}
			}
			o.Scopes = scopes
			if o.Idempotent, err = declaresIdempotencyKey(method, item.Parameters, op.Parameters); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			if op.Deprecated {
				if err := o.setDeprecation(op.Extensions); err != nil {
					return nil, fmt.Errorf("%s %s: %w", method, path, err)
				}
			}
			if o.ID == "" {
				return nil, fmt.Errorf("%s %s: operationId is required", method, path)
			}
			ops.byID[o.ID] = o
			ops.byRoute[echoRoute{method, route}] = o
			methods = append(methods, method)
		}
		sort.Strings(methods)
		ops.routes = append(ops.routes, regexp.MustCompile("^"+pathParam.ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`)+"$"))
		ops.methods = append(ops.methods, methods)
	}
	return ops, nil
}

// setDeprecation reads x-deprecated-at (when the operation was deprecated) and x-sunset (when it goes away), both
// dates, into the Deprecation (RFC 9745, "@" + Unix seconds) and Sunset (RFC 8594, HTTP-date) header values.
func (o *operation) setDeprecation(ext map[string]any) error {
	parse := func(name string) (time.Time, error) {
		s, ok := ext[name].(string)
		if !ok {
			return time.Time{}, fmt.Errorf("deprecated operations need %s (a date, 2006-01-02)", name)
		}
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", name, err)
		}
		return t, nil
	}
	deprecatedAt, err := parse("x-deprecated-at")
	if err != nil {
		return err
	}
	sunset, err := parse("x-sunset")
	if err != nil {
		return err
	}
	o.Deprecation = fmt.Sprintf("@%d", deprecatedAt.Unix())
	o.Sunset = sunset.UTC().Format(http.TimeFormat)
	return nil
}

func stringList(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a list of strings")
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("must be a list of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// byEchoRoute finds the operation Echo routed a request to.
func (ops *operations) byEchoRoute(method, route string) *operation {
	return ops.byRoute[echoRoute{method, route}]
}

// echoRoute is a method and an Echo route: a key that needs no string built per request.
type echoRoute struct{ method, route string }

// allowedMethods lists the methods a spec path takes, for the Allow header of a 405.
func (ops *operations) allowedMethods(urlPath string) string {
	for i, re := range ops.routes {
		if re.MatchString(urlPath) {
			return strings.Join(ops.methods[i], ", ")
		}
	}
	return ""
}
