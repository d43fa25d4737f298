package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"

	"github.com/uptrace/bun"
)

// EventsChannel is the PostgreSQL notification channel that tells live streams of every replica that events
// committed.
const EventsChannel = "switchboard_events"

// EventPosition is an event's place in the order the transactions that wrote events committed: the order a reader
// that follows the log meets them, which the order of their IDs is not (an ID is taken when a transaction writes,
// and a transaction that wrote first can commit last). Positions only grow at the end of what ReadEvents returns, so
// a reader that resumes after a position misses nothing.
//
// On SQLite, which runs one write transaction at a time, Major is the event's Seq. On PostgreSQL it is the ID of
// the transaction that wrote it, and ReadEvents stops before the oldest transaction still running, whose events
// could still appear before those of transactions that committed after it began. ID orders the events of one
// transaction. The zero value is before every event.
type EventPosition struct {
	Major int64
	ID    string
}

// Compare orders positions: negative when p is before q, zero when equal, positive when after.
func (p EventPosition) Compare(q EventPosition) int {
	if c := cmp.Compare(p.Major, q.Major); c != 0 {
		return c
	}
	return cmp.Compare(p.ID, q.ID)
}

// PositionedEvent is an event with its place in commit order.
type PositionedEvent struct {
	Event
	Position EventPosition
}

// positionedRow is how a read of the log scans an event, its position and, on PostgreSQL, how far the log is
// settled (see ReadEvents).
type positionedRow struct {
	Event   `bun:",extend"`
	Major   int64  `bun:"major,scanonly"`
	Horizon *int64 `bun:"horizon,scanonly"`
}

// majorColumn is the column of EventPosition.Major in each dialect.
func (db *DB) majorColumn() string {
	if db.dialect == Postgres {
		return "ev.tx_id"
	}
	return "ev.seq"
}

// afterPosition narrows q to the events after p.
func (db *DB) afterPosition(q *bun.SelectQuery, p EventPosition) *bun.SelectQuery {
	return q.Where("("+db.majorColumn()+", ev.id) > (?, ?)", p.Major, p.ID)
}

// ReadEvents reads, in commit order, up to limit events of every workspace after a position (workspaceID "" ) or of
// one workspace, as far as the log is settled: on PostgreSQL no further than the oldest transaction still running.
// heldBack reports that committed events beyond that point were left for a later read (a transaction that began
// before them has not finished yet): the caller should look again soon, since the end of that transaction is not
// necessarily notified. It returns no sentinel errors.
func (s *Events) ReadEvents(ctx context.Context, workspaceID string, after EventPosition, limit int) (
	evs []PositionedEvent, heldBack bool, err error) {
	var rows []positionedRow
	q := s.db.r.NewSelect().Model(&rows).ColumnExpr("?TableColumns").ColumnExpr(s.db.majorColumn() + " AS major")
	if workspaceID != "" {
		q = q.Where("ev.workspace_id = ?", workspaceID)
	}
	q = s.db.afterPosition(q, after).OrderExpr(s.db.majorColumn() + ", ev.id").Limit(int64(limit))
	if s.db.dialect == Postgres {
		// The horizon is read in the snapshot of the same statement as the rows: every transaction below it has
		// ended, so no event below it can appear any more.
		q = q.ColumnExpr("pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, false, err
	}
	evs = make([]PositionedEvent, 0, len(rows))
	for _, r := range rows {
		if r.Horizon != nil && r.Major >= *r.Horizon {
			return evs, true, nil
		}
		r.Event.CreatedAt = r.Event.CreatedAt.UTC()
		evs = append(evs, PositionedEvent{Event: r.Event, Position: EventPosition{Major: r.Major, ID: r.ID}})
	}
	return evs, false, nil
}

// LastPosition returns the position of the newest settled event of the whole log (the zero position when it is
// empty): where a reader that wants only what commits from now on starts. It returns no sentinel errors.
func (s *Events) LastPosition(ctx context.Context) (EventPosition, error) {
	q := s.db.r.NewSelect().TableExpr("events AS ev").ColumnExpr(s.db.majorColumn()).Column("ev.id")
	if s.db.dialect == Postgres {
		q = q.Where("ev.tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
	}
	var p EventPosition
	err := q.OrderExpr(s.db.majorColumn()+" DESC, ev.id DESC").Limit(1).Scan(ctx, &p.Major, &p.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return EventPosition{}, nil
	}
	return p, err
}

// PositionOf returns the position of an event of a workspace. Returns ErrNotFound if the workspace has no such
// event (never had, or retention deleted it).
func (s *Events) PositionOf(ctx context.Context, workspaceID, id string) (EventPosition, error) {
	p := EventPosition{ID: id}
	err := s.db.r.NewSelect().TableExpr("events AS ev").ColumnExpr(s.db.majorColumn()).
		Where("ev.id = ? AND ev.workspace_id = ?", id, workspaceID).Scan(ctx, &p.Major)
	return p, mapErr(err)
}
