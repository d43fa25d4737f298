// Package switchboard is the Go client of the Switchboard API, generated from api/openapi.yaml (client.gen.go: one
// method per operation, with typed request bodies, parameters and responses) plus New, which makes a client for a
// server and an API key.
//
//	sb, err := switchboard.New("http://localhost:8080", os.Getenv("SWITCHBOARD_API_KEY"))
//	models, err := sb.ListModelsWithResponse(ctx)
//	if err == nil {
//		err = switchboard.Check(models.HTTPResponse, models.Body) // an *Error with the problem's stable code
//	}
package switchboard

//go:generate go -C ../.. tool oapi-codegen -config sdk/go/oapi-codegen.yaml api/openapi.yaml

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// New makes a client for the server at baseURL (for example http://localhost:8080; operations carry their /api/v1
// paths) that sends apiKey as a Bearer token on every request. Further options (WithHTTPClient, WithRequestEditorFn)
// apply after it.
func New(baseURL, apiKey string, opts ...ClientOption) (*ClientWithResponses, error) {
	if apiKey == "" {
		return nil, errors.New("switchboard: an API key is required")
	}
	auth := WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	})
	return NewClientWithResponses(strings.TrimRight(baseURL, "/"), append([]ClientOption{auth}, opts...)...)
}

// Error is a response that is not 2xx, with its RFC 9457 problem when the body is one. Branch on Problem.Code (stable),
// not on Title or Detail.
type Error struct {
	StatusCode int
	Problem    *Problem
}

func (e *Error) Error() string {
	if e.Problem == nil {
		return fmt.Sprintf("switchboard: HTTP %d", e.StatusCode)
	}
	detail := ""
	if e.Problem.Detail != nil {
		detail = ": " + *e.Problem.Detail
	}
	if e.Problem.Errors != nil {
		for _, f := range *e.Problem.Errors {
			where := "body"
			for _, w := range []*string{f.Pointer, f.Parameter, f.Header} {
				if w != nil {
					where = *w
				}
			}
			detail += fmt.Sprintf(" [%s: %s]", where, f.Detail)
		}
	}
	return fmt.Sprintf("switchboard: %d %s%s", e.StatusCode, e.Problem.Code, detail)
}

// Check answers nil for a 2xx response and an *Error for any other, with the problem read from its body:
//
//	link, err := sb.CreateLinkWithResponse(ctx, nil, switchboard.CreateLinkJSONRequestBody{…})
//	if err == nil { err = switchboard.Check(link.HTTPResponse, link.Body) }
func Check(resp *http.Response, body []byte) error {
	if resp == nil {
		return errors.New("switchboard: no response")
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &Error{StatusCode: resp.StatusCode}
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media == "application/problem+json" {
		var p Problem
		if json.Unmarshal(body, &p) == nil {
			e.Problem = &p
		}
	}
	return e
}
