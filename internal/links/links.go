package links

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// NewLink is a link as a client describes it to create (or replace) it. Nil members were not sent and take their
// defaults: a generated slug on the default short domain, redirect type 302, the visitor's query forwarded.
type NewLink struct {
	DestinationURL                              string
	Slug, Domain, Title, ExternalID, ExpiredURL *string
	Tags                                        []string
	UTM                                         *UTM
	ExpiresAt                                   *time.Time
	MaxClicks                                   *int64
	RedirectType                                *int
	ForwardQuery, Archived                      *bool
	Metadata                                    map[string]any
}

// Update is a partial update of a link: a nil pointer or a zero patch.Field leaves its field alone.
type Update struct {
	Domain, Slug, DestinationURL  *string
	Title, ExternalID, ExpiredURL patch.Field[string]
	ExpiresAt                     patch.Field[time.Time]
	MaxClicks                     patch.Field[int64]
	// UTM replaces every UTM parameter of the link.
	UTM                    *UTM
	Tags                   *[]string
	RedirectType           *int
	ForwardQuery, Archived *bool
	Metadata               *map[string]any
}

// Limits of a link's own data beyond the schema.
const (
	maxMetadataBytes = 8 << 10
	maxMetadataDepth = 5
	// maxSlugAttempts bounds the draws of a generated slug: with 56^7 slugs even a full domain of millions of
	// links collides rarely, so running out means something else is wrong and the client may simply retry.
	maxSlugAttempts = 8
	// BulkChunk is how many links of a bulk create share a transaction: large enough to make 1000 links fast,
	// small enough that the single writer of SQLite is not held for long.
	BulkChunk = 200
)

// checkDomain returns the short domain a request names (the default one when it names none), lower-case.
func (s *Service) checkDomain(errs *problem.Fields, domain *string) string {
	if domain == nil {
		return s.defaultDomain
	}
	d := strings.ToLower(*domain)
	if !s.domains[d] {
		known := slices.Sorted(maps.Keys(s.domains))
		errs.Add("/domain", fmt.Sprintf("%s is not a short domain of this server; use one of: %s", *domain,
			strings.Join(known, ", ")))
	}
	return d
}

func (s *Service) checkSlug(errs *problem.Fields, slug string) {
	if s.reserved.Load().Has(slug) {
		errs.Add("/slug", fmt.Sprintf("%q is reserved for the product's own pages; choose another slug", slug))
	}
}

// checkURL records why a destination or expired_url cannot be used, and returns it normalised (see
// NormalizeDestination) for storing.
func (s *Service) checkURL(errs *problem.Fields, pointer, raw string) string {
	if err := s.policy.CheckDestination(raw); err != nil {
		errs.Add(pointer, err.Error())
		return raw
	}
	return NormalizeDestination(raw)
}

func checkMetadata(errs *problem.Fields, m map[string]any) {
	b, err := json.Marshal(m)
	switch {
	case err != nil:
		errs.Add("/metadata", "must be a JSON object")
	case len(b) > maxMetadataBytes:
		errs.Add("/metadata", fmt.Sprintf("is %d bytes as JSON; the limit is %d", len(b), maxMetadataBytes))
	case jsonDepth(m) > maxMetadataDepth:
		errs.Add("/metadata", fmt.Sprintf("nests deeper than %d levels", maxMetadataDepth))
	}
}

// jsonDepth is the nesting depth of a decoded JSON value: 0 for a scalar, 1 for a flat object or array.
func jsonDepth(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			deepest = max(deepest, jsonDepth(e))
		}
	case []any:
		for _, e := range v {
			deepest = max(deepest, jsonDepth(e))
		}
	default:
		return 0
	}
	return deepest + 1
}

// assign sets *dst to *src when src was sent.
func assign[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// micro is a time as the store keeps it: UTC, microseconds.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// generateSlug draws a slug that is not reserved (a generated "metrics" is possible, if unlikely).
func (s *Service) generateSlug() string {
	for {
		if slug := s.drawSlug(); !s.reserved.Load().Has(slug) {
			return slug
		}
	}
}

// newLink checks a NewLink beyond the schema and turns it into the link to insert; generated tells that the slug
// was drawn here (so a conflict is retried with another). A create may not expire at birth: an expires_at in the
// past is refused (an update may set one, to expire a link at once). The error is validation_failed.
func (s *Service) newLink(workspaceID string, in NewLink, now time.Time) (l store.Link, generated bool, err error) {
	var errs problem.Fields
	l = store.Link{WorkspaceID: workspaceID, DestinationURL: in.DestinationURL, Title: in.Title,
		ExternalID: in.ExternalID, ExpiredURL: in.ExpiredURL, MaxClicks: in.MaxClicks, RedirectType: 302,
		ForwardQuery: true, UTM: in.UTM.params(), Tags: in.Tags, Metadata: in.Metadata}
	l.Domain = s.checkDomain(&errs, in.Domain)
	if generated = in.Slug == nil; generated {
		l.Slug = s.generateSlug()
	} else {
		l.Slug = *in.Slug
		s.checkSlug(&errs, l.Slug)
	}
	l.DestinationURL = s.checkURL(&errs, "/destination_url", in.DestinationURL)
	if in.ExpiredURL != nil {
		u := s.checkURL(&errs, "/expired_url", *in.ExpiredURL)
		l.ExpiredURL = &u
	}
	if in.ExpiresAt != nil {
		t := micro(*in.ExpiresAt)
		if !t.After(now) {
			errs.Add("/expires_at", "must be in the future")
		}
		l.ExpiresAt = &t
	}
	assign(&l.RedirectType, in.RedirectType)
	assign(&l.ForwardQuery, in.ForwardQuery)
	assign(&l.Archived, in.Archived)
	if in.Metadata != nil {
		checkMetadata(&errs, in.Metadata)
	}
	if err := errs.Err(); err != nil {
		return l, false, err
	}
	return l, generated, nil
}

// patcher checks an Update beyond the schema and returns the change it makes to a link. The error is
// validation_failed.
func (s *Service) patcher(in Update) (func(*store.Link), error) {
	var errs problem.Fields
	var domain string
	if in.Domain != nil {
		domain = s.checkDomain(&errs, in.Domain)
	}
	if in.Slug != nil {
		s.checkSlug(&errs, *in.Slug)
	}
	if in.DestinationURL != nil {
		u := s.checkURL(&errs, "/destination_url", *in.DestinationURL)
		in.DestinationURL = &u
	}
	if u, ok := in.ExpiredURL.Value(); ok {
		in.ExpiredURL = patch.Set(s.checkURL(&errs, "/expired_url", u))
	}
	if in.Metadata != nil {
		checkMetadata(&errs, *in.Metadata)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return func(l *store.Link) {
		if in.Domain != nil {
			l.Domain = domain
		}
		assign(&l.Slug, in.Slug)
		assign(&l.DestinationURL, in.DestinationURL)
		in.Title.Apply(&l.Title)
		in.ExternalID.Apply(&l.ExternalID)
		in.ExpiredURL.Apply(&l.ExpiredURL)
		in.MaxClicks.Apply(&l.MaxClicks)
		in.ExpiresAt.Apply(&l.ExpiresAt)
		if l.ExpiresAt != nil {
			t := micro(*l.ExpiresAt)
			l.ExpiresAt = &t
		}
		if in.UTM != nil {
			l.UTM = in.UTM.params()
		}
		assign(&l.Tags, in.Tags)
		assign(&l.RedirectType, in.RedirectType)
		assign(&l.ForwardQuery, in.ForwardQuery)
		assign(&l.Archived, in.Archived)
		assign(&l.Metadata, in.Metadata)
	}, nil
}

// linkFields are the API fields of a link that link.updated can name, with how to compare them.
var linkFields = []struct {
	name  string
	equal func(a, b *store.Link) bool
}{
	{"domain", func(a, b *store.Link) bool { return a.Domain == b.Domain }},
	{"slug", func(a, b *store.Link) bool { return a.Slug == b.Slug }},
	{"destination_url", func(a, b *store.Link) bool { return a.DestinationURL == b.DestinationURL }},
	{"title", func(a, b *store.Link) bool { return equalPtr(a.Title, b.Title) }},
	{"tags", func(a, b *store.Link) bool { return slices.Equal(a.Tags, b.Tags) }},
	{"external_id", func(a, b *store.Link) bool { return equalPtr(a.ExternalID, b.ExternalID) }},
	{"utm", func(a, b *store.Link) bool { return maps.Equal(a.UTM, b.UTM) }},
	{"expires_at", func(a, b *store.Link) bool {
		return a.ExpiresAt == nil && b.ExpiresAt == nil || a.ExpiresAt != nil && b.ExpiresAt != nil && a.ExpiresAt.Equal(*b.ExpiresAt)
	}},
	{"expired_url", func(a, b *store.Link) bool { return equalPtr(a.ExpiredURL, b.ExpiredURL) }},
	{"max_clicks", func(a, b *store.Link) bool { return equalPtr(a.MaxClicks, b.MaxClicks) }},
	{"redirect_type", func(a, b *store.Link) bool { return a.RedirectType == b.RedirectType }},
	{"forward_query", func(a, b *store.Link) bool { return a.ForwardQuery == b.ForwardQuery }},
	{"metadata", func(a, b *store.Link) bool { return sameJSON(a.Metadata, b.Metadata) }},
	{"archived", func(a, b *store.Link) bool { return a.Archived == b.Archived }},
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// sameJSON compares decoded JSON objects by their encoding (numbers may be float64 on one side and json.Number on
// the other; nil and {} are the same object).
func sameJSON(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// changedFields names the API fields in which l differs from old.
func changedFields(old, l *store.Link) []string {
	var out []string
	for _, f := range linkFields {
		if !f.equal(old, l) {
			out = append(out, f.name)
		}
	}
	return out
}

// rearmLimitEvents lets link.expired and link.max_clicks_reached fire again when an update lifts the limit that
// fired them.
func rearmLimitEvents(l *store.Link, now time.Time) {
	if l.ExpiresAt == nil || l.ExpiresAt.After(now) {
		l.ExpiredEventAt = nil
	}
	if l.MaxClicks == nil || *l.MaxClicks > max(l.Clicks, l.AdmittedClicks) {
		l.MaxClicksEventAt = nil
	}
}

// emit records an event of the workspace inside tx (the transactional outbox); its type follows from the payload.
func (s *Service) emit(ctx context.Context, tx store.Querier, workspaceID string, payload any) error {
	_, err := s.events.Emit(ctx, tx, workspaceID, payload)
	return err
}

// insert inserts links inside tx with their link.created events (one EmitMany for all of them) and announces their
// short URLs; a taken generated slug (generated[i]) is drawn again, up to maxSlugAttempts draws. refused[i] is nil
// for a created link, else the store's conflict (store.ErrSlugTaken or store.ErrExternalIDTaken). keys are the
// short URLs it announced, read from the links the store created (the store sets their slug keys), for the caller
// to publish after the commit. err is any other failure.
func (s *Service) insert(ctx context.Context, tx store.Querier, links []*store.Link, generated []bool) (refused []error, keys []store.LinkKey, err error) {
	if refused, err = s.db.Links.CreateMany(ctx, tx, links); err != nil {
		return nil, nil, err
	}
	for attempt := 1; attempt < maxSlugAttempts; attempt++ {
		var retry []int
		var again []*store.Link
		for i, r := range refused {
			if generated[i] && errors.Is(r, store.ErrSlugTaken) {
				links[i].Slug = s.generateSlug()
				retry, again = append(retry, i), append(again, links[i])
			}
		}
		if len(retry) == 0 {
			break
		}
		second, err := s.db.Links.CreateMany(ctx, tx, again)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range retry {
			refused[i] = second[j]
		}
	}
	var created []events.Pending
	for i, l := range links {
		if refused[i] != nil {
			continue
		}
		created = append(created, events.Pending{WorkspaceID: l.WorkspaceID, Payload: gen.LinkCreatedEvent{Link: s.API(linkOf(*l))}})
		keys = append(keys, l.Key())
	}
	if _, err := s.events.EmitMany(ctx, tx, created); err != nil {
		return nil, nil, err
	}
	return refused, keys, s.db.LinkChanges.Announce(ctx, tx, keys...)
}

// insertOne is insert for one link: the refusal is the error.
func (s *Service) insertOne(ctx context.Context, tx store.Querier, l *store.Link, generated bool) ([]store.LinkKey, error) {
	refused, keys, err := s.insert(ctx, tx, []*store.Link{l}, []bool{generated})
	if err != nil {
		return nil, err
	}
	return keys, refused[0]
}

// write stores l (read as old inside tx) when it differs, with its link.updated event, and announces both short
// URLs. It returns the keys to publish after the commit (none when nothing changed).
func (s *Service) write(ctx context.Context, tx store.Querier, l *store.Link, old store.Link, now time.Time) ([]store.LinkKey, error) {
	changed := changedFields(&old, l)
	if len(changed) == 0 {
		return nil, nil
	}
	rearmLimitEvents(l, now)
	if err := s.db.Links.Update(ctx, tx, l, old, now.Add(s.tombstone)); err != nil {
		return nil, err
	}
	if err := s.emit(ctx, tx, l.WorkspaceID, gen.LinkUpdatedEvent{Link: s.API(linkOf(*l)), Changed: changed}); err != nil {
		return nil, err
	}
	keys := []store.LinkKey{l.Key()}
	if old.Key() != l.Key() {
		keys = append(keys, old.Key())
	}
	return keys, s.db.LinkChanges.Announce(ctx, tx, keys...)
}

// Create makes a link in the workspace and emits link.created. A generated slug that is taken is drawn again.
// Errors: validation_failed, slug_taken and external_id_taken problems; any other error is internal.
func (s *Service) Create(ctx context.Context, workspaceID string, in NewLink) (Link, error) {
	l, generated, err := s.newLink(workspaceID, in, time.Now())
	if err != nil {
		return Link{}, err
	}
	var keys []store.LinkKey
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		keys, err = s.insertOne(ctx, tx, &l, generated)
		return err
	})
	if err != nil {
		return Link{}, storeError(err, l.ID)
	}
	s.db.LinkChanges.Published(keys...)
	return linkOf(l), nil
}

// Outcome is what became of one link of a bulk create: the link created, or the problem that refused it.
type Outcome struct {
	Link Link
	Err  *problem.Error
}

// CreateMany creates many links, each checked on its own: the valid ones are created in transactions of BulkChunk
// links (each with its link.created event). Every item gets its outcome, in the order of ins. A conflict fails
// only its item; a database failure fails the items of its transaction with internal_error (and is logged).
func (s *Service) CreateMany(ctx context.Context, workspaceID string, ins []NewLink) []Outcome {
	type valid struct {
		index     int
		link      store.Link
		generated bool
	}
	now := time.Now()
	out := make([]Outcome, len(ins))
	var ok []valid
	for i, in := range ins {
		l, generated, err := s.newLink(workspaceID, in, now)
		if err != nil {
			out[i].Err = asProblem(err)
			continue
		}
		ok = append(ok, valid{index: i, link: l, generated: generated})
	}
	for chunk := range slices.Chunk(ok, BulkChunk) {
		links := make([]*store.Link, len(chunk))
		generated := make([]bool, len(chunk))
		for j := range chunk {
			links[j], generated[j] = &chunk[j].link, chunk[j].generated
		}
		refused, err := s.insertChunk(ctx, links, generated)
		if err != nil {
			s.log.ErrorContext(ctx, "bulk link creation failed", "error", err, "workspace_id", workspaceID,
				"items", len(chunk))
			p := problem.New(problem.InternalError, "The links of this item's batch could not be stored; retry the request.")
			for _, it := range chunk {
				out[it.index].Err = p
			}
			continue
		}
		for j, it := range chunk {
			if refused[j] != nil {
				out[it.index].Err = asProblem(storeError(refused[j], links[j].ID))
				continue
			}
			out[it.index].Link = linkOf(*links[j])
		}
	}
	return out
}

// insertChunk creates links in one transaction and publishes the short URLs of those created; refused is as
// insert's.
func (s *Service) insertChunk(ctx context.Context, links []*store.Link, generated []bool) (refused []error, err error) {
	var keys []store.LinkKey
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		refused, keys, err = s.insert(ctx, tx, links, generated)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.db.LinkChanges.Published(keys...)
	return refused, nil
}

// asProblem is err as a problem a client is told; anything but a problem is an internal error.
func asProblem(err error) *problem.Error {
	var p *problem.Error
	if !errors.As(err, &p) {
		p = problem.New(problem.InternalError, "The link could not be stored; retry the request.")
	}
	return p
}

// Get returns the workspace's link. Errors: not_found; any other error is internal.
func (s *Service) Get(ctx context.Context, workspaceID, id string) (Link, error) {
	l, err := s.db.Links.Get(ctx, workspaceID, id)
	if err != nil {
		return Link{}, storeError(err, id)
	}
	return linkOf(l), nil
}

// Lookup returns the workspace's link at a short URL, whatever the slug's case; a nil domain is the default short
// domain. Errors: not_found; any other error is internal.
func (s *Service) Lookup(ctx context.Context, workspaceID string, domain *string, slug string) (Link, error) {
	d := s.defaultDomain
	if domain != nil {
		d = strings.ToLower(*domain)
	}
	l, err := s.db.Links.ByKey(ctx, workspaceID, store.LinkKey{Domain: d, SlugKey: store.SlugKey(slug)})
	if errors.Is(err, store.ErrNotFound) {
		return Link{}, problem.Errorf(problem.NotFound, "This workspace has no link %s/%s.", d, slug)
	}
	return linkResult(l, err)
}

// Update changes the workspace's link and emits link.updated with the fields that changed; nothing is written
// (and no event sent) when the update changes nothing. A new slug or domain tombstones the old short URL.
// Errors: validation_failed, not_found, slug_taken and external_id_taken problems; any other error is internal.
func (s *Service) Update(ctx context.Context, workspaceID, id string, in Update) (Link, error) {
	apply, err := s.patcher(in)
	if err != nil {
		return Link{}, err
	}
	now := time.Now()
	var l store.Link
	var keys []store.LinkKey
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		old, err := s.db.Links.Lock(ctx, tx, workspaceID, id)
		if err != nil {
			return err
		}
		l = old
		apply(&l)
		keys, err = s.write(ctx, tx, &l, old, now)
		return err
	})
	if err != nil {
		return Link{}, storeError(err, id)
	}
	s.db.LinkChanges.Published(keys...)
	return linkOf(l), nil
}

// Upsert creates the workspace's link with the external ID (created is true), or replaces every field of the one
// it has. The short URL (slug and domain) of an existing link is kept unless in names it: replacing it implicitly
// would break links already shared. Two concurrent upserts of one external ID make one link: the one that loses
// the insert replaces the winner's link instead. in.ExternalID is ignored. Errors: validation_failed, slug_taken
// and external_id_taken problems; any other error is internal.
func (s *Service) Upsert(ctx context.Context, workspaceID, externalID string, in NewLink) (_ Link, created bool, err error) {
	now := time.Now()
	in.ExternalID = &externalID
	fresh, generated, err := s.newLink(workspaceID, in, now)
	if err != nil {
		return Link{}, false, err
	}
	for attempt := 0; ; attempt++ {
		l := fresh
		created = false
		var keys []store.LinkKey
		err = s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
			old, err := s.db.Links.LockByExternalID(ctx, tx, workspaceID, externalID)
			if errors.Is(err, store.ErrNotFound) {
				created = true
				keys, err = s.insertOne(ctx, tx, &l, generated)
				return err
			}
			if err != nil {
				return err
			}
			l = replaced(old, fresh, in.Slug != nil, in.Domain != nil)
			keys, err = s.write(ctx, tx, &l, old, now)
			return err
		})
		if created && errors.Is(err, store.ErrExternalIDTaken) && attempt == 0 {
			continue // a concurrent upsert created the link first: replace it
		}
		if err != nil {
			return Link{}, false, storeError(err, l.ID)
		}
		s.db.LinkChanges.Published(keys...)
		return linkOf(l), created, nil
	}
}

// replaced is old with every API field of fresh, except the short URL parts that were not sent.
func replaced(old, fresh store.Link, slugSent, domainSent bool) store.Link {
	l := fresh
	l.ID, l.WorkspaceID, l.CreatedAt, l.UpdatedAt = old.ID, old.WorkspaceID, old.CreatedAt, old.UpdatedAt
	l.Clicks, l.BotClicks, l.AdmittedClicks, l.LastClickedAt = old.Clicks, old.BotClicks, old.AdmittedClicks, old.LastClickedAt
	l.ExpiredEventAt, l.MaxClicksEventAt = old.ExpiredEventAt, old.MaxClicksEventAt
	if !slugSent {
		l.Slug = old.Slug
	}
	if !domainSent {
		l.Domain = old.Domain
	}
	return l
}

// Delete removes the workspace's link at once: its slug is tombstoned to the workspace, its clicks and rollups are
// queued for the background purge, and link.deleted carries its last state. Errors: not_found; any other error is
// internal.
func (s *Service) Delete(ctx context.Context, workspaceID, id string) error {
	var l store.Link
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if l, err = s.db.Links.Delete(ctx, tx, workspaceID, id, time.Now().Add(s.tombstone)); err != nil {
			return err
		}
		if err := s.emit(ctx, tx, l.WorkspaceID, gen.LinkDeletedEvent{Link: s.API(linkOf(l))}); err != nil {
			return err
		}
		return s.db.LinkChanges.Announce(ctx, tx, l.Key())
	})
	if err != nil {
		return storeError(err, id)
	}
	s.db.LinkChanges.Published(l.Key())
	return nil
}

// ListQuery is what a list call asks for: its filters as sent (nil: not sent) and its page.
type ListQuery struct {
	Query, Tag, Domain, ExternalID *string
	Archived, Expired              *bool
	CreatedAfter, CreatedBefore    *time.Time
	// Limit is the page size as sent, for the audit (Page.Limit is the size used).
	Limit *int
	Page  store.Page
}

// List returns a page of the workspace's links, newest first, and whether more follow, and records the opt-in
// link.listed audit of the key that listed them. Errors are internal.
func (s *Service) List(ctx context.Context, workspaceID, keyID string, q ListQuery) ([]Link, bool, error) {
	ls, more, err := s.Browse(ctx, workspaceID, q)
	if err != nil {
		return nil, false, err
	}
	listed := gen.LinkListedEvent{KeyId: keyID, Filters: q.filters(), ResultCount: len(ls)}
	if err := s.auditListing(ctx, workspaceID, listed); err != nil {
		return nil, false, err
	}
	return ls, more, nil
}

// Browse returns a page of the workspace's links, newest first, and whether more follow, as List does but without
// the link.listed audit: that event names the API key that read the inventory, and the console's members read it
// with their session instead. Errors are internal.
func (s *Service) Browse(ctx context.Context, workspaceID string, q ListQuery) ([]Link, bool, error) {
	f := store.LinkFilter{Expired: q.Expired, Now: time.Now(), CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore}
	assign(&f.Query, q.Query)
	assign(&f.Tag, q.Tag)
	assign(&f.ExternalID, q.ExternalID)
	assign(&f.Archived, q.Archived)
	if q.Domain != nil {
		f.Domain = strings.ToLower(*q.Domain)
	}
	ls, more, err := s.db.Links.List(ctx, workspaceID, f, q.Page)
	if err != nil {
		return nil, false, err
	}
	return linksOf(ls), more, nil
}

// filters are the query parameters a list call sent, as link.listed reports them.
func (q ListQuery) filters() map[string]any {
	f := map[string]any{}
	sent(f, "q", q.Query)
	sent(f, "tag", q.Tag)
	sent(f, "domain", q.Domain)
	sent(f, "external_id", q.ExternalID)
	sent(f, "archived", q.Archived)
	sent(f, "expired", q.Expired)
	sent(f, "created_after", q.CreatedAfter)
	sent(f, "created_before", q.CreatedBefore)
	sent(f, "limit", q.Limit)
	return f
}

// sent adds a parameter to f when it was sent.
func sent[T any](f map[string]any, name string, v *T) {
	if v != nil {
		f[name] = *v
	}
}

// auditListing records link.listed, in a transaction of its own, when an endpoint of the workspace receives it. A
// list is a read: while nobody subscribes, it writes nothing, so listing costs no write transaction (and no SQLite
// write lock) and the event log does not fill with entries nobody receives.
func (s *Service) auditListing(ctx context.Context, workspaceID string, listed gen.LinkListedEvent) error {
	subscribed, err := s.events.Subscribers(ctx, s.db.Reader(), listed, workspaceID)
	if err != nil || !subscribed[workspaceID] {
		return err
	}
	return s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error { return s.emit(ctx, tx, workspaceID, listed) })
}
