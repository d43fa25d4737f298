package store

import "github.com/uptrace/bun"

// Page is a keyset page of a list ordered by ID (IDs are time-sortable, so by creation).
type Page struct {
	// Limit is 1–100.
	Limit int
	// Before, when set, makes a newest-first page start just older than this ID.
	Before string
	// After, when set, makes the page oldest first, starting just newer than this ID.
	After string
}

// apply orders q by the ID column idColumn in the page's direction, skips to its start, and asks for one row more
// than the limit, which tells pageOf whether more follow.
func (p Page) apply(q *bun.SelectQuery, idColumn string) *bun.SelectQuery {
	q = q.Limit(int64(p.Limit) + 1)
	if p.After != "" {
		return q.Where(idColumn+" > ?", p.After).OrderExpr(idColumn + " ASC")
	}
	if p.Before != "" {
		q = q.Where(idColumn+" < ?", p.Before)
	}
	return q.OrderExpr(idColumn + " DESC")
}

// pageOf cuts the rows of a query made with Page.apply to the page and reports whether more follow.
func pageOf[T any](rows []T, p Page) ([]T, bool) {
	if len(rows) > p.Limit {
		return rows[:p.Limit], true
	}
	return rows, false
}
