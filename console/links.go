package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/qrcode"
	"github.com/switchboard/switchboard/store"
)

// The short links pages: the list with its filters and the create form, a link's page (its clicks as a chart, by
// dimension and one by one, and its QR code), the edit form, and the delete confirmation. Every change goes through
// the links service, with the form read as the API's request body.

func (c *Console) registerLinks(g *echo.Group) {
	g.GET("/links", c.linksPage)
	g.POST("/links", c.createLink)
	g.GET("/links/:id", c.linkPage)
	g.GET("/links/:id/edit", c.editLinkPage)
	g.POST("/links/:id/edit", c.editLink)
	g.POST("/links/:id/archive", c.archiveLink)
	g.GET("/links/:id/delete", c.deleteLinkPage)
	g.POST("/links/:id/delete", c.deleteLink)
	g.GET("/links/:id/qr.svg", c.linkQR)
	g.GET("/links/:id/qr.png", c.linkQR)
}

// linkForm is the create and edit form as submitted (kept when it is shown again with errors).
type linkForm struct {
	Destination, Slug, Domain, Title, Tags                 string
	UTMSource, UTMMedium, UTMCampaign, UTMTerm, UTMContent string
	// ExpiresAt is a datetime-local value, read in the zone TZ (the browser's, filled in by the page's script).
	ExpiresAt, TZ string
	MaxClicks     string
	Nonce         string
}

func readLinkForm(ec echo.Context) linkForm {
	v := func(name string) string { return strings.TrimSpace(ec.FormValue(name)) }
	return linkForm{Destination: v("destination_url"), Slug: v("slug"), Domain: v("domain"), Title: v("title"),
		Tags: v("tags"), UTMSource: v("utm_source"), UTMMedium: v("utm_medium"), UTMCampaign: v("utm_campaign"),
		UTMTerm: v("utm_term"), UTMContent: v("utm_content"), ExpiresAt: v("expires_at"), TZ: v("tz"),
		MaxClicks: v("max_clicks"), Nonce: ec.FormValue("nonce")}
}

// formOf fills the edit form with a link's state; expiry is shown in loc.
func formOf(l gen.Link, loc *time.Location) linkForm {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f := linkForm{Destination: l.DestinationUrl, Slug: l.Slug, Domain: l.Domain, Title: s(l.Title),
		Tags: strings.Join(l.Tags, ", "), UTMSource: s(l.Utm.Source), UTMMedium: s(l.Utm.Medium),
		UTMCampaign: s(l.Utm.Campaign), UTMTerm: s(l.Utm.Term), UTMContent: s(l.Utm.Content), TZ: loc.String()}
	if l.ExpiresAt != nil {
		f.ExpiresAt = l.ExpiresAt.In(loc).Format(datetimeLocal)
	}
	if l.MaxClicks != nil {
		f.MaxClicks = strconv.FormatInt(*l.MaxClicks, 10)
	}
	return f
}

// datetimeLocal is the value format of <input type="datetime-local">.
const datetimeLocal = "2006-01-02T15:04"

// document is the form as the API's LinkCreate (create) or LinkUpdate (edit) body: a create leaves out what is
// empty, an edit clears it (every field of the form is sent). Values the form itself cannot read (a date, a
// number) are refused here as validation_failed with the pointer the API would name.
func (f linkForm) document(edit bool) (map[string]any, error) {
	doc := map[string]any{"destination_url": f.Destination}
	var bad problem.Fields
	optional := func(name, value string, v any) {
		switch {
		case value != "":
			doc[name] = v
		case edit:
			doc[name] = nil
		}
	}
	if f.Slug != "" || edit {
		doc["slug"] = f.Slug
	}
	if f.Domain != "" {
		doc["domain"] = f.Domain
	}
	optional("title", f.Title, f.Title)
	tags := []string{}
	for t := range strings.SplitSeq(f.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	if len(tags) > 0 || edit {
		doc["tags"] = tags
	}
	utm := map[string]any{}
	for name, v := range map[string]string{"source": f.UTMSource, "medium": f.UTMMedium, "campaign": f.UTMCampaign,
		"term": f.UTMTerm, "content": f.UTMContent} {
		if v != "" {
			utm[name] = v
		}
	}
	if len(utm) > 0 || edit {
		doc["utm"] = utm
	}
	var expires any
	if f.ExpiresAt != "" {
		loc, err := zone(f.TZ)
		if err != nil {
			loc = time.UTC
		}
		t, err := time.ParseInLocation(datetimeLocal, f.ExpiresAt, loc)
		if err != nil {
			bad.Add("/expires_at", "must be a date and time")
		}
		expires = t.UTC().Format(time.RFC3339)
	}
	optional("expires_at", f.ExpiresAt, expires)
	var maxClicks any
	if f.MaxClicks != "" {
		n, err := strconv.ParseInt(f.MaxClicks, 10, 64)
		if err != nil {
			bad.Add("/max_clicks", "must be a whole number")
		}
		maxClicks = n
	}
	optional("max_clicks", f.MaxClicks, maxClicks)
	return doc, bad.Err()
}

// read checks the form as the API's LinkCreate (edit: LinkUpdate) and decodes it into out, that type.
func (f linkForm) read(edit bool, out any) error {
	doc, err := f.document(edit)
	if err != nil {
		return err
	}
	name := "LinkCreate"
	if edit {
		name = "LinkUpdate"
	}
	return requestBody(name, doc, out)
}

// zone is the IANA time zone a browser named ("" is UTC).
func zone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// linksData is what the links page shows.
type linksData struct {
	Links   []gen.Link
	Domains []string
	// Filters as sent.
	Query, Tag, Domain string
	Archived           bool
	// Before is the page's cursor; Next the cursor of the next page ("" on the last).
	Before, Next string
	Form         linkForm
	Errors       map[string]string
	// Created is the link this response created.
	Created *gen.Link
}

// linksPageSize is how many links a page of the list shows.
const linksPageSize = 25

func (c *Console) linksPage(ec echo.Context) error {
	notice := ""
	switch {
	case ec.QueryParam("deleted") == "1":
		notice = "The link was deleted. Its short URL answers 404 now and stays reserved to this workspace for a while."
	case ec.QueryParam("archived") != "":
		notice = "The link was archived: it still redirects, but the list leaves it out (see Archived)."
	case ec.QueryParam("unarchived") != "":
		notice = "The link is back in the list."
	}
	return c.renderLinks(ec, http.StatusOK, notice, "", linkForm{}, nil, nil)
}

func (c *Console) renderLinks(ec echo.Context, status int, notice, errMsg string, form linkForm, errs map[string]string, created *gen.Link) error {
	ses := sessionFrom(ec)
	q := ec.QueryParams()
	d := linksData{Domains: c.links.Domains(), Query: q.Get("q"), Tag: q.Get("tag"), Domain: q.Get("domain"),
		Archived: q.Get("archived") == "1", Before: q.Get("before"), Form: form, Errors: errs, Created: created}
	if d.Form.Nonce == "" {
		d.Form.Nonce = randomToken()
	}
	if ses.Workspace != nil {
		lq := links.ListQuery{Archived: &d.Archived, Page: store.Page{Limit: linksPageSize, Before: d.Before}}
		for _, f := range []struct {
			dst **string
			v   string
		}{{&lq.Query, d.Query}, {&lq.Tag, d.Tag}, {&lq.Domain, d.Domain}} {
			if f.v != "" {
				*f.dst = &f.v
			}
		}
		ls, more, err := c.links.Browse(ec.Request().Context(), ses.Workspace.ID, lq)
		if err != nil {
			return err
		}
		for _, l := range ls {
			d.Links = append(d.Links, c.links.API(l))
		}
		if more {
			d.Next = ls[len(ls)-1].ID
		}
	}
	return c.render(ec, status, "links", page{Title: "Short links", Session: ses, Notice: notice, Error: errMsg, Data: d})
}

// linkFormMessage is the alert of a refused link form; errs holds what to show beside the fields.
const linkFormMessage = "The link was not saved: correct the fields marked below."

// createLink creates a link from the form. A resubmitted form (reload, double click) finds its nonce spent and
// creates nothing.
func (c *Console) createLink(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	form := readLinkForm(ec)
	fail := func(err error) error {
		if errs := linkFieldErrors(err); errs != nil {
			return c.renderLinks(ec, http.StatusUnprocessableEntity, "", linkFormMessage, form, errs, nil)
		}
		return err
	}
	var body gen.LinkCreate
	if err := form.read(false, &body); err != nil {
		return fail(err)
	}
	if form.Nonce == "" || !c.created.Claim(form.Nonce) {
		form.Nonce = ""
		return c.renderLinks(ec, http.StatusConflict, "", "This form was already submitted, so no second link was "+
			"created. Find the link in the list below.", linkForm{}, nil, nil)
	}
	l, err := c.links.Create(ec.Request().Context(), ses.Workspace.ID, links.NewLinkOf(body))
	if err != nil {
		c.created.Release(form.Nonce)
		form.Nonce = ""
		return fail(err)
	}
	created := c.links.API(l)
	return c.renderLinks(ec, http.StatusCreated, "", "", linkForm{}, nil, &created)
}

// linkFieldErrors maps the service's refusal of a link to the form's fields: validation problems by pointer, a
// taken slug or external ID beside the slug. nil when err is no refusal of the form.
func linkFieldErrors(err error) map[string]string {
	if errs := fieldErrors(err); errs != nil {
		return errs
	}
	if p := problemOf(err); p != nil && (p.Code == problem.SlugTaken || p.Code == problem.ExternalIDTaken) {
		return map[string]string{"/slug": p.Detail}
	}
	return nil
}

// workspaceLink is the link of the path's :id in the session's workspace; found is false when it answered 404.
func (c *Console) workspaceLink(ec echo.Context) (l links.Link, found bool, err error) {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return links.Link{}, false, c.notFoundPage(ec, "There is no such link in this workspace.")
	}
	l, err = c.links.Get(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if isNotFound(err) {
		return links.Link{}, false, c.notFoundPage(ec, "There is no such link in this workspace.")
	}
	return l, err == nil, err
}

// notFoundPage answers 404 with the message.
func (c *Console) notFoundPage(ec echo.Context, msg string) error {
	return c.render(ec, http.StatusNotFound, "error", page{Title: "Not found", Session: sessionFrom(ec), Error: msg})
}

// Statistics choices of a link's page: the span each interval covers, in buckets a chart can show.
var linkIntervals = []struct {
	Value links.Interval
	Label string
	Span  time.Duration
}{
	{links.Hour, "Hours (last 48)", 48 * time.Hour},
	{links.Day, "Days (last 30)", 30 * 24 * time.Hour},
	{links.Week, "Weeks (last 26)", 26 * 7 * 24 * time.Hour},
	{links.Month, "Months (last 12)", 365 * 24 * time.Hour},
}

// linkDimensions are the breakdowns of a link's page, in the order shown.
var linkDimensions = []struct{ Name, Title string }{
	{store.DimensionCountries, "Countries"},
	{store.DimensionReferrers, "Referrers"},
	{store.DimensionDevices, "Devices"},
	{store.DimensionBrowsers, "Browsers"},
	{store.DimensionOperatingSystems, "Operating systems"},
}

// linkData is what a link's page shows.
type linkData struct {
	Link     gen.Link
	Interval links.Interval
	// Intervals are the choices of the interval menu.
	Intervals []struct {
		Value links.Interval
		Label string
	}
	TZ         string
	Chart      barChart
	Totals     links.Counts
	Dimensions []dimensionData
	Clicks     []store.Click
}

type dimensionData struct {
	Name, Title string
	Values      []store.DimensionClicks
	// Top is the most human clicks of a value, the full length of the bars.
	Top int64
}

// dimensionValues is how many values of each dimension the page lists.
const dimensionValues = 8

func (c *Console) linkPage(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	ses := sessionFrom(ec)
	ctx := ec.Request().Context()
	d := linkData{Link: c.links.API(l), Interval: links.Day, TZ: ec.QueryParam("tz")}
	span := 30 * 24 * time.Hour
	for _, in := range linkIntervals {
		d.Intervals = append(d.Intervals, struct {
			Value links.Interval
			Label string
		}{in.Value, in.Label})
		if string(in.Value) == ec.QueryParam("interval") {
			d.Interval, span = in.Value, in.Span
		}
	}
	notice := ""
	if ec.QueryParam("saved") == "1" {
		notice = "The link was saved."
	}
	if _, err := zone(d.TZ); err != nil || d.TZ == "" {
		d.TZ = "UTC"
	}
	now := time.Now()
	from := now.Add(-span)
	period := links.Period{From: &from, To: &now}
	st, err := c.links.Stats(ctx, ses.Workspace.ID, l.ID, links.StatsQuery{Period: period, Interval: d.Interval, TimeZone: &d.TZ})
	if err != nil {
		return err
	}
	d.Totals = st.Totals
	points := make([]chartPoint, len(st.Series))
	for i, b := range st.Series {
		points[i] = chartPoint{Start: b.Start, Lower: b.Humans, Upper: b.Bots, Title: fmt.Sprintf("%s: %d human, %d bot clicks",
			bucketTitle(b.Start, d.Interval, st.Location), b.Humans, b.Bots)}
	}
	d.Chart = newBarChart(points, func(t time.Time) string { return bucketLabel(t, d.Interval, st.Location) },
		fmt.Sprintf("Clicks by %s in %s: %d human and %d bot clicks in all", d.Interval, st.Location, st.Totals.Humans, st.Totals.Bots),
		"No clicks in this period yet")
	for _, dim := range linkDimensions {
		by, err := c.links.StatsBy(ctx, ses.Workspace.ID, l.ID, dim.Name, period, dimensionValues)
		if err != nil {
			return err
		}
		dd := dimensionData{Name: dim.Name, Title: dim.Title, Values: by.Values}
		for _, v := range by.Values {
			dd.Top = max(dd.Top, v.Humans+v.Bots)
		}
		d.Dimensions = append(d.Dimensions, dd)
	}
	if d.Clicks, _, err = c.links.Clicks(ctx, ses.Workspace.ID, l.ID, "", store.Page{Limit: 20}); err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "link", page{Title: d.Link.ShortUrl, Session: ses, Notice: notice, Data: d})
}

// bucketLabel names a bucket on the x axis, in the zone of the page.
func bucketLabel(t time.Time, interval links.Interval, loc *time.Location) string {
	t = t.In(loc)
	switch interval {
	case links.Hour:
		if t.Hour() == 0 {
			return t.Format("2 Jan")
		}
		return t.Format("15:04")
	case links.Month:
		return t.Format("Jan 2006")
	}
	return t.Format("2 Jan")
}

// bucketTitle names a bucket in full, for the bar's tooltip.
func bucketTitle(t time.Time, interval links.Interval, loc *time.Location) string {
	t = t.In(loc)
	switch interval {
	case links.Hour:
		return t.Format("Mon 2 Jan 15:04")
	case links.Week:
		return "Week of " + t.Format("Mon 2 Jan 2006")
	case links.Month:
		return t.Format("January 2006")
	}
	return t.Format("Mon 2 Jan 2006")
}

// editData is what the edit page shows.
type editData struct {
	Link    gen.Link
	Domains []string
	Form    linkForm
	Errors  map[string]string
}

func (c *Console) editLinkPage(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	loc, err := zone(ec.QueryParam("tz"))
	if err != nil {
		loc = time.UTC
	}
	api := c.links.API(l)
	return c.render(ec, http.StatusOK, "link-edit", page{Title: "Edit " + api.ShortUrl, Session: sessionFrom(ec),
		Data: editData{Link: api, Domains: c.links.Domains(), Form: formOf(api, loc)}})
}

// editLink replaces the fields of the form (a partial update of every field the form shows).
func (c *Console) editLink(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	form := readLinkForm(ec)
	fail := func(err error) error {
		if errs := linkFieldErrors(err); errs != nil {
			return c.render(ec, http.StatusUnprocessableEntity, "link-edit", page{Title: "Edit link", Session: sessionFrom(ec),
				Error: linkFormMessage, Data: editData{Link: c.links.API(l), Domains: c.links.Domains(), Form: form, Errors: errs}})
		}
		return err
	}
	var body gen.LinkUpdate
	if err := form.read(true, &body); err != nil {
		return fail(err)
	}
	if _, err := c.links.Update(ec.Request().Context(), l.WorkspaceID, l.ID, links.UpdateOf(body)); err != nil {
		return fail(err)
	}
	return ec.Redirect(http.StatusSeeOther, "/user/links/"+url.PathEscape(l.ID)+"?saved=1")
}

// archiveLink archives the link (archived=1) or brings it back to the list.
func (c *Console) archiveLink(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	archived := ec.FormValue("archived") == "1"
	if _, err := c.links.Update(ec.Request().Context(), l.WorkspaceID, l.ID, links.Update{Archived: &archived}); err != nil {
		return err
	}
	if archived {
		return ec.Redirect(http.StatusSeeOther, "/user/links?archived="+url.QueryEscape(l.ID))
	}
	return ec.Redirect(http.StatusSeeOther, "/user/links?archived=1&unarchived="+url.QueryEscape(l.ID))
}

func (c *Console) deleteLinkPage(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	api := c.links.API(l)
	return c.render(ec, http.StatusOK, "link-delete", page{Title: "Delete " + api.ShortUrl, Session: sessionFrom(ec), Data: api})
}

func (c *Console) deleteLink(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	if err := c.links.Delete(ec.Request().Context(), l.WorkspaceID, l.ID); err != nil && !isNotFound(err) {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/links?deleted=1")
}

// linkQR answers the QR code of the link's short URL as SVG or PNG (by the path's extension); ?download=1 makes the
// browser save it under the slug's name.
func (c *Console) linkQR(ec echo.Context) error {
	l, found, err := c.workspaceLink(ec)
	if !found {
		return err
	}
	short := c.links.ShortURL(l)
	code, err := qrcode.Encode(short)
	if err != nil {
		return err
	}
	h := ec.Response().Header()
	h.Set("Cache-Control", "private, no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	// An SVG opened on its own is a document: it may load and run nothing.
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'self'")
	ext := "svg"
	if strings.HasSuffix(ec.Request().URL.Path, ".png") {
		ext = "png"
	}
	if ec.QueryParam("download") == "1" {
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="qr-%s.%s"`, l.Slug, ext))
	}
	if ext == "png" {
		b, err := qrcode.PNG(code)
		if err != nil {
			return err
		}
		return ec.Blob(http.StatusOK, "image/png", b)
	}
	return ec.Blob(http.StatusOK, "image/svg+xml", qrcode.SVG(code, "QR code of "+short))
}

// linkFieldsData is what the link-fields template (shared by the create and the edit form) shows.
type linkFieldsData struct {
	Form    linkForm
	Errors  map[string]string
	Domains []string
	Edit    bool
}

type utmField struct{ Name, Value string }

// linkStatuses are the words a person reads for a link's status.
var linkStatuses = map[gen.LinkStatus]string{
	gen.LinkStatusActive: "active", gen.LinkStatusExpired: "expired", gen.LinkStatusMaxClicksReached: "click limit reached",
}

func init() {
	templateFuncs["linkFields"] = func(f linkForm, errs map[string]string, domains []string, edit bool) linkFieldsData {
		return linkFieldsData{Form: f, Errors: errs, Domains: domains, Edit: edit}
	}
	templateFuncs["utmFields"] = func(f linkForm) []utmField {
		return []utmField{{"source", f.UTMSource}, {"medium", f.UTMMedium}, {"campaign", f.UTMCampaign},
			{"term", f.UTMTerm}, {"content", f.UTMContent}}
	}
	templateFuncs["linkStatus"] = func(s gen.LinkStatus) string { return linkStatuses[s] }
	// inZone writes a time as a person in the zone reads it (the zone of the page, the browser's).
	templateFuncs["inZone"] = func(t time.Time, tz string) string {
		loc, err := zone(tz)
		if err != nil {
			loc = time.UTC
		}
		return t.In(loc).Format("2 Jan 2006 15:04 MST")
	}
}
