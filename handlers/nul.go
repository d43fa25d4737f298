package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
)

// The databases cannot keep U+0000 in text (PostgreSQL refuses it, SQLite cuts strings at it in places), so a
// request that carries it anywhere — a JSON string of the body (where it can only be written as the escape \u0000),
// a query or path parameter — is refused up front as validation_failed naming every place, and never reaches a
// statement to fail there with a 500. In a bulk body each item's pointer is named, so a client knows which to fix.
// Parameters whose bytes are not UTF-8 are refused the same way (PostgreSQL refuses such text), and a body that is
// not UTF-8 is no JSON text at all: malformed_json, rather than a decoder's silent replacement of the bytes.

// nulFields returns the places of U+0000 (and of parameters that are not UTF-8) in the request, or nil; a JSON body
// that is not UTF-8 is errNotUTF8. It restores the body it reads.
func nulFields(r *http.Request, pathParams map[string]string) (problem.Fields, error) {
	var errs problem.Fields
	names := make([]string, 0, len(pathParams))
	for name, v := range pathParams {
		if text.Fault(v) != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		errs.AddParameter(name, text.Fault(pathParams[name]))
	}
	var query url.Values
	if r.URL.RawQuery != "" { // parsing even an empty query allocates its map
		query = r.URL.Query()
	}
	faults := map[string]string{}
	for name, vs := range query {
		for _, v := range vs {
			if f := text.Fault(v); f != "" {
				faults[name] = f
				break
			}
		}
	}
	names = names[:0]
	for name := range faults {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		errs.AddParameter(name, faults[name])
	}
	if r.Body == nil || r.Body == http.NoBody || !strings.Contains(r.Header.Get("Content-Type"), "json") {
		return errs, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return errs, err
	}
	if !utf8.Valid(body) {
		// A JSON decoder would take it with each such byte replaced: the client's data, silently changed.
		return errs, errNotUTF8{offset: invalidUTF8At(body)}
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

// errNotUTF8 is a JSON body whose bytes are not UTF-8, which no JSON text may be (RFC 8259, section 8.1).
type errNotUTF8 struct{ offset int }

func (e errNotUTF8) Error() string {
	return fmt.Sprintf("The request body is not valid JSON: it is not UTF-8 text (byte %d).", e.offset)
}

// invalidUTF8At is the offset of the first byte of b that does not start a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
