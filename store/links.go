package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"
)

// Link is a short link. Slugs are unique per domain regardless of case: SlugKey is the lower-case slug.
type Link struct {
	bun.BaseModel `bun:"table:links,alias:l"`

	ID             string   `bun:"id,pk"`
	WorkspaceID    string   `bun:"workspace_id"`
	Domain         string   `bun:"domain"`
	Slug           string   `bun:"slug"`
	SlugKey        string   `bun:"slug_key"`
	DestinationURL string   `bun:"destination_url"`
	Title          *string  `bun:"title"`
	Tags           []string `bun:"tags,type:json"`
	ExternalID     *string  `bun:"external_id"`
	// UTM holds the query parameters redirects add to the destination, keyed by their names (utm_source,
	// utm_medium, utm_campaign, utm_term, utm_content); empty when none.
	UTM          map[string]string `bun:"utm,type:json"`
	ExpiresAt    *time.Time        `bun:"expires_at"`
	ExpiredURL   *string           `bun:"expired_url"`
	MaxClicks    *int64            `bun:"max_clicks"`
	RedirectType int               `bun:"redirect_type"`
	ForwardQuery bool              `bun:"forward_query"`
	Metadata     map[string]any    `bun:"metadata,type:json"`
	Archived     bool              `bun:"archived"`
	// Clicks and BotClicks are the clicks persisted so far; AdmittedClicks the human clicks admitted against
	// MaxClicks at redirect time (kept only for links with a cap).
	Clicks           int64      `bun:"clicks"`
	BotClicks        int64      `bun:"bot_clicks"`
	AdmittedClicks   int64      `bun:"admitted_clicks"`
	LastClickedAt    *time.Time `bun:"last_clicked_at"`
	ExpiredEventAt   *time.Time `bun:"expired_event_at"`
	MaxClicksEventAt *time.Time `bun:"max_clicks_event_at"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

// Key is where the link answers.
func (l Link) Key() LinkKey { return LinkKey{Domain: l.Domain, SlugKey: l.SlugKey} }

// LinkKey identifies a short URL: the domain and the lower-case slug.
type LinkKey struct {
	Domain  string
	SlugKey string
}

// SlugKey is the case-folded form of a slug that uniqueness and lookups use.
func SlugKey(slug string) string { return strings.ToLower(slug) }

// Links is the repository of short links.
type Links struct{ workspaceScoped[Link] }

var (
	// ErrSlugTaken means the slug is used on its domain, or reserved there to another workspace by a tombstone. It
	// wraps ErrConflict; the store returns it as a *SlugTakenError.
	ErrSlugTaken = fmt.Errorf("%w: slug taken", ErrConflict)
	// ErrExternalIDTaken means another link of the workspace has the external ID. It wraps ErrConflict; the store
	// returns it as an *ExternalIDTakenError.
	ErrExternalIDTaken = fmt.Errorf("%w: external_id taken", ErrConflict)
)

// SlugTakenError is ErrSlugTaken with the short URL that was taken.
type SlugTakenError struct{ Domain, Slug string }

func (e *SlugTakenError) Error() string {
	return fmt.Sprintf("store: slug %q is taken on %s", e.Slug, e.Domain)
}

// Unwrap makes the error an ErrSlugTaken (and so an ErrConflict).
func (e *SlugTakenError) Unwrap() error { return ErrSlugTaken }

// ExternalIDTakenError is ErrExternalIDTaken with the external ID that was taken.
type ExternalIDTakenError struct{ ExternalID string }

func (e *ExternalIDTakenError) Error() string {
	return fmt.Sprintf("store: external_id %q is taken in the workspace", e.ExternalID)
}

// Unwrap makes the error an ErrExternalIDTaken (and so an ErrConflict).
func (e *ExternalIDTakenError) Unwrap() error { return ErrExternalIDTaken }

func slugTaken(l *Link) error { return &SlugTakenError{Domain: l.Domain, Slug: l.Slug} }

func externalIDTaken(l *Link) error {
	e := &ExternalIDTakenError{}
	if l.ExternalID != nil {
		e.ExternalID = *l.ExternalID
	}
	return e
}

// linkTag is a row of link_tags, the index that tag filters use (the link's own tags column is the truth).
type linkTag struct {
	bun.BaseModel `bun:"table:link_tags"`

	LinkID      string `bun:"link_id,pk"`
	WorkspaceID string `bun:"workspace_id"`
	Tag         string `bun:"tag,pk"`
}

// slugTombstone reserves a short URL to a workspace until a time.
type slugTombstone struct {
	bun.BaseModel `bun:"table:slug_tombstones"`

	Domain      string    `bun:"domain,pk"`
	SlugKey     string    `bun:"slug_key,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	Until       time.Time `bun:"until"`
}

// linkColumns are the columns the API writes; the click counters and the notifier's columns belong to the click
// recorder, which updates them concurrently, so an update never writes them back from a stale read.
var linkColumns = []string{
	"domain", "slug", "slug_key", "destination_url", "title", "tags", "external_id", "utm", "expires_at",
	"expired_url", "max_clicks", "redirect_type", "forward_query", "metadata", "archived", "expired_event_at",
	"max_clicks_event_at", "updated_at",
}

// CreateMany inserts links inside tx, with their tags, in a few statements whatever their number: ID, SlugKey and
// the timestamps are set here. Exactly one of concurrent creates of one short URL succeeds (INSERT … ON CONFLICT DO
// NOTHING, never check-then-insert). A tombstone of the link's own workspace is lifted: a workspace may take back a
// slug it gave up.
//
// refused[i] is nil when ls[i] was created, else an *ExternalIDTakenError (ErrExternalIDTaken) when the workspace
// has a link with its external ID, or a *SlugTakenError (ErrSlugTaken) when its slug is used on the domain or
// tombstoned by another workspace. Links of ls that take the same slug or external ID as an earlier one of ls are
// refused as if the earlier one existed already. Refused links wrote nothing and tx stays usable (the caller may
// retry them with other slugs in the same transaction). err is any other failure.
func (s *Links) CreateMany(ctx context.Context, tx bun.IDB, ls []*Link) (refused []error, err error) {
	t := now()
	rows := make([]Link, len(ls))
	for i, l := range ls {
		l.ID, l.SlugKey, l.CreatedAt, l.UpdatedAt = NewID("lnk"), SlugKey(l.Slug), t, t
		l.normalize()
		rows[i] = *l
	}
	var ids []string
	if err := tx.NewInsert().Model(&rows).On("CONFLICT DO NOTHING").Returning("id").Scan(ctx, &ids); err != nil {
		return nil, mapErr(err)
	}
	inserted := make(map[string]bool, len(ids))
	for _, id := range ids {
		inserted[id] = true
	}
	refused = make([]error, len(ls))
	var created []*Link
	for i, l := range ls {
		if !inserted[l.ID] {
			if refused[i] = s.conflict(ctx, tx, l); !errors.Is(refused[i], ErrConflict) {
				return nil, refused[i]
			}
			continue
		}
		created = append(created, l)
	}
	taken, err := claimSlugs(ctx, tx, created, t)
	if err != nil {
		return nil, err
	}
	if len(taken) > 0 {
		if _, err := tx.NewDelete().Model((*Link)(nil)).Where("id IN (?)", bun.In(taken)).Exec(ctx); err != nil {
			return nil, err
		}
		for i, l := range ls {
			if slices.Contains(taken, l.ID) {
				refused[i] = slugTaken(l)
			}
		}
		created = slices.DeleteFunc(created, func(l *Link) bool { return slices.Contains(taken, l.ID) })
	}
	return refused, insertTags(ctx, tx, created)
}

// conflict tells which uniqueness rule refused l (a new link, or a change of l.ID): ErrExternalIDTaken or
// ErrSlugTaken, or another error when the question itself failed. The external ID is looked at first: two concurrent
// upserts of one external ID that both send the same slug must learn that the link now exists, not that its slug is
// taken.
func (s *Links) conflict(ctx context.Context, tx bun.IDB, l *Link) error {
	if l.ExternalID != nil {
		exists, err := tx.NewSelect().Model((*Link)(nil)).
			Where("workspace_id = ? AND external_id = ? AND id <> ?", l.WorkspaceID, *l.ExternalID, l.ID).Exists(ctx)
		if err != nil {
			return err
		}
		if exists {
			return externalIDTaken(l)
		}
	}
	return slugTaken(l)
}

// claimSlugs checks the tombstones of the keys that links just took and returns the IDs of the links whose key is
// reserved to another workspace until after t; every other tombstone of those keys is lifted. Checking after the
// insert is what makes it safe on PostgreSQL: an insert that waited for a concurrent delete of the same key sees
// that delete's tombstone in its next statement.
func claimSlugs(ctx context.Context, tx bun.IDB, links []*Link, t time.Time) (taken []string, err error) {
	if len(links) == 0 {
		return nil, nil
	}
	byKey := make(map[LinkKey]*Link, len(links))
	var domains, slugKeys []string
	for _, l := range links {
		byKey[l.Key()] = l
		domains, slugKeys = append(domains, l.Domain), append(slugKeys, l.SlugKey)
	}
	var ts []slugTombstone
	if err := tx.NewSelect().Model(&ts).Where("domain IN (?) AND slug_key IN (?)", bun.In(domains), bun.In(slugKeys)).
		Scan(ctx); err != nil {
		return nil, err
	}
	for _, tomb := range ts {
		l, ok := byKey[LinkKey{Domain: tomb.Domain, SlugKey: tomb.SlugKey}]
		if !ok {
			continue
		}
		if tomb.WorkspaceID != l.WorkspaceID && tomb.Until.After(t) {
			taken = append(taken, l.ID)
			continue
		}
		if _, err := tx.NewDelete().Model((*slugTombstone)(nil)).
			Where("domain = ? AND slug_key = ?", tomb.Domain, tomb.SlugKey).Exec(ctx); err != nil {
			return nil, err
		}
	}
	return taken, nil
}

// tombstone reserves key to a workspace until a time (replacing an older tombstone of the key).
func tombstone(ctx context.Context, tx bun.IDB, workspaceID string, key LinkKey, until time.Time) error {
	ts := slugTombstone{Domain: key.Domain, SlugKey: key.SlugKey, WorkspaceID: workspaceID,
		Until: until.UTC().Truncate(time.Microsecond)}
	_, err := tx.NewInsert().Model(&ts).
		On("CONFLICT (domain, slug_key) DO UPDATE").Set("workspace_id = EXCLUDED.workspace_id").
		Set("until = EXCLUDED.until").Exec(ctx)
	return err
}

// normalize gives the JSON columns their empty values instead of NULL.
func (l *Link) normalize() {
	if l.Tags == nil {
		l.Tags = []string{}
	}
	if l.UTM == nil {
		l.UTM = map[string]string{}
	}
	if l.Metadata == nil {
		l.Metadata = map[string]any{}
	}
}

func insertTags(ctx context.Context, tx bun.IDB, links []*Link) error {
	var rows []linkTag
	for _, l := range links {
		for _, tag := range l.Tags {
			rows = append(rows, linkTag{LinkID: l.ID, WorkspaceID: l.WorkspaceID, Tag: tag})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.NewInsert().Model(&rows).On("CONFLICT DO NOTHING").Exec(ctx)
	return err
}

// Get returns a link of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Links) Get(ctx context.Context, workspaceID, id string) (Link, error) {
	return s.get(ctx, workspaceID, id)
}

// Exists reports whether the workspace has the link, by its primary key and without reading the row. It returns
// no sentinel errors.
func (s *Links) Exists(ctx context.Context, workspaceID, id string) (bool, error) {
	return s.exists(ctx, workspaceID, id)
}

// ByKey returns the workspace's link at a short URL. Returns ErrNotFound if there is none, or it belongs to another
// workspace.
func (s *Links) ByKey(ctx context.Context, workspaceID string, key LinkKey) (Link, error) {
	var l Link
	err := s.db.r.NewSelect().Model(&l).
		Where("l.domain = ? AND l.slug_key = ? AND l.workspace_id = ?", key.Domain, key.SlugKey, workspaceID).Scan(ctx)
	return l, mapErr(err)
}

// Lock reads a link of a workspace inside tx for a change (SELECT … FOR UPDATE on PostgreSQL; SQLite's write
// transaction already excludes other writers). Returns ErrNotFound if it is not in that workspace.
func (s *Links) Lock(ctx context.Context, tx bun.IDB, workspaceID, id string) (Link, error) {
	return s.lock(ctx, tx, workspaceID, id)
}

// LockByExternalID is Lock by the workspace's external ID. Returns ErrNotFound if no link has it.
func (s *Links) LockByExternalID(ctx context.Context, tx bun.IDB, workspaceID, externalID string) (Link, error) {
	var l Link
	err := s.db.forUpdate(tx.NewSelect().Model(&l).Where("l.workspace_id = ? AND l.external_id = ?", workspaceID, externalID)).
		Scan(ctx)
	return l, mapErr(err)
}

// Update writes the API-owned fields of l (read with Lock as old) inside tx and sets l.SlugKey and l.UpdatedAt.
// When the short URL changed, the old one is reserved to the workspace until tombstoneUntil and the new one is
// claimed as by CreateMany.
//
// Returns ErrNotFound if the link is gone, ErrSlugTaken or ErrExternalIDTaken as CreateMany does; after those the
// transaction must be rolled back (PostgreSQL aborts it on a unique violation).
func (s *Links) Update(ctx context.Context, tx bun.IDB, l *Link, old Link, tombstoneUntil time.Time) error {
	t := now()
	l.SlugKey, l.UpdatedAt = SlugKey(l.Slug), t
	l.normalize()
	res, err := tx.NewUpdate().Model(l).Column(linkColumns...).
		Where("id = ? AND workspace_id = ?", l.ID, l.WorkspaceID).Exec(ctx)
	if isUniqueViolation(err) {
		return s.updateConflict(ctx, tx, l, err)
	}
	if err := expectOneRow(res, err); err != nil {
		return err
	}
	if l.Key() != old.Key() {
		if taken, err := claimSlugs(ctx, tx, []*Link{l}, t); err != nil {
			return err
		} else if len(taken) > 0 {
			return slugTaken(l)
		}
		if err := tombstone(ctx, tx, l.WorkspaceID, old.Key(), tombstoneUntil); err != nil {
			return err
		}
	}
	if slices.Equal(l.Tags, old.Tags) {
		return nil
	}
	if _, err := tx.NewDelete().Model((*linkTag)(nil)).Where("link_id = ?", l.ID).Exec(ctx); err != nil {
		return err
	}
	return insertTags(ctx, tx, []*Link{l})
}

// updateConflict tells which uniqueness rule refused the update of l (err, a unique violation): ErrExternalIDTaken
// or ErrSlugTaken, or another error when the question itself failed. PostgreSQL has aborted the transaction but
// names the index; SQLite rolled back the statement only, so the transaction can still ask.
func (s *Links) updateConflict(ctx context.Context, tx bun.IDB, l *Link, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		if pgErr.ConstraintName == "links_workspace_external_id" {
			return externalIDTaken(l)
		}
		return slugTaken(l)
	}
	return s.conflict(ctx, tx, l)
}

// Delete removes a link of a workspace inside tx (its tags go with it), reserves its short URL to the workspace
// until tombstoneUntil and queues its clicks and rollups for the background purge (link_purges), so deleting a link
// with millions of clicks stays fast. It returns the link's last state. Returns ErrNotFound if the link is not in
// the workspace.
func (s *Links) Delete(ctx context.Context, tx bun.IDB, workspaceID, id string, tombstoneUntil time.Time) (Link, error) {
	l, err := s.delete(ctx, tx, workspaceID, id)
	if err != nil {
		return Link{}, err
	}
	if err := tombstone(ctx, tx, workspaceID, l.Key(), tombstoneUntil); err != nil {
		return Link{}, err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO link_purges (link_id, deleted_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
		l.ID, now())
	return l, err
}

// LinkFilter narrows a list of links; zero fields do not filter.
type LinkFilter struct {
	// Query is found case-insensitively in the slug, the title or the destination URL (lower() on both sides:
	// SQLite folds ASCII letters only).
	Query      string
	Tag        string
	Domain     string
	ExternalID string
	// Archived selects archived links (true) or the others (false).
	Archived bool
	// Expired, when set, selects links that expired or reached max_clicks at Now (true) or that still redirect.
	Expired       *bool
	Now           time.Time
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// List returns a page of a workspace's links matching f, newest first, and whether more follow.
func (s *Links) List(ctx context.Context, workspaceID string, f LinkFilter, p Page) ([]Link, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		return f.apply(q, workspaceID)
	})
}

// apply narrows a query of a workspace's links to those matching f.
func (f LinkFilter) apply(q *bun.SelectQuery, workspaceID string) *bun.SelectQuery {
	q = q.Where("l.archived = ?", f.Archived)
	if f.Query != "" {
		pattern := "%" + likeEscaper.Replace(strings.ToLower(f.Query)) + "%"
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where(`lower(l.slug) LIKE ? ESCAPE '\'`, pattern).
				WhereOr(`lower(COALESCE(l.title, '')) LIKE ? ESCAPE '\'`, pattern).
				WhereOr(`lower(l.destination_url) LIKE ? ESCAPE '\'`, pattern)
		})
	}
	if f.Tag != "" {
		q = q.Where("EXISTS (SELECT 1 FROM link_tags AS lt WHERE lt.workspace_id = ? AND lt.tag = ? AND lt.link_id = l.id)",
			workspaceID, f.Tag)
	}
	if f.Domain != "" {
		q = q.Where("l.domain = ?", f.Domain)
	}
	if f.ExternalID != "" {
		q = q.Where("l.external_id = ?", f.ExternalID)
	}
	if f.Expired != nil {
		t := f.Now.UTC().Truncate(time.Microsecond)
		const expired = `((l.expires_at IS NOT NULL AND l.expires_at <= ?) OR (l.max_clicks IS NOT NULL AND
			CASE WHEN l.clicks > l.admitted_clicks THEN l.clicks ELSE l.admitted_clicks END >= l.max_clicks))`
		if *f.Expired {
			q = q.Where(expired, t)
		} else {
			q = q.Where("NOT "+expired, t)
		}
	}
	if f.CreatedAfter != nil {
		q = q.Where("l.created_at >= ?", f.CreatedAfter.UTC())
	}
	if f.CreatedBefore != nil {
		q = q.Where("l.created_at < ?", f.CreatedBefore.UTC())
	}
	return q
}
