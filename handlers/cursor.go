package handlers

import (
	"encoding/base64"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
)

// Lists page with opaque cursors: the base64url (unpadded) form of the last ID of the previous page. Clients must
// not build them; the encoding leaves room to carry more than an ID later without breaking anyone.

// defaultPageLimit is the page size when ?limit= is absent (the spec's default).
const defaultPageLimit = 20

// nextCursor is the cursor of the page after one that ended with lastID, or nil when no page follows.
func nextCursor(more bool, lastID string) *string {
	if !more {
		return nil
	}
	c := base64.RawURLEncoding.EncodeToString([]byte(lastID))
	return &c
}

// pageFrom turns ?limit= and ?cursor= into a keyset page over IDs with the given prefix ("lnk", "clk"). A cursor
// that is not one this server made is a validation_failed problem on the parameter "cursor".
func pageFrom(limit *gen.Limit, cursor *gen.Cursor, prefix string) (store.Page, error) {
	p := store.Page{Limit: defaultPageLimit}
	if limit != nil {
		p.Limit = *limit
	}
	if cursor == nil {
		return p, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(*cursor)
	id, ok := strings.CutPrefix(string(raw), prefix+"_")
	if err == nil && ok {
		_, err = ulid.ParseStrict(id)
	}
	if err != nil || !ok {
		return p, invalidParameter("cursor", "is not a cursor of this list; pass next_cursor of the previous page unchanged")
	}
	p.Before = string(raw)
	return p, nil
}
