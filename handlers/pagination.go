package handlers

import (
	"encoding/base64"
	"strings"

	"github.com/switchboard/switchboard/store"
)

// defaultLimit is the page size of a list without ?limit=.
const defaultLimit = 20

// A cursor is the position after which the next page of a list starts: the ID of the last item of the previous
// page and the direction of the list. It is opaque to clients: "<" (newest first) or ">" (oldest first) and the ID,
// in unpadded base64url, which the Cursor parameter's pattern (^[A-Za-z0-9_-]+$) admits.
const (
	cursorNewestFirst = '<'
	cursorOldestFirst = '>'
)

// encodeCursor returns the cursor of the page after the item id, in the page's direction.
func encodeCursor(p store.Page, id string) string {
	dir := cursorNewestFirst
	if p.After != "" {
		dir = cursorOldestFirst
	}
	return base64.RawURLEncoding.EncodeToString([]byte(string(dir) + id))
}

// pageFrom returns the store page a list request asks for: limit (default 20), and the position of cursor, which
// must come from a list of IDs with the prefix ("whk_"). Lists that only go newest first pass oldestFirstOK false, so
// the cursor of another list cannot turn them round. An invalid cursor is a validation_failed problem.
func pageFrom(limit *int, cursor *string, prefix string, oldestFirstOK bool) (store.Page, error) {
	p := store.Page{Limit: defaultLimit}
	if limit != nil {
		p.Limit = *limit
	}
	if cursor == nil {
		return p, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(*cursor)
	text := string(raw)
	if err != nil || len(text) < 2 || !strings.HasPrefix(text[1:], prefix) {
		return p, invalidCursor()
	}
	switch id := text[1:]; {
	case text[0] == cursorNewestFirst:
		p.Before = id
	case text[0] == cursorOldestFirst && oldestFirstOK:
		p.After = id
	default:
		return p, invalidCursor()
	}
	return p, nil
}

func invalidCursor() *Problem {
	return invalidParameter("cursor", "not a cursor of this list: pass the next_cursor of the previous page unchanged")
}

// nextCursor returns the next_cursor of a page whose last item has the ID last: nil when no more follow.
func nextCursor(p store.Page, more bool, last string) *string {
	if !more {
		return nil
	}
	c := encodeCursor(p, last)
	return &c
}

// listPage maps a page of store rows to the API's items and its next_cursor.
func listPage[T, U any](rows []T, more bool, p store.Page, id func(T) string, conv func(T) (U, error)) ([]U, *string, error) {
	out := make([]U, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = conv(r); err != nil {
			return nil, nil, err
		}
	}
	var last string
	if len(rows) > 0 {
		last = id(rows[len(rows)-1])
	}
	return out, nextCursor(p, more, last), nil
}
