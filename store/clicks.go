package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Click classes: what made a request. Only humans count towards links.clicks, max_clicks and unique visitors; the
// other classes are "bots" in the rollups.
const (
	ClickHuman   = "human"
	ClickBot     = "bot"
	ClickPreview = "preview"
	ClickHead    = "head"
	ClickMonitor = "monitor"
)

// Dimensions of click_dimension_rollups, named as the statistics API names them.
const (
	DimensionCountries        = "countries"
	DimensionReferrers        = "referrers"
	DimensionDevices          = "devices"
	DimensionBrowsers         = "browsers"
	DimensionOperatingSystems = "operating_systems"
)

// Dimension values recorded when a click does not tell: no GeoIP answer (countries), or no Referer (referrers).
const (
	UnknownDimensionValue = "unknown"
	DirectReferrer        = "direct"
)

// Click is one recorded visit of a short link.
type Click struct {
	bun.BaseModel `bun:"table:clicks,alias:c"`

	// ID is "clk_" and a ULID made when the redirect was served, so that writing a click twice (a spool replayed
	// after a crash) stores it once.
	ID          string    `bun:"id,pk"`
	LinkID      string    `bun:"link_id"`
	WorkspaceID string    `bun:"workspace_id"`
	ClickedAt   time.Time `bun:"clicked_at"`
	Class       string    `bun:"class"`
	// ReferrerHost is the host of the Referer; nil when none was sent.
	ReferrerHost *string `bun:"referrer_host"`
	// Country is an ISO 3166-1 alpha-2 code; nil without a GeoIP answer.
	Country   *string `bun:"country"`
	Device    string  `bun:"device"`
	OS        string  `bun:"os"`
	Browser   string  `bun:"browser"`
	UserAgent string  `bun:"user_agent"`
	// IPPrefix is the visitor's network (IPv4 /24, IPv6 /48), never the address.
	IPPrefix *string `bun:"ip_prefix"`
	// VisitorHash is the hex HMAC of address and user agent under the day's salt; set for humans only.
	VisitorHash *string `bun:"visitor_hash"`
}

var _ bun.AfterScanRowHook = (*Click)(nil)

// AfterScanRow normalises timestamps to UTC.
func (c *Click) AfterScanRow(context.Context) error {
	c.ClickedAt = utc(c.ClickedAt)
	return nil
}

// Dimensions returns the click's value in each dimension of the rollups, in the order of the Dimension constants.
func (c Click) Dimensions() [5][2]string {
	country, referrer := UnknownDimensionValue, DirectReferrer
	if c.Country != nil {
		country = *c.Country
	}
	if c.ReferrerHost != nil {
		referrer = *c.ReferrerHost
	}
	return [5][2]string{
		{DimensionCountries, country}, {DimensionReferrers, referrer}, {DimensionDevices, c.Device},
		{DimensionBrowsers, c.Browser}, {DimensionOperatingSystems, c.OS},
	}
}

// ClickedLink is what a click batch reads of each clicked link: enough for the link.clicked event.
type ClickedLink struct {
	bun.BaseModel `bun:"table:links,alias:l"`

	ID             string  `bun:"id,pk"`
	WorkspaceID    string  `bun:"workspace_id"`
	Domain         string  `bun:"domain"`
	Slug           string  `bun:"slug"`
	DestinationURL string  `bun:"destination_url"`
	ExternalID     *string `bun:"external_id"`
}

// RecordResult is what became of a batch of clicks.
type RecordResult struct {
	// Inserted clicks are new rows, counted in the rollups and in links.clicks/bot_clicks.
	Inserted int
	// Duplicates were recorded before (a replayed spool); nothing was counted for them again.
	Duplicates int
	// LinkDeleted clicks belong to links that no longer exist; they are not recorded.
	LinkDeleted int
}

// ClickedEventType is the opt-in event emitted for every recorded click of a workspace that subscribes to it.
const ClickedEventType = "link.clicked"

// Clicks is the repository of recorded clicks and their rollups.
type Clicks struct{ db *DB }

// recordChunk bounds the rows of one multi-row statement, well below PostgreSQL's and SQLite's limits.
const recordChunk = 500

// Record writes a batch of clicks in one transaction: the clicks (a click whose ID is already stored is skipped),
// then — derived only from the rows actually inserted, so that a replay never counts twice — the visitors of the
// day, the hourly rollups and dimension rollups, the links' clicks, bot_clicks and last_clicked_at (one update per
// link), and a link.clicked event per click for the workspaces where an endpoint subscribes to it (eventData builds
// its data; nothing is written for the others). Clicks of links that do not exist any more are left out.
// WorkspaceID is taken from the link. On PostgreSQL the clicked links are locked in ID order first, so concurrent
// batches of several processes never deadlock on them.
func (s *Clicks) Record(ctx context.Context, clicks []Click, eventData func(Click, ClickedLink) any) (RecordResult, error) {
	var res RecordResult
	if len(clicks) == 0 {
		return res, nil
	}
	err := s.db.w.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res = RecordResult{}
		links, err := s.lockLinks(ctx, tx, clicks)
		if err != nil {
			return err
		}
		kept := make([]Click, 0, len(clicks))
		for _, c := range clicks {
			l, ok := links[c.LinkID]
			if !ok {
				res.LinkDeleted++
				continue
			}
			c.WorkspaceID = l.WorkspaceID
			kept = append(kept, c)
		}
		inserted, err := s.insertClicks(ctx, tx, kept)
		if err != nil {
			return err
		}
		res.Inserted, res.Duplicates = len(inserted), len(kept)-len(inserted)
		if len(inserted) == 0 {
			return nil
		}
		firsts, err := s.insertVisitors(ctx, tx, inserted)
		if err != nil {
			return err
		}
		if err := s.upsertRollups(ctx, tx, inserted, firsts); err != nil {
			return err
		}
		if err := s.upsertDimensions(ctx, tx, inserted); err != nil {
			return err
		}
		if err := s.updateLinks(ctx, tx, inserted); err != nil {
			return err
		}
		return s.emitClicked(ctx, tx, inserted, links, eventData)
	})
	return res, err
}

func (s *Clicks) lockLinks(ctx context.Context, tx bun.Tx, clicks []Click) (map[string]ClickedLink, error) {
	ids := make([]string, 0, 8)
	for _, c := range clicks {
		ids = append(ids, c.LinkID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string]ClickedLink, len(ids))
	for chunk := range slices.Chunk(ids, recordChunk) {
		var rows []ClickedLink
		q := tx.NewSelect().Model(&rows).Where("l.id IN (?)", bun.In(chunk)).Order("l.id")
		if s.db.dialect == Postgres {
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx); err != nil {
			return nil, err
		}
		for _, l := range rows {
			out[l.ID] = l
		}
	}
	return out, nil
}

// insertClicks inserts the clicks whose IDs are new and returns those, in the order given.
func (s *Clicks) insertClicks(ctx context.Context, tx bun.Tx, clicks []Click) ([]Click, error) {
	inserted := make(map[string]bool, len(clicks))
	for chunk := range slices.Chunk(clicks, recordChunk) {
		var ids []string
		if err := tx.NewInsert().Model(&chunk).On("CONFLICT (id) DO NOTHING").Returning("id").Scan(ctx, &ids); err != nil {
			return nil, err
		}
		for _, id := range ids {
			inserted[id] = true
		}
	}
	out := make([]Click, 0, len(inserted))
	for _, c := range clicks {
		if inserted[c.ID] {
			out = append(out, c)
			delete(inserted, c.ID) // a click twice in one batch is recorded once
		}
	}
	return out, nil
}

// visitorKey is a human visitor of a link on the day of the salt in its hash.
type visitorKey struct{ linkID, hash string }

// insertVisitors records the human visitors of the clicks and returns, for each visitor seen for the first time
// that day, the ID of its earliest click in the batch: that click's hour counts the unique visitor.
func (s *Clicks) insertVisitors(ctx context.Context, tx bun.Tx, clicks []Click) (map[string]bool, error) {
	first := map[visitorKey]Click{}
	for _, c := range clicks {
		if c.Class != ClickHuman || c.VisitorHash == nil {
			continue
		}
		k := visitorKey{c.LinkID, *c.VisitorHash}
		if f, ok := first[k]; !ok || c.ClickedAt.Before(f.ClickedAt) {
			first[k] = c
		}
	}
	firsts := map[string]bool{}
	if len(first) == 0 {
		return firsts, nil
	}
	type visitor struct {
		bun.BaseModel `bun:"table:click_visitors"`
		LinkID        string `bun:"link_id"`
		Day           string `bun:"day"`
		VisitorHash   string `bun:"visitor_hash"`
	}
	rows := make([]visitor, 0, len(first))
	for k, c := range first {
		rows = append(rows, visitor{LinkID: k.linkID, Day: ClickDay(c.ClickedAt), VisitorHash: k.hash})
	}
	slices.SortFunc(rows, func(a, b visitor) int {
		return strings.Compare(a.LinkID+" "+a.VisitorHash, b.LinkID+" "+b.VisitorHash)
	})
	for chunk := range slices.Chunk(rows, recordChunk) {
		var added []visitor
		err := tx.NewInsert().Model(&chunk).On("CONFLICT (link_id, visitor_hash) DO NOTHING").
			Returning("link_id, visitor_hash").Scan(ctx, &added)
		if err != nil {
			return nil, err
		}
		for _, v := range added {
			firsts[first[visitorKey{v.LinkID, v.VisitorHash}].ID] = true
		}
	}
	return firsts, nil
}

// RollupBucket is the start of the UTC hour of t: the granularity of the rollups.
func RollupBucket(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// ClickDay is the UTC day of t as YYYY-MM-DD: the day of visitor salts and unique counts.
func ClickDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

type rollupKey struct {
	linkID string
	bucket time.Time
}

type counts struct{ humans, bots, uniques int64 }

func (c *counts) add(class string, unique bool) {
	if class == ClickHuman {
		c.humans++
		if unique {
			c.uniques++
		}
	} else {
		c.bots++
	}
}

func (s *Clicks) upsertRollups(ctx context.Context, tx bun.Tx, clicks []Click, firsts map[string]bool) error {
	agg := map[rollupKey]*counts{}
	for _, c := range clicks {
		k := rollupKey{c.LinkID, RollupBucket(c.ClickedAt)}
		if agg[k] == nil {
			agg[k] = &counts{}
		}
		agg[k].add(c.Class, firsts[c.ID])
	}
	keys := sortedKeys(agg, func(a, b rollupKey) int {
		return cmpOr(strings.Compare(a.linkID, b.linkID), a.bucket.Compare(b.bucket))
	})
	for chunk := range slices.Chunk(keys, recordChunk) {
		var sb strings.Builder
		args := make([]any, 0, len(chunk)*5)
		sb.WriteString("INSERT INTO click_rollups (link_id, bucket, humans, bots, unique_humans) VALUES ")
		for i, k := range chunk {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?, ?, ?, ?)")
			c := agg[k]
			args = append(args, k.linkID, k.bucket, c.humans, c.bots, c.uniques)
		}
		sb.WriteString(" ON CONFLICT (link_id, bucket) DO UPDATE SET humans = click_rollups.humans + excluded.humans," +
			" bots = click_rollups.bots + excluded.bots, unique_humans = click_rollups.unique_humans + excluded.unique_humans")
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

type dimensionKey struct {
	linkID, dimension string
	bucket            time.Time
	value             string
}

func (s *Clicks) upsertDimensions(ctx context.Context, tx bun.Tx, clicks []Click) error {
	agg := map[dimensionKey]*counts{}
	for _, c := range clicks {
		b := RollupBucket(c.ClickedAt)
		for _, dv := range c.Dimensions() {
			k := dimensionKey{c.LinkID, dv[0], b, dv[1]}
			if agg[k] == nil {
				agg[k] = &counts{}
			}
			agg[k].add(c.Class, false)
		}
	}
	keys := sortedKeys(agg, func(a, b dimensionKey) int {
		return cmpOr(strings.Compare(a.linkID, b.linkID), strings.Compare(a.dimension, b.dimension),
			a.bucket.Compare(b.bucket), strings.Compare(a.value, b.value))
	})
	for chunk := range slices.Chunk(keys, recordChunk) {
		var sb strings.Builder
		args := make([]any, 0, len(chunk)*6)
		sb.WriteString("INSERT INTO click_dimension_rollups (link_id, dimension, bucket, value, humans, bots) VALUES ")
		for i, k := range chunk {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?)")
			c := agg[k]
			args = append(args, k.linkID, k.dimension, k.bucket, k.value, c.humans, c.bots)
		}
		sb.WriteString(" ON CONFLICT (link_id, dimension, bucket, value) DO UPDATE SET" +
			" humans = click_dimension_rollups.humans + excluded.humans, bots = click_dimension_rollups.bots + excluded.bots")
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// updateLinks adds the batch's clicks to each link's counters in one statement per chunk of links:
// humans to clicks, the other classes to bot_clicks, and the latest human click to last_clicked_at.
func (s *Clicks) updateLinks(ctx context.Context, tx bun.Tx, clicks []Click) error {
	type linkCounts struct {
		humans, bots int64
		last         *time.Time
	}
	agg := map[string]*linkCounts{}
	for _, c := range clicks {
		lc := agg[c.LinkID]
		if lc == nil {
			lc = &linkCounts{}
			agg[c.LinkID] = lc
		}
		if c.Class != ClickHuman {
			lc.bots++
			continue
		}
		lc.humans++
		if lc.last == nil || c.ClickedAt.After(*lc.last) {
			t := c.ClickedAt
			lc.last = &t
		}
	}
	ids := sortedKeys(agg, strings.Compare)
	// PostgreSQL types the columns of VALUES from their literals: the timestamp needs its type spelled out.
	tsParam := "?"
	if s.db.dialect == Postgres {
		tsParam = "CAST(? AS TIMESTAMPTZ)"
	}
	for chunk := range slices.Chunk(ids, recordChunk) {
		var sb strings.Builder
		args := make([]any, 0, len(chunk)*4)
		sb.WriteString("WITH v (id, humans, bots, last) AS (VALUES ")
		for i, id := range chunk {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?, ?, " + tsParam + ")")
			lc := agg[id]
			args = append(args, id, lc.humans, lc.bots, lc.last)
		}
		sb.WriteString(") UPDATE links SET clicks = links.clicks + v.humans, bot_clicks = links.bot_clicks + v.bots," +
			" last_clicked_at = CASE WHEN v.last IS NULL THEN links.last_clicked_at" +
			" WHEN links.last_clicked_at IS NULL OR links.last_clicked_at < v.last THEN v.last" +
			" ELSE links.last_clicked_at END FROM v WHERE links.id = v.id")
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// emitClicked emits link.clicked for the clicks of workspaces where an endpoint subscribes to it.
func (s *Clicks) emitClicked(ctx context.Context, tx bun.Tx, clicks []Click, links map[string]ClickedLink,
	eventData func(Click, ClickedLink) any) error {
	if eventData == nil {
		return nil
	}
	var workspaces []string
	for _, c := range clicks {
		workspaces = append(workspaces, c.WorkspaceID)
	}
	slices.Sort(workspaces)
	workspaces = slices.Compact(workspaces)
	var endpoints []WebhookEndpoint
	if err := tx.NewSelect().Model(&endpoints).Column("workspace_id", "events").
		Where("e.workspace_id IN (?)", bun.In(workspaces)).Scan(ctx); err != nil {
		return err
	}
	subscribed := map[string]bool{}
	for _, e := range endpoints {
		if Subscribed(e.Events, ClickedEventType, true) {
			subscribed[e.WorkspaceID] = true
		}
	}
	for _, c := range clicks {
		if !subscribed[c.WorkspaceID] {
			continue
		}
		if _, err := s.db.Events.Emit(ctx, tx, NewEvent{WorkspaceID: c.WorkspaceID, Type: ClickedEventType,
			Data: eventData(c, links[c.LinkID]), OptIn: true}); err != nil {
			return err
		}
	}
	return nil
}

// sortedKeys returns the keys of m sorted by cmp: rows written in key order keep concurrent writers from
// deadlocking on each other's rows.
func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp)
	return keys
}

func cmpOr(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// SaltRetention is how many days of visitor salts (and visitors) are kept: today's and yesterday's, so that clicks
// buffered across midnight still hash with their own day's salt. Older salts are deleted, so old visitor hashes
// can never be recomputed from an address.
const SaltRetention = 2

// Salt returns the random salt of a UTC day (YYYY-MM-DD), creating it on first use; every process gets the same
// one. Returns ErrNotFound for a day outside the retention (its salt is gone or must not be created again).
func (s *Clicks) Salt(ctx context.Context, day string, today time.Time) ([]byte, error) {
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return nil, fmt.Errorf("store: salt day %q: %w", day, err)
	}
	if day < oldestSaltDay(today) {
		return nil, ErrNotFound
	}
	read := func() ([]byte, error) {
		var salt string
		err := s.db.w.NewSelect().Table("click_salts").Column("salt").Where("day = ?", day).Scan(ctx, &salt)
		if err != nil {
			return nil, mapErr(err)
		}
		return hex.DecodeString(salt)
	}
	salt, err := read()
	if !errors.Is(err, ErrNotFound) {
		return salt, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	if _, err := s.db.w.ExecContext(ctx, "INSERT INTO click_salts (day, salt) VALUES (?, ?) ON CONFLICT (day) DO NOTHING",
		day, hex.EncodeToString(b)); err != nil {
		return nil, err
	}
	return read()
}

// oldestSaltDay is the first day whose salt is kept (YYYY-MM-DD compares as text).
func oldestSaltDay(today time.Time) string {
	return ClickDay(today.AddDate(0, 0, -(SaltRetention - 1)))
}

// PruneVisitors deletes the salts and daily visitors of days before the retention, counted from today.
func (s *Clicks) PruneVisitors(ctx context.Context, today time.Time) error {
	keep := oldestSaltDay(today)
	if _, err := s.db.w.NewDelete().Table("click_salts").Where("day < ?", keep).Exec(ctx); err != nil {
		return err
	}
	_, err := s.db.w.NewDelete().Table("click_visitors").Where("day < ?", keep).Exec(ctx)
	return err
}

// PurgeDeleted deletes the clicks, rollups and visitors of deleted links (the rows of link_purges) in statements of
// at most batch rows each, so that no transaction grows with a link's history. A purge row is removed once it is
// older than keep and its link has nothing left: until then every pass purges again, which catches clicks that
// arrive after the deletion (a batch in flight, a spool replayed late). Returns the number of rows deleted.
func (s *Clicks) PurgeDeleted(ctx context.Context, now time.Time, batch int, keep time.Duration) (int64, error) {
	var purges []struct {
		LinkID    string    `bun:"link_id"`
		DeletedAt time.Time `bun:"deleted_at"`
	}
	if err := s.db.w.NewSelect().Table("link_purges").Column("link_id", "deleted_at").Order("deleted_at").
		Scan(ctx, &purges); err != nil {
		return 0, err
	}
	var total int64
	for _, p := range purges {
		for _, table := range []string{"clicks", "click_rollups", "click_dimension_rollups", "click_visitors"} {
			for {
				n, err := s.deleteSome(ctx, table, p.LinkID, batch)
				if err != nil {
					return total, err
				}
				total += n
				if n < int64(batch) {
					break
				}
			}
		}
		if p.DeletedAt.Before(now.Add(-keep)) {
			if _, err := s.db.w.NewDelete().Table("link_purges").Where("link_id = ?", p.LinkID).Exec(ctx); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// deleteSome deletes up to n rows of a link from one of the click tables.
func (s *Clicks) deleteSome(ctx context.Context, table, linkID string, n int) (int64, error) {
	// Every click table has link_id; the row identity differs (clicks has id, the rollups composite keys), and
	// both databases have a rowid-like handle: SQLite's rowid, PostgreSQL's ctid.
	handle := "rowid"
	if s.db.dialect == Postgres {
		handle = "ctid"
	}
	q := fmt.Sprintf("DELETE FROM %s WHERE %s IN (SELECT %s FROM %s WHERE link_id = ? LIMIT ?)", table, handle, handle, table)
	res, err := s.db.w.ExecContext(ctx, q, linkID, n)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
