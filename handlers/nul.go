package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
)

// The databases cannot keep U+0000 in text (PostgreSQL refuses it, SQLite cuts strings at it in places), so a
// request that carries it anywhere — a JSON string of the body (where it can only be written as the escape \u0000),
// a query or path parameter — is refused up front as validation_failed naming every place, and never reaches a
// statement to fail there with a 500. In a bulk body each item's pointer is named, so a client knows which to fix.

// nulFields returns the places of U+0000 in the request, or nil. It restores the body it reads.
func nulFields(r *http.Request, pathParams map[string]string) (problem.Fields, error) {
	var errs problem.Fields
	names := make([]string, 0, len(pathParams))
	for name, v := range pathParams {
		if strings.IndexByte(v, 0) >= 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		errs.AddParameter(name, "must not contain the character U+0000")
	}
	query := r.URL.Query()
	names = names[:0]
	for name, vs := range query {
		for _, v := range vs {
			if strings.IndexByte(v, 0) >= 0 {
				names = append(names, name)
				break
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		errs.AddParameter(name, "must not contain the character U+0000")
	}
	if r.Body == nil || r.Body == http.NoBody || !strings.Contains(r.Header.Get("Content-Type"), "json") {
		return errs, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return errs, err
	}
	if !bytes.Contains(bytes.ToLower(body), []byte(`\u0000`)) {
		return errs, nil
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return errs, nil // not JSON: the validator says so
	}
	text.Check(v, "", &errs)
	return errs, nil
}
