package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// linkRules is the short-link configuration in the form the handlers use it.
type linkRules struct {
	// scheme is the scheme of the short base URL; every short URL uses it.
	scheme string
	// defaultDomain is the host[:port] of the short base URL, lower-case.
	defaultDomain string
	// domains are the short domains links may be created on (the default one included), lower-case.
	domains map[string]bool
	policy  links.Policy
	// tombstone is how long a deleted or re-slugged link's slug stays reserved to its workspace.
	tombstone time.Duration
	// reserved is recomputed whenever routes are added (New, Mount).
	reserved atomic.Pointer[links.Reserved]
	// drawSlug draws a random slug (links.Generate; tests draw collisions with their own).
	drawSlug func() string
}

// newLinkRules applies the defaults of LinkOptions: the short base URL is the product's base URL (or
// http://localhost when neither is set), the tombstone period 30 days.
func newLinkRules(baseURL string, o LinkOptions) (*linkRules, error) {
	if baseURL == "" {
		baseURL = "http://localhost"
	}
	short := o.ShortBaseURL
	if short == "" {
		short = baseURL
	}
	u, err := url.Parse(short)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("short base URL %q must be an absolute http(s) URL", short)
	}
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", baseURL, err)
	}
	r := &linkRules{scheme: u.Scheme, defaultDomain: strings.ToLower(u.Host), tombstone: o.TombstonePeriod,
		domains: map[string]bool{strings.ToLower(u.Host): true}, drawSlug: links.Generate}
	if r.tombstone <= 0 {
		r.tombstone = DefaultTombstonePeriod
	}
	own := []string{u.Host, base.Host}
	for _, d := range o.Domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		r.domains[d] = true
		own = append(own, d)
	}
	r.policy = links.NewPolicy(o.AllowedSchemes, o.BlockedHosts, own)
	empty := links.NewReserved(links.StaticReserved, nil)
	r.reserved.Store(&empty)
	return r, nil
}

// reserveRoutes makes the first path segment of every route of e a reserved slug, so that no link can shadow a
// page of the product (or a page added later under a new top-level path).
func (r *linkRules) reserveRoutes(e *echo.Echo) {
	var paths []string
	for _, rt := range e.Routes() {
		paths = append(paths, rt.Path)
	}
	set := links.NewReserved(links.StaticReserved, paths)
	r.reserved.Store(&set)
}

// shortURL is where a link answers.
func (r *linkRules) shortURL(domain, slug string) string {
	return links.ShortURL(r.scheme, domain, slug)
}

// utmParams maps the API's UTM members to the query parameters stored on the link (and added by redirects).
var utmParams = []struct {
	name string
	get  func(*gen.LinkUTM) **string
}{
	{"utm_source", func(u *gen.LinkUTM) **string { return &u.Source }},
	{"utm_medium", func(u *gen.LinkUTM) **string { return &u.Medium }},
	{"utm_campaign", func(u *gen.LinkUTM) **string { return &u.Campaign }},
	{"utm_term", func(u *gen.LinkUTM) **string { return &u.Term }},
	{"utm_content", func(u *gen.LinkUTM) **string { return &u.Content }},
}

// storeUTM turns the API's UTM object into the link's query parameters; empty values are left out.
func storeUTM(u *gen.LinkUTM) map[string]string {
	out := map[string]string{}
	if u == nil {
		return out
	}
	for _, p := range utmParams {
		if v := *p.get(u); v != nil && *v != "" {
			out[p.name] = *v
		}
	}
	return out
}

// apiUTM is the inverse of storeUTM.
func apiUTM(m map[string]string) gen.LinkUTM {
	var u gen.LinkUTM
	for _, p := range utmParams {
		if v, ok := m[p.name]; ok {
			*p.get(&u) = &v
		}
	}
	return u
}

// apiLink maps a stored link to the API's Link: the one shape of a link in answers and in event payloads.
func (s *Server) apiLink(l store.Link) gen.Link {
	tags := l.Tags
	if tags == nil {
		tags = []string{}
	}
	meta := gen.LinkMetadata(l.Metadata)
	if meta == nil {
		meta = gen.LinkMetadata{}
	}
	return gen.Link{
		Id: l.ID, Object: "link", Domain: l.Domain, Slug: l.Slug, ShortUrl: s.links.shortURL(l.Domain, l.Slug),
		DestinationUrl: l.DestinationURL, Title: l.Title, Tags: tags, ExternalId: l.ExternalID, Utm: apiUTM(l.UTM),
		ExpiresAt: l.ExpiresAt, ExpiredUrl: l.ExpiredURL, MaxClicks: l.MaxClicks,
		RedirectType: gen.RedirectType(l.RedirectType), ForwardQuery: l.ForwardQuery, Metadata: meta,
		Archived: l.Archived, Status: gen.LinkStatus(l.Status(time.Now())), Clicks: l.Clicks,
		LastClickedAt: l.LastClickedAt, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
	}
}

// Limits of a link's own data beyond the schema.
const (
	maxMetadataBytes = 8 << 10
	maxMetadataDepth = 5
	// maxSlugAttempts bounds the draws of a generated slug: with 56^7 slugs even a full domain of millions of
	// links collides rarely, so running out means something else is wrong and the client may simply retry.
	maxSlugAttempts = 8
	// bulkChunk is how many links of a bulk request share a transaction: large enough to make 1000 links fast,
	// small enough that the single writer of SQLite is not held for long.
	bulkChunk = 200
)

// checkDomain returns the short domain a request names (the default one when it names none), lower-case.
func (s *Server) checkDomain(errs *problem.Fields, domain *string) string {
	if domain == nil {
		return s.links.defaultDomain
	}
	d := strings.ToLower(*domain)
	if !s.links.domains[d] {
		known := make([]string, 0, len(s.links.domains))
		for k := range s.links.domains {
			known = append(known, k)
		}
		slices.Sort(known)
		errs.Add("/domain", fmt.Sprintf("%s is not a short domain of this server; use one of: %s", *domain,
			strings.Join(known, ", ")))
	}
	return d
}

func (s *Server) checkSlug(errs *problem.Fields, slug string) {
	if s.links.reserved.Load().Has(slug) {
		errs.Add("/slug", fmt.Sprintf("%q is reserved for the product's own pages; choose another slug", slug))
	}
}

// checkLinkURL records why a destination or expired_url cannot be used.
func (s *Server) checkLinkURL(errs *problem.Fields, pointer, raw string) {
	if err := s.links.policy.CheckDestination(raw); err != nil {
		errs.Add(pointer, err.Error())
	}
}

func checkMetadata(errs *problem.Fields, m gen.LinkMetadata) {
	b, err := json.Marshal(m)
	switch {
	case err != nil:
		errs.Add("/metadata", "must be a JSON object")
	case len(b) > maxMetadataBytes:
		errs.Add("/metadata", fmt.Sprintf("is %d bytes as JSON; the limit is %d", len(b), maxMetadataBytes))
	case jsonDepth(map[string]any(m)) > maxMetadataDepth:
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
func (s *Server) generateSlug() string {
	for {
		if slug := s.links.drawSlug(); !s.links.reserved.Load().Has(slug) {
			return slug
		}
	}
}

// newLink checks a LinkCreate beyond its schema and turns it into the link to insert; generated tells that the
// slug was drawn here (so a conflict is retried with another). A create may not expire at birth: an expires_at in
// the past is refused (an update may set one, to expire a link at once).
func (s *Server) newLink(workspaceID string, in gen.LinkCreate, now time.Time) (l store.Link, generated bool, p *Problem) {
	var errs problem.Fields
	l = store.Link{WorkspaceID: workspaceID, DestinationURL: in.DestinationUrl, Title: in.Title,
		ExternalID: in.ExternalId, ExpiredURL: in.ExpiredUrl, MaxClicks: in.MaxClicks, RedirectType: 302,
		ForwardQuery: true, UTM: storeUTM(in.Utm)}
	l.Domain = s.checkDomain(&errs, in.Domain)
	if generated = in.Slug == nil; generated {
		l.Slug = s.generateSlug()
	} else {
		l.Slug = *in.Slug
		s.checkSlug(&errs, l.Slug)
	}
	s.checkLinkURL(&errs, "/destination_url", in.DestinationUrl)
	if in.ExpiredUrl != nil {
		s.checkLinkURL(&errs, "/expired_url", *in.ExpiredUrl)
	}
	if in.ExpiresAt != nil {
		t := micro(*in.ExpiresAt)
		if !t.After(now) {
			errs.Add("/expires_at", "must be in the future")
		}
		l.ExpiresAt = &t
	}
	assign(&l.Tags, in.Tags)
	assign((*gen.RedirectType)(&l.RedirectType), in.RedirectType)
	assign(&l.ForwardQuery, in.ForwardQuery)
	assign(&l.Archived, in.Archived)
	if in.Metadata != nil {
		checkMetadata(&errs, *in.Metadata)
	}
	assign((*gen.LinkMetadata)(&l.Metadata), in.Metadata)
	if len(errs) > 0 {
		return l, false, fieldsProblem(errs)
	}
	return l, generated, nil
}

// nullable is the generated type of a clearable field of an update (oapi-codegen's nullable.Nullable).
type nullable[T any] interface {
	IsSpecified() bool
	IsNull() bool
	MustGet() T
}

// patchNullable applies a clearable field: absent leaves *dst, null clears it, a value sets it.
func patchNullable[T any, N nullable[T]](dst **T, n N) {
	switch {
	case !n.IsSpecified():
	case n.IsNull():
		*dst = nil
	default:
		v := n.MustGet()
		*dst = &v
	}
}

// linkPatch checks a LinkUpdate beyond its schema and returns the change it makes to a link.
func (s *Server) linkPatch(in gen.LinkUpdate) (func(*store.Link), *Problem) {
	var errs problem.Fields
	var domain string
	if in.Domain != nil {
		domain = s.checkDomain(&errs, in.Domain)
	}
	if in.Slug != nil {
		s.checkSlug(&errs, *in.Slug)
	}
	if in.DestinationUrl != nil {
		s.checkLinkURL(&errs, "/destination_url", *in.DestinationUrl)
	}
	if in.ExpiredUrl.IsSpecified() && !in.ExpiredUrl.IsNull() {
		s.checkLinkURL(&errs, "/expired_url", in.ExpiredUrl.MustGet())
	}
	if in.Metadata != nil {
		checkMetadata(&errs, *in.Metadata)
	}
	if len(errs) > 0 {
		return nil, fieldsProblem(errs)
	}
	return func(l *store.Link) {
		if in.Domain != nil {
			l.Domain = domain
		}
		assign(&l.Slug, in.Slug)
		assign(&l.DestinationURL, in.DestinationUrl)
		patchNullable(&l.Title, in.Title)
		patchNullable(&l.ExternalID, in.ExternalId)
		patchNullable(&l.ExpiredURL, in.ExpiredUrl)
		patchNullable(&l.MaxClicks, in.MaxClicks)
		patchNullable(&l.ExpiresAt, in.ExpiresAt)
		if l.ExpiresAt != nil {
			t := micro(*l.ExpiresAt)
			l.ExpiresAt = &t
		}
		if in.Utm != nil {
			l.UTM = storeUTM(in.Utm)
		}
		assign(&l.Tags, in.Tags)
		assign((*gen.LinkUpdateRedirectType)(&l.RedirectType), in.RedirectType)
		assign(&l.ForwardQuery, in.ForwardQuery)
		assign(&l.Archived, in.Archived)
		assign((*gen.LinkMetadata)(&l.Metadata), in.Metadata)
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
func (s *Server) emit(ctx context.Context, tx bun.IDB, workspaceID string, payload any) error {
	_, err := s.events.Emit(ctx, tx, workspaceID, payload)
	return err
}

// createLinks inserts links inside tx with their link.created events (one EmitMany for all of them) and announces
// their short URLs; a taken generated slug (generated[i]) is drawn again, up to maxSlugAttempts draws. refused[i]
// is nil for a created link, else the store's conflict (store.ErrSlugTaken or store.ErrExternalIDTaken). keys are
// the short URLs it announced, read from the links the store created (the store sets their slug keys), for the
// caller to publish after the commit. err is any other failure.
func (s *Server) createLinks(ctx context.Context, tx bun.IDB, links []*store.Link, generated []bool) (refused []error, keys []store.LinkKey, err error) {
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
		created = append(created, events.Pending{WorkspaceID: l.WorkspaceID, Payload: gen.LinkCreatedEvent{Link: s.apiLink(*l)}})
		keys = append(keys, l.Key())
	}
	if _, err := s.events.EmitMany(ctx, tx, created); err != nil {
		return nil, nil, err
	}
	return refused, keys, s.db.LinkChanges.Announce(ctx, tx, keys...)
}

// createLink is createLinks for one link: the refusal is the error.
func (s *Server) createLink(ctx context.Context, tx bun.IDB, l *store.Link, generated bool) ([]store.LinkKey, error) {
	refused, keys, err := s.createLinks(ctx, tx, []*store.Link{l}, []bool{generated})
	if err != nil {
		return nil, err
	}
	return keys, refused[0]
}

// updateLink writes l (read as old inside tx) when it differs, with its link.updated event, and announces both
// short URLs. It returns the keys to publish after the commit (none when nothing changed).
func (s *Server) updateLink(ctx context.Context, tx bun.IDB, l *store.Link, old store.Link, now time.Time) ([]store.LinkKey, error) {
	changed := changedFields(&old, l)
	if len(changed) == 0 {
		return nil, nil
	}
	rearmLimitEvents(l, now)
	if err := s.db.Links.Update(ctx, tx, l, old, now.Add(s.links.tombstone)); err != nil {
		return nil, err
	}
	if err := s.emit(ctx, tx, l.WorkspaceID, gen.LinkUpdatedEvent{Link: s.apiLink(*l), Changed: changed}); err != nil {
		return nil, err
	}
	keys := []store.LinkKey{l.Key()}
	if old.Key() != l.Key() {
		keys = append(keys, old.Key())
	}
	return keys, s.db.LinkChanges.Announce(ctx, tx, keys...)
}

func linkLocation(id string) *string {
	loc := "/api/v1/links/" + id
	return &loc
}

// CreateLink answers POST /api/v1/links.
func (s *Server) CreateLink(ctx context.Context, req gen.CreateLinkRequestObject) (gen.CreateLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, generated, p := s.newLink(key.WorkspaceID, *req.Body, time.Now())
	if p != nil {
		return nil, p
	}
	var keys []store.LinkKey
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		keys, err = s.createLink(ctx, tx, &l, generated)
		return err
	})
	if err != nil {
		return nil, storeProblem(err, "link", l.ID)
	}
	s.db.LinkChanges.Published(keys...)
	return gen.CreateLink201JSONResponse{Body: s.apiLink(l), Headers: gen.CreateLink201ResponseHeaders{Location: linkLocation(l.ID)}}, nil
}

// bulkItem is one valid item of a bulk request on its way to the database.
type bulkItem struct {
	index     int
	link      store.Link
	generated bool
}

// CreateLinksBulk answers POST /api/v1/links/bulk: every item is checked on its own, the valid ones are created in
// transactions of bulkChunk links (each with its link.created event), and every item gets its outcome in request
// order. A conflict fails only its item; a database failure fails the items of its transaction.
func (s *Server) CreateLinksBulk(ctx context.Context, req gen.CreateLinksBulkRequestObject) (gen.CreateLinksBulkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := gen.LinkBulkResult{Object: "bulk_result", Data: make([]gen.LinkBulkItem, len(req.Body.Links))}
	var valid []bulkItem
	for i, in := range req.Body.Links {
		l, generated, p := s.newLink(key.WorkspaceID, in, now)
		if p != nil {
			out.Data[i] = bulkFailure(i, p)
			continue
		}
		valid = append(valid, bulkItem{index: i, link: l, generated: generated})
	}
	for chunk := range slices.Chunk(valid, bulkChunk) {
		s.createBulkChunk(ctx, chunk, out.Data)
	}
	for _, item := range out.Data {
		if item.Status == gen.LinkBulkItemStatusCreated {
			out.Created++
		} else {
			out.Failed++
		}
	}
	return gen.CreateLinksBulk200JSONResponse{Body: out}, nil
}

// createBulkChunk creates the links of one chunk in one transaction and writes their outcomes into results: a
// failure of the transaction fails every item of the chunk with internal_error.
func (s *Server) createBulkChunk(ctx context.Context, chunk []bulkItem, results []gen.LinkBulkItem) {
	links := make([]*store.Link, len(chunk))
	generated := make([]bool, len(chunk))
	for j := range chunk {
		links[j], generated[j] = &chunk[j].link, chunk[j].generated
	}
	var refused []error
	var keys []store.LinkKey
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		refused, keys, err = s.createLinks(ctx, tx, links, generated)
		return err
	})
	if err != nil {
		loggerFrom(ctx, s.log).Error("bulk link creation failed", "error", err, "items", len(chunk))
		p := newProblem(problem.InternalError, "The links of this item's batch could not be stored; retry the request.")
		for _, it := range chunk {
			results[it.index] = bulkFailure(it.index, p)
		}
		return
	}
	for j, it := range chunk {
		if refused[j] != nil {
			results[it.index] = bulkFailure(it.index, storeProblem(refused[j], "link", links[j].ID))
			continue
		}
		link := s.apiLink(*links[j])
		results[it.index] = gen.LinkBulkItem{Index: it.index, Status: gen.LinkBulkItemStatusCreated, Link: &link}
	}
	s.db.LinkChanges.Published(keys...)
}

// bulkFailure is the failed outcome of an item: err is its problem (anything else is an internal error).
func bulkFailure(index int, err error) gen.LinkBulkItem {
	var p *Problem
	if !errors.As(err, &p) {
		p = newProblem(problem.InternalError, "The link could not be stored; retry the request.")
	}
	e := gen.BulkItemError{Code: gen.ProblemCode(p.Code), Status: p.Status(), Detail: p.Detail}
	if len(p.Fields) > 0 {
		errs := fieldErrors(p.Fields)
		e.Errors = &errs
	}
	return gen.LinkBulkItem{Index: index, Status: gen.LinkBulkItemStatusFailed, Error: &e}
}

// GetLink answers GET /api/v1/links/{link_id}.
func (s *Server) GetLink(ctx context.Context, req gen.GetLinkRequestObject) (gen.GetLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.db.Links.Get(ctx, key.WorkspaceID, req.LinkId)
	if err != nil {
		return nil, storeProblem(err, "link", req.LinkId)
	}
	return gen.GetLink200JSONResponse{Body: s.apiLink(l)}, nil
}

// LookupLink answers GET /api/v1/links/lookup: the workspace's link at a short URL, whatever the slug's case.
func (s *Server) LookupLink(ctx context.Context, req gen.LookupLinkRequestObject) (gen.LookupLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	domain := s.links.defaultDomain
	if req.Params.Domain != nil {
		domain = strings.ToLower(*req.Params.Domain)
	}
	l, err := s.db.Links.ByKey(ctx, key.WorkspaceID, store.LinkKey{Domain: domain, SlugKey: store.SlugKey(req.Params.Slug)})
	if errors.Is(err, store.ErrNotFound) {
		return nil, newProblem(problem.NotFound, fmt.Sprintf("This workspace has no link %s/%s.", domain, req.Params.Slug))
	}
	if err != nil {
		return nil, err
	}
	return gen.LookupLink200JSONResponse{Body: s.apiLink(l)}, nil
}

// UpdateLink answers PATCH /api/v1/links/{link_id}. Nothing is written (and no event sent) when the body changes
// nothing.
func (s *Server) UpdateLink(ctx context.Context, req gen.UpdateLinkRequestObject) (gen.UpdateLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	patch, p := s.linkPatch(*req.Body)
	if p != nil {
		return nil, p
	}
	now := time.Now()
	l := store.Link{ID: req.LinkId}
	var keys []store.LinkKey
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		old, err := s.db.Links.Lock(ctx, tx, key.WorkspaceID, req.LinkId)
		if err != nil {
			return err
		}
		l = old
		patch(&l)
		keys, err = s.updateLink(ctx, tx, &l, old, now)
		return err
	})
	if err != nil {
		return nil, storeProblem(err, "link", req.LinkId)
	}
	s.db.LinkChanges.Published(keys...)
	return gen.UpdateLink200JSONResponse{Body: s.apiLink(l)}, nil
}

// UpsertLinkByExternalId answers PUT /api/v1/links/external/{external_id}: 201 with a new link, 200 with the
// existing one replaced. The short URL (slug and domain) of an existing link is kept unless sent: replacing it
// implicitly would break links already shared. Two concurrent upserts of one external ID make one link: the one
// that loses the insert replaces the winner's link instead.
func (s *Server) UpsertLinkByExternalId(ctx context.Context, req gen.UpsertLinkByExternalIdRequestObject) (gen.UpsertLinkByExternalIdResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	now := time.Now()
	fresh, generated, p := s.newLink(key.WorkspaceID, gen.LinkCreate{
		DestinationUrl: b.DestinationUrl, Slug: b.Slug, Domain: b.Domain, Title: b.Title, Tags: b.Tags,
		ExternalId: &req.ExternalId, Utm: b.Utm, ExpiresAt: b.ExpiresAt, ExpiredUrl: b.ExpiredUrl,
		MaxClicks: b.MaxClicks, RedirectType: b.RedirectType, ForwardQuery: b.ForwardQuery, Metadata: b.Metadata,
		Archived: b.Archived,
	}, now)
	if p != nil {
		return nil, p
	}
	for attempt := 0; ; attempt++ {
		l := fresh
		var keys []store.LinkKey
		var created bool
		err = s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			old, err := s.db.Links.LockByExternalID(ctx, tx, key.WorkspaceID, req.ExternalId)
			if errors.Is(err, store.ErrNotFound) {
				created = true
				keys, err = s.createLink(ctx, tx, &l, generated)
				return err
			}
			if err != nil {
				return err
			}
			l = replaced(old, fresh, b.Slug != nil, b.Domain != nil)
			keys, err = s.updateLink(ctx, tx, &l, old, now)
			return err
		})
		if created && errors.Is(err, store.ErrExternalIDTaken) && attempt == 0 {
			continue // a concurrent upsert created the link first: replace it
		}
		if err != nil {
			return nil, storeProblem(err, "link", l.ID)
		}
		s.db.LinkChanges.Published(keys...)
		if created {
			return gen.UpsertLinkByExternalId201JSONResponse{Body: s.apiLink(l),
				Headers: gen.UpsertLinkByExternalId201ResponseHeaders{Location: linkLocation(l.ID)}}, nil
		}
		return gen.UpsertLinkByExternalId200JSONResponse{Body: s.apiLink(l)}, nil
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

// DeleteLink answers DELETE /api/v1/links/{link_id}: the row goes at once, the slug is tombstoned to the workspace,
// clicks and rollups are queued for the background purge, and link.deleted carries the last state.
func (s *Server) DeleteLink(ctx context.Context, req gen.DeleteLinkRequestObject) (gen.DeleteLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var l store.Link
	err = s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if l, err = s.db.Links.Delete(ctx, tx, key.WorkspaceID, req.LinkId, time.Now().Add(s.links.tombstone)); err != nil {
			return err
		}
		if err := s.emit(ctx, tx, l.WorkspaceID, gen.LinkDeletedEvent{Link: s.apiLink(l)}); err != nil {
			return err
		}
		return s.db.LinkChanges.Announce(ctx, tx, l.Key())
	})
	if err != nil {
		return nil, storeProblem(err, "link", req.LinkId)
	}
	s.db.LinkChanges.Published(l.Key())
	return gen.DeleteLink204Response{}, nil
}

// ListLinks answers GET /api/v1/links and leaves the opt-in link.listed audit event.
func (s *Server) ListLinks(ctx context.Context, req gen.ListLinksRequestObject) (gen.ListLinksResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	page, err := pageFrom(q.Limit, q.Cursor, "lnk_", false)
	if err != nil {
		return nil, err
	}
	f := store.LinkFilter{Expired: q.Expired, Now: time.Now(), CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore}
	if q.Q != nil {
		f.Query = *q.Q
	}
	if q.Tag != nil {
		f.Tag = *q.Tag
	}
	if q.ExternalId != nil {
		f.ExternalID = *q.ExternalId
	}
	if q.Domain != nil {
		f.Domain = strings.ToLower(*q.Domain)
	}
	if q.Archived != nil {
		f.Archived = *q.Archived
	}
	ls, more, err := s.db.Links.List(ctx, key.WorkspaceID, f, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(ls, more, page, func(l store.Link) string { return l.ID },
		func(l store.Link) (gen.Link, error) { return s.apiLink(l), nil })
	if err != nil {
		return nil, err
	}
	listed := gen.LinkListedEvent{KeyId: key.ID, Filters: listFilters(q), ResultCount: len(ls)}
	if err := s.auditListing(ctx, key.WorkspaceID, listed); err != nil {
		return nil, err
	}
	return gen.ListLinks200JSONResponse{Body: gen.LinkList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// listFilters are the query parameters a list call sent, cursor left out, as link.listed reports them.
func listFilters(q gen.ListLinksParams) map[string]any {
	f := map[string]any{}
	for name, v := range map[string]any{
		"q": q.Q, "tag": q.Tag, "domain": q.Domain, "external_id": q.ExternalId, "archived": q.Archived,
		"expired": q.Expired, "created_after": q.CreatedAfter, "created_before": q.CreatedBefore, "limit": q.Limit,
	} {
		if !reflect.ValueOf(v).IsNil() {
			f[name] = v
		}
	}
	return f
}

// auditListing records link.listed, in a transaction of its own, when an endpoint of the workspace receives it. A
// list is a read: while nobody subscribes, it writes nothing, so listing costs no write transaction (and no SQLite
// write lock) and the event log does not fill with entries nobody receives.
func (s *Server) auditListing(ctx context.Context, workspaceID string, listed gen.LinkListedEvent) error {
	subscribed, err := s.events.Subscribers(ctx, s.db.Reader(), listed, workspaceID)
	if err != nil || !subscribed[workspaceID] {
		return err
	}
	return s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error { return s.emit(ctx, tx, workspaceID, listed) })
}
