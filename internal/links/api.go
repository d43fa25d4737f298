package links

import (
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/patch"
)

// UTM are the UTM parameters of a link as a client names them; nil or empty members are left out.
type UTM struct {
	Source, Medium, Campaign, Term, Content *string
}

// utmParams maps the members of UTM to the query parameters stored on a link (and added by redirects).
var utmParams = []struct {
	name string
	get  func(*UTM) **string
}{
	{"utm_source", func(u *UTM) **string { return &u.Source }},
	{"utm_medium", func(u *UTM) **string { return &u.Medium }},
	{"utm_campaign", func(u *UTM) **string { return &u.Campaign }},
	{"utm_term", func(u *UTM) **string { return &u.Term }},
	{"utm_content", func(u *UTM) **string { return &u.Content }},
}

// params are the query parameters of the UTM members; empty values are left out.
func (u *UTM) params() map[string]string {
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

// utmOf is the inverse of UTM.params.
func utmOf(params map[string]string) UTM {
	var u UTM
	for _, p := range utmParams {
		if v, ok := params[p.name]; ok {
			*p.get(&u) = &v
		}
	}
	return u
}

// API is the API's Link of a stored link: the one shape of a link in answers and in event payloads.
func (s *Service) API(l Link) gen.Link {
	tags := l.Tags
	if tags == nil {
		tags = []string{}
	}
	meta := gen.LinkMetadata(l.Metadata)
	if meta == nil {
		meta = gen.LinkMetadata{}
	}
	u := utmOf(l.UTM)
	return gen.Link{
		Id: l.ID, Object: "link", Domain: l.Domain, Slug: l.Slug, ShortUrl: s.shortURL(l.Domain, l.Slug),
		DestinationUrl: l.DestinationURL, Title: l.Title, Tags: tags, ExternalId: l.ExternalID,
		Utm:       gen.LinkUTM{Source: u.Source, Medium: u.Medium, Campaign: u.Campaign, Term: u.Term, Content: u.Content},
		ExpiresAt: l.ExpiresAt, ExpiredUrl: l.ExpiredURL, MaxClicks: l.MaxClicks,
		RedirectType: gen.RedirectType(l.RedirectType), ForwardQuery: l.ForwardQuery, Metadata: meta,
		Archived: l.Archived, Status: gen.LinkStatus(l.Status(time.Now())), Clicks: l.Clicks,
		LastClickedAt: l.LastClickedAt, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
	}
}

// NewLinkOf reads the API's LinkCreate (checked against its schema) as a NewLink: the one reading of a create
// request, whether it came to the API or from a console form.
func NewLinkOf(in gen.LinkCreate) NewLink {
	return NewLink{DestinationURL: in.DestinationUrl, Slug: in.Slug, Domain: in.Domain, Title: in.Title,
		ExternalID: in.ExternalId, ExpiredURL: in.ExpiredUrl, Tags: deref(in.Tags), UTM: utmOfAPI(in.Utm),
		ExpiresAt: in.ExpiresAt, MaxClicks: in.MaxClicks, RedirectType: (*int)(in.RedirectType),
		ForwardQuery: in.ForwardQuery, Archived: in.Archived, Metadata: deref(in.Metadata)}
}

// UpdateOf reads the API's LinkUpdate (checked against its schema) as an Update: absent fields are left alone, null
// ones cleared.
func UpdateOf(in gen.LinkUpdate) Update {
	return Update{Domain: in.Domain, Slug: in.Slug, DestinationURL: in.DestinationUrl, Title: patch.Of(in.Title),
		ExternalID: patch.Of(in.ExternalId), ExpiredURL: patch.Of(in.ExpiredUrl), ExpiresAt: patch.Of(in.ExpiresAt),
		MaxClicks: patch.Of(in.MaxClicks), UTM: utmOfAPI(in.Utm), Tags: in.Tags,
		RedirectType: (*int)(in.RedirectType), ForwardQuery: in.ForwardQuery, Archived: in.Archived,
		Metadata: (*map[string]any)(in.Metadata)}
}

// deref is the value v points to, or the zero value (a nil slice or map) when it is nil.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

// utmOfAPI maps the API's UTM object to the service's.
func utmOfAPI(u *gen.LinkUTM) *UTM {
	if u == nil {
		return nil
	}
	return &UTM{Source: u.Source, Medium: u.Medium, Campaign: u.Campaign, Term: u.Term, Content: u.Content}
}
