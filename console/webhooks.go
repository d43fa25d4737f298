package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// The webhooks pages: the endpoints with the create form (events picked from the catalogue), an endpoint's page (its
// health over the last day, the actions of the API — pause, resume, enable, rotate the secret, test, recover,
// delete — and its delivery log), and a delivery's page (every attempt with the receiver's answer, the exact signed
// request, resend). Every action goes through the webhook service, forms read as the API's request bodies.

func (c *Console) registerWebhooks(g *echo.Group) {
	g.GET("/webhooks", c.webhooksPage)
	g.POST("/webhooks", c.createWebhook)
	g.GET("/webhooks/:id", c.webhookPage)
	g.POST("/webhooks/:id/pause", c.webhookAction)
	g.POST("/webhooks/:id/resume", c.webhookAction)
	g.POST("/webhooks/:id/enable", c.webhookAction)
	g.POST("/webhooks/:id/rotate-secret", c.rotateWebhookSecret)
	g.POST("/webhooks/:id/test", c.testWebhook)
	g.POST("/webhooks/:id/recover", c.recoverWebhook)
	g.GET("/webhooks/:id/edit", c.editWebhookPage)
	g.POST("/webhooks/:id/edit", c.editWebhook)
	g.GET("/webhooks/:id/delete", c.deleteWebhookPage)
	g.POST("/webhooks/:id/delete", c.deleteWebhook)
	g.GET("/webhooks/:id/deliveries/:delivery", c.deliveryPage)
	g.POST("/webhooks/:id/deliveries/:delivery/resend", c.resendDelivery)
}

// webhookForm is the create or the edit form as submitted.
type webhookForm struct {
	URL, Description, Headers, RateLimit, Filters string
	Events                                        []string
	// Type is the destination's kind (create form): https (default) or a broker — rabbitmq, nats, mqtt — whose
	// settings are Exchange and RoutingKey, Subject, or Topic.
	Type, Exchange, RoutingKey, Subject, Topic string
	// ClearHeaders (edit form) removes every static header.
	ClearHeaders bool
	Nonce        string
}

func readWebhookForm(ec echo.Context) webhookForm {
	f := webhookForm{URL: strings.TrimSpace(ec.FormValue("url")), Description: strings.TrimSpace(ec.FormValue("description")),
		Headers: ec.FormValue("headers"), RateLimit: strings.TrimSpace(ec.FormValue("rate_limit")),
		Filters: strings.TrimSpace(ec.FormValue("filters")), ClearHeaders: ec.FormValue("clear_headers") != "",
		Nonce: ec.FormValue("nonce"), Type: strings.TrimSpace(ec.FormValue("type")),
		Exchange: strings.TrimSpace(ec.FormValue("exchange")), RoutingKey: strings.TrimSpace(ec.FormValue("routing_key")),
		Subject: strings.TrimSpace(ec.FormValue("subject")), Topic: strings.TrimSpace(ec.FormValue("topic"))}
	if params, err := ec.FormParams(); err == nil {
		f.Events = params["events"]
	}
	return f
}

// document is the create form as the API's WebhookCreate body. Static headers are typed one per line as
// "Name: value"; filters as the API's JSON array.
func (f webhookForm) document() (map[string]any, error) {
	var bad problem.Fields
	doc := f.common()
	if headers := f.headers(&bad); len(headers) > 0 {
		doc["headers"] = headers
	}
	if f.RateLimit != "" {
		doc["rate_limit"] = f.rateLimit(&bad)
	}
	if f.Filters != "" {
		doc["filters"] = f.filters(&bad)
	}
	if f.Type != "" && f.Type != "https" {
		doc["type"] = f.Type
		// Only the chosen broker's settings are sent: the form shows every broker's fields, the API takes one.
		settings := map[string]any{}
		switch f.Type {
		case "rabbitmq":
			putNonEmpty(settings, "exchange", f.Exchange)
			putNonEmpty(settings, "routing_key", f.RoutingKey)
		case "nats":
			putNonEmpty(settings, "subject", f.Subject)
		case "mqtt":
			putNonEmpty(settings, "topic", f.Topic)
		}
		if len(settings) > 0 {
			doc[f.Type] = settings
		}
	}
	return doc, bad.Err()
}

func putNonEmpty(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// update is the edit form as the API's WebhookUpdate body: every field is sent, so that the endpoint becomes what
// the form shows — an empty rate limit removes the limit, empty filters remove them — except the static headers,
// whose values are never shown: they are replaced when some are typed, removed with ClearHeaders, else kept.
func (f webhookForm) update() (map[string]any, error) {
	var bad problem.Fields
	doc := f.common()
	doc["description"] = f.Description
	switch headers := f.headers(&bad); {
	case f.ClearHeaders:
		doc["headers"] = map[string]string{}
	case len(headers) > 0:
		doc["headers"] = headers
	}
	doc["rate_limit"] = nil
	if f.RateLimit != "" {
		doc["rate_limit"] = f.rateLimit(&bad)
	}
	doc["filters"] = []any{}
	if f.Filters != "" {
		doc["filters"] = f.filters(&bad)
	}
	return doc, bad.Err()
}

// common is what both forms send alike: the URL, the events and a description.
func (f webhookForm) common() map[string]any {
	doc := map[string]any{"url": f.URL, "events": f.Events}
	if f.Events == nil {
		doc["events"] = []string{}
	}
	if f.Description != "" {
		doc["description"] = f.Description
	}
	return doc
}

func (f webhookForm) headers(bad *problem.Fields) map[string]string {
	headers := map[string]string{}
	for line := range strings.SplitSeq(strings.ReplaceAll(f.Headers, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			bad.Add("/headers", "write one header a line as Name: value")
			break
		}
		headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	return headers
}

func (f webhookForm) rateLimit(bad *problem.Fields) int {
	n, err := strconv.Atoi(f.RateLimit)
	if err != nil {
		bad.Add("/rate_limit", "must be a whole number")
	}
	return n
}

func (f webhookForm) filters(bad *problem.Fields) any {
	var filters any
	if err := json.Unmarshal([]byte(f.Filters), &filters); err != nil {
		bad.Add("/filters", `write the filters as a JSON array, such as [{"pointer": "/action", "op": "equals", "value": "opened"}]`)
	}
	return filters
}

// webhookFieldsData is what the webhook-fields template (shared by the create and the edit form) shows.
type webhookFieldsData struct {
	Form      webhookForm
	Errors    map[string]string
	Catalogue catalogue
	// HeaderNames are the names of the endpoint's static headers (edit form).
	HeaderNames []string
	Edit        bool
}

// webhooksData is what the webhooks page shows.
type webhooksData struct {
	Endpoints []webhook.Endpoint
	Before    string
	Next      string
	Catalogue catalogue
	Form      webhookForm
	Errors    map[string]string
	// Created and Secret are set in the response that created the endpoint: the one time its secret is shown.
	Created *webhook.Endpoint
	Secret  string
}

// catalogue is the event types a workspace can subscribe to, grouped by family.
type catalogue struct {
	Families []family
}

type family struct {
	Name  string
	Types []eventType
}

type eventType struct {
	events.Type
	ExampleJSON string
}

// catalogueOf is what the workspace can subscribe to (archived types of its own refuse new events: they are left
// out).
func (c *Console) catalogueOf(ec echo.Context, workspaceID string) (catalogue, error) {
	var out catalogue
	types, err := c.automation.Types(ec.Request().Context(), workspaceID)
	if err != nil {
		return out, err
	}
	for _, t := range types {
		if t.Archived {
			continue
		}
		if n := len(out.Families); n == 0 || out.Families[n-1].Name != t.Family {
			out.Families = append(out.Families, family{Name: t.Family})
		}
		example, _ := json.MarshalIndent(t.Example, "", "  ")
		f := &out.Families[len(out.Families)-1]
		f.Types = append(f.Types, eventType{Type: t, ExampleJSON: string(example)})
	}
	return out, nil
}

// typeNames are the names of the event types a workspace sees.
func (c *Console) typeNames(ec echo.Context, workspaceID string) ([]string, error) {
	types, err := c.automation.Types(ec.Request().Context(), workspaceID)
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.Name
	}
	return names, err
}

const webhooksPageSize = 25

func (c *Console) webhooksPage(ec echo.Context) error {
	notice := ""
	if ec.QueryParam("deleted") == "1" {
		notice = "The endpoint was deleted with its delivery log."
	}
	return c.renderWebhooks(ec, http.StatusOK, notice, "", webhookForm{}, nil, nil, "")
}

func (c *Console) renderWebhooks(ec echo.Context, status int, notice, errMsg string, form webhookForm, errs map[string]string,
	created *webhook.Endpoint, secret string) error {
	ses := sessionFrom(ec)
	d := webhooksData{Before: ec.QueryParam("before"), Form: form, Errors: errs, Created: created, Secret: secret}
	if d.Form.Nonce == "" {
		d.Form.Nonce = randomToken()
	}
	if ses.Workspace != nil {
		var err error
		if d.Catalogue, err = c.catalogueOf(ec, ses.Workspace.ID); err != nil {
			return err
		}
		es, more, err := c.webhooks.List(ec.Request().Context(), ses.Workspace.ID, store.Page{Limit: webhooksPageSize, Before: d.Before})
		if err != nil {
			return err
		}
		d.Endpoints = es
		if more {
			d.Next = es[len(es)-1].ID
		}
	}
	return c.render(ec, status, "webhooks", page{Title: "Webhooks", Session: ses, Notice: notice, Error: errMsg, Data: d})
}

const webhookFormMessage = "The endpoint was not created: correct the fields marked below."

// createWebhook registers an endpoint and shows its signing secret in this response only. A resubmitted form finds
// its nonce spent and creates nothing.
func (c *Console) createWebhook(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	form := readWebhookForm(ec)
	fail := func(err error) error {
		if errs := fieldErrors(err); errs != nil {
			return c.renderWebhooks(ec, http.StatusUnprocessableEntity, "", webhookFormMessage, form, errs, nil, "")
		}
		return err
	}
	doc, err := form.document()
	if err != nil {
		return fail(err)
	}
	var body gen.WebhookCreate
	if err := requestBody("WebhookCreate", doc, &body); err != nil {
		return fail(err)
	}
	if form.Nonce == "" || !c.created.Claim(form.Nonce) {
		return c.renderWebhooks(ec, http.StatusConflict, "", "This form was already submitted, so no second endpoint was "+
			"created. Its secret was shown once; if you lost it, rotate it on the endpoint's page.", webhookForm{}, nil, nil, "")
	}
	e, secret, err := c.webhooks.Create(ec.Request().Context(), ses.Workspace.ID, handlers.NewEndpointOf(body))
	if err != nil {
		c.created.Release(form.Nonce)
		form.Nonce = ""
		return fail(err)
	}
	c.log.Info("console created webhook endpoint", "webhook_id", e.ID, "workspace_id", e.WorkspaceID, "user_id", ses.UserID)
	return c.renderWebhooks(ec, http.StatusCreated, "", "", webhookForm{}, nil, &e, secret)
}

// webhookEditData is what the edit page of an endpoint shows.
type webhookEditData struct {
	Endpoint  webhook.Endpoint
	Form      webhookForm
	Errors    map[string]string
	Catalogue catalogue
}

// editWebhookPage shows an endpoint's edit form, filled with what it is now (its header values are never shown).
func (c *Console) editWebhookPage(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	form := webhookForm{URL: e.URL, Description: e.Description, Events: e.Events}
	if e.RateLimit != nil {
		form.RateLimit = strconv.Itoa(*e.RateLimit)
	}
	if len(e.Filters) > 0 {
		b, err := json.MarshalIndent(e.Filters, "", "  ")
		if err != nil {
			return err
		}
		form.Filters = string(b)
	}
	return c.renderEditWebhook(ec, http.StatusOK, "", e, form, nil)
}

func (c *Console) renderEditWebhook(ec echo.Context, status int, errMsg string, w webhook.Endpoint, form webhookForm, errs map[string]string) error {
	cat, err := c.catalogueOf(ec, sessionFrom(ec).Workspace.ID)
	if err != nil {
		return err
	}
	return c.render(ec, status, "webhook-edit", page{Title: "Edit " + w.URL, Session: sessionFrom(ec), Error: errMsg,
		Data: webhookEditData{Endpoint: w, Form: form, Errors: errs, Catalogue: cat}})
}

// editWebhook changes an endpoint as the API's PATCH does, through the same service.
func (c *Console) editWebhook(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	form := readWebhookForm(ec)
	fail := func(err error) error {
		if errs := fieldErrors(err); errs != nil {
			return c.renderEditWebhook(ec, http.StatusUnprocessableEntity, "The endpoint was not saved: correct the fields marked below.",
				e, form, errs)
		}
		return err
	}
	doc, err := form.update()
	if err != nil {
		return fail(err)
	}
	var body gen.WebhookUpdate
	if err := requestBody("WebhookUpdate", doc, &body); err != nil {
		return fail(err)
	}
	if _, err := c.webhooks.Update(ec.Request().Context(), e.WorkspaceID, e.ID, handlers.EndpointChangeOf(body)); err != nil {
		return fail(err)
	}
	c.log.Info("console changed webhook endpoint", "webhook_id", e.ID, "workspace_id", e.WorkspaceID, "user_id", sessionFrom(ec).UserID)
	return ec.Redirect(http.StatusSeeOther, "/user/webhooks/"+url.PathEscape(e.ID)+"?done=edit")
}

// workspaceEndpoint is the endpoint of the path's :id in the session's workspace; found is false when it answered
// 404.
func (c *Console) workspaceEndpoint(ec echo.Context) (e webhook.Endpoint, found bool, err error) {
	const missing = "There is no such webhook endpoint in this workspace."
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return e, false, c.notFoundPage(ec, missing)
	}
	e, err = c.webhooks.Get(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if isNotFound(err) {
		return e, false, c.notFoundPage(ec, missing)
	}
	return e, err == nil, err
}

// webhookData is what an endpoint's page shows.
type webhookData struct {
	Endpoint webhook.Endpoint
	TZ       string
	Health   webhook.Health
	Chart    barChart
	// Deliveries is a page of the delivery log, with its filters.
	Deliveries   []webhook.Delivery
	Status, Type string
	Before, Next string
	Statuses     []string
	Types        []string
	Test         *webhook.TestResult
	TestType     string
	Secret       string
	RecoverSince string
	// DisabledWhy says why Switchboard disabled the endpoint ("" unless it did).
	DisabledWhy string
}

// disabledReasons say why Switchboard disabled an endpoint.
var disabledReasons = map[string]string{
	"gone":    "the receiver answered 410 Gone",
	"failing": "its deliveries kept failing without a success",
}

// healthWindow is the span of an endpoint's health on its page.
const healthWindow = 24 * time.Hour

var deliveryStatuses = []string{store.DeliveryPending, store.DeliverySucceeded, store.DeliveryFailed, store.DeliverySkipped}

func (c *Console) webhookPage(ec echo.Context) error {
	notice := ""
	switch q := ec.QueryParams(); {
	case q.Get("done") != "":
		notice = webhookNotices[q.Get("done")]
	case q.Get("resent") != "":
		notice = "The delivery was queued again and goes out now, with the same webhook-id."
	}
	return c.renderWebhook(ec, http.StatusOK, notice, "", func(*webhookData) {})
}

// webhookNotices confirm the actions of an endpoint's page (named, so that a crafted link cannot make the page say
// anything else).
var webhookNotices = map[string]string{
	"edit":   "The endpoint was saved; deliveries from now on follow it.",
	"pause":  "The endpoint is paused: new deliveries wait until you resume it.",
	"resume": "The endpoint is active again; what waited goes out now.",
	"enable": "The endpoint is enabled again.",
}

// renderWebhook shows the endpoint of the path; edit sets what the action before it produced.
func (c *Console) renderWebhook(ec echo.Context, status int, notice, errMsg string, edit func(*webhookData)) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	ses := sessionFrom(ec)
	ctx := ec.Request().Context()
	q := ec.QueryParams()
	// The zone comes with the query of a page and with the form of an action answered by the page.
	d := webhookData{Endpoint: e, TZ: ec.FormValue("tz"), Status: q.Get("status"), Type: q.Get("event_type"),
		Before: q.Get("before"), Statuses: deliveryStatuses}
	if _, err := zone(d.TZ); err != nil || d.TZ == "" {
		d.TZ = "UTC"
	}
	loc, _ := zone(d.TZ)
	if e.Status == store.EndpointDisabled && e.DisabledReason != nil {
		d.DisabledWhy = disabledReasons[*e.DisabledReason]
	}
	if d.Types, err = c.typeNames(ec, e.WorkspaceID); err != nil {
		return err
	}
	if d.Health, err = c.webhooks.Health(ctx, e.WorkspaceID, e.ID, healthWindow); err != nil {
		return err
	}
	points := make([]chartPoint, len(d.Health.Hours))
	for i, h := range d.Health.Hours {
		points[i] = chartPoint{Start: h.Start, Lower: int64(h.Succeeded), Upper: int64(h.Failed),
			Title: fmt.Sprintf("%s: %d succeeded, %d failed", h.Start.In(loc).Format("Mon 15:04"), h.Succeeded, h.Failed)}
	}
	d.Chart = newBarChart(points, func(t time.Time) string { return t.In(loc).Format("15:04") },
		fmt.Sprintf("Attempts by hour over the last day: %d succeeded, %d failed", d.Health.Succeeded, d.Health.Attempts-d.Health.Succeeded),
		"No delivery attempts in the last day")
	d.Chart.Class = "health"
	since := time.Now().Add(-time.Hour).In(loc)
	d.RecoverSince = since.Format(datetimeLocal)
	d.Deliveries, d.Next, err = c.deliveriesPage(ec, e, d.Status, d.Type, d.Before)
	if err != nil {
		return err
	}
	edit(&d)
	return c.render(ec, status, "webhook", page{Title: "Webhook " + e.URL, Session: ses, Notice: notice, Error: errMsg, Data: d})
}

// deliveriesPage is a page of the endpoint's delivery log with the filters, and the cursor of the next page.
func (c *Console) deliveriesPage(ec echo.Context, e webhook.Endpoint, status, eventType, before string) ([]webhook.Delivery, string, error) {
	ds, more, err := c.webhooks.Deliveries(ec.Request().Context(), e.WorkspaceID, e.ID,
		webhook.DeliveryFilter{Status: status, EventType: eventType}, store.Page{Limit: webhooksPageSize, Before: before})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more {
		next = ds[len(ds)-1].ID
	}
	return ds, next, nil
}

// webhookPath is the endpoint's page, with the zone of the page kept.
func webhookPath(ec echo.Context, id string, query ...string) string {
	q := url.Values{}
	if tz := ec.FormValue("tz"); tz != "" {
		q.Set("tz", tz)
	}
	for i := 0; i+1 < len(query); i += 2 {
		q.Set(query[i], query[i+1])
	}
	return "/user/webhooks/" + url.PathEscape(id) + "?" + q.Encode()
}

// webhookAction pauses, resumes or enables the endpoint (the last segment of the path says which).
func (c *Console) webhookAction(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	ctx := ec.Request().Context()
	action := ec.Path()[strings.LastIndex(ec.Path(), "/")+1:]
	switch action {
	case "pause":
		_, err = c.webhooks.Pause(ctx, e.WorkspaceID, e.ID)
	case "resume":
		_, err = c.webhooks.Resume(ctx, e.WorkspaceID, e.ID)
	case "enable":
		_, err = c.webhooks.Enable(ctx, e.WorkspaceID, e.ID, nil)
	}
	if p := problemOf(err); p != nil {
		return c.renderWebhook(ec, p.Status(), "", p.Detail, func(*webhookData) {})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, webhookPath(ec, e.ID, "done", action))
}

// rotateWebhookSecret gives the endpoint a new secret, shown in this response only; the old one signs beside it for
// a day, so receivers can switch without losing a delivery.
func (c *Console) rotateWebhookSecret(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	_, secret, err := c.webhooks.RotateSecret(ec.Request().Context(), e.WorkspaceID, e.ID, nil)
	if err != nil {
		return err
	}
	c.log.Info("console rotated webhook secret", "webhook_id", e.ID, "workspace_id", e.WorkspaceID)
	return c.renderWebhook(ec, http.StatusOK, "", "", func(d *webhookData) { d.Secret = secret })
}

// testWebhook sends one signed event of the chosen type now and shows the answer.
func (c *Console) testWebhook(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	eventType := ec.FormValue("event_type")
	res, err := c.webhooks.Test(ec.Request().Context(), e.WorkspaceID, e.ID, eventType)
	if p := problemOf(err); p != nil {
		return c.renderWebhook(ec, p.Status(), "", problemText(p), func(*webhookData) {})
	}
	if err != nil {
		return err
	}
	return c.renderWebhook(ec, http.StatusOK, "", "", func(d *webhookData) { d.Test, d.TestType = &res, eventType })
}

// problemText is what a person reads of a problem: its detail, and its first field's.
func problemText(p *problem.Error) string {
	if len(p.Fields) > 0 {
		return p.Detail + " " + strings.TrimPrefix(p.Fields[0].Pointer, "/") + ": " + p.Fields[0].Detail
	}
	return p.Detail
}

// recoverWebhook queues again what failed or was skipped in a window typed in the browser's zone.
func (c *Console) recoverWebhook(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	loc, err := zone(ec.FormValue("tz"))
	if err != nil {
		loc = time.UTC
	}
	since, err := time.ParseInLocation(datetimeLocal, ec.FormValue("since"), loc)
	if err != nil {
		return c.renderWebhook(ec, http.StatusUnprocessableEntity, "", "Give the start of the time range to recover.", func(*webhookData) {})
	}
	var until *time.Time
	if v := ec.FormValue("until"); v != "" {
		t, err := time.ParseInLocation(datetimeLocal, v, loc)
		if err != nil {
			return c.renderWebhook(ec, http.StatusUnprocessableEntity, "", "The end of the time range is not a date and time.", func(*webhookData) {})
		}
		until = &t
	}
	r, err := c.webhooks.Recover(ec.Request().Context(), e.WorkspaceID, e.ID, since, until)
	if p := problemOf(err); p != nil {
		return c.renderWebhook(ec, p.Status(), "", problemText(p), func(*webhookData) {})
	}
	if err != nil {
		return err
	}
	return c.renderWebhook(ec, http.StatusOK, fmt.Sprintf("%d failed or skipped deliveries from %s to %s were queued again.",
		r.Queued, r.Since.In(loc).Format("2 Jan 15:04"), r.Until.In(loc).Format("2 Jan 15:04 MST")), "", func(*webhookData) {})
}

func (c *Console) deleteWebhookPage(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	return c.render(ec, http.StatusOK, "webhook-delete", page{Title: "Delete webhook", Session: sessionFrom(ec), Data: e})
}

func (c *Console) deleteWebhook(ec echo.Context) error {
	e, found, err := c.workspaceEndpoint(ec)
	if !found {
		return err
	}
	if err := c.webhooks.Delete(ec.Request().Context(), e.WorkspaceID, e.ID); err != nil && !isNotFound(err) {
		return err
	}
	c.log.Info("console deleted webhook endpoint", "webhook_id", e.ID, "workspace_id", e.WorkspaceID)
	return ec.Redirect(http.StatusSeeOther, "/user/webhooks?deleted=1")
}

// deliveryData is what a delivery's page shows.
type deliveryData struct {
	Endpoint webhook.Endpoint
	Delivery webhook.Delivery
	Attempts []attemptView
	Event    string
	TZ       string
}

type attemptView struct {
	webhook.Attempt
	Request *webhook.SignedRequest
	// RequestText is the request as HTTP text, for reading and copying.
	RequestText string
}

// workspaceDelivery is the delivery of the path's :delivery, of the endpoint of :id; found is false when it answered
// 404.
func (c *Console) workspaceDelivery(ec echo.Context) (e webhook.Endpoint, d webhook.DeliveryDetail, found bool, err error) {
	if e, found, err = c.workspaceEndpoint(ec); !found {
		return e, d, false, err
	}
	d, err = c.webhooks.Delivery(ec.Request().Context(), e.WorkspaceID, ec.Param("delivery"))
	if isNotFound(err) || err == nil && d.Delivery.EndpointID != e.ID {
		return e, d, false, c.notFoundPage(ec, "There is no such delivery of this endpoint.")
	}
	return e, d, err == nil, err
}

func (c *Console) deliveryPage(ec echo.Context) error {
	e, d, found, err := c.workspaceDelivery(ec)
	if !found {
		return err
	}
	data := deliveryData{Endpoint: e, Delivery: d.Delivery, TZ: ec.QueryParam("tz")}
	if _, err := zone(data.TZ); err != nil || data.TZ == "" {
		data.TZ = "UTC"
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(mustJSON(webhook.EnvelopeOf(d.Event))), "", "  "); err == nil {
		data.Event = pretty.String()
	}
	for i := len(d.Attempts) - 1; i >= 0; i-- { // newest first
		a := attemptView{Attempt: d.Attempts[i]}
		req, ok, err := c.webhooks.Request(e, d, a.Attempt)
		if err != nil {
			return err
		}
		if ok {
			a.Request, a.RequestText = &req, requestText(req)
		}
		data.Attempts = append(data.Attempts, a)
	}
	notice := ""
	if ec.QueryParam("resent") == "1" {
		notice = "The delivery was queued again and goes out now, with the same webhook-id. Reload to see the attempt."
	}
	return c.render(ec, http.StatusOK, "delivery", page{Title: "Delivery " + d.Delivery.ID, Session: sessionFrom(ec), Notice: notice, Data: data})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// requestText writes a signed request as HTTP/1.1 text; hidden header values are left out.
func requestText(r webhook.SignedRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL)
	for _, h := range r.Headers {
		if h.Hidden {
			fmt.Fprintf(&b, "%s: (set on the endpoint; not shown)\n", h.Name)
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", h.Name, h.Value)
	}
	b.WriteString("\n")
	b.Write(r.Body)
	return b.String()
}

// resendDelivery queues the delivery again now, whatever its status (the API's redeliver).
func (c *Console) resendDelivery(ec echo.Context) error {
	e, d, found, err := c.workspaceDelivery(ec)
	if !found {
		return err
	}
	if _, err := c.webhooks.Redeliver(ec.Request().Context(), e.WorkspaceID, d.Delivery.ID); err != nil {
		if p := problemOf(err); p != nil {
			return c.render(ec, p.Status(), "error", page{Title: "Not resent", Session: sessionFrom(ec), Error: p.Detail})
		}
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/webhooks/"+url.PathEscape(e.ID)+"/deliveries/"+url.PathEscape(d.Delivery.ID)+"?resent=1")
}

// secretView is what the webhook-secret template shows; actionView one button of an endpoint's page.
type (
	secretView struct{ Secret, ID string }
	actionView struct{ ID, Action, Label, CSRF, TZ string }
)

func init() {
	for name, fn := range map[string]any{
		"secretView": func(secret, id string) secretView { return secretView{secret, id} },
		"webhookFields": func(f webhookForm, errs map[string]string, cat catalogue) webhookFieldsData {
			return webhookFieldsData{Form: f, Errors: errs, Catalogue: cat}
		},
		"webhookEditFields": func(f webhookForm, errs map[string]string, cat catalogue, headerNames []string) webhookFieldsData {
			return webhookFieldsData{Form: f, Errors: errs, Catalogue: cat, HeaderNames: headerNames, Edit: true}
		},
		"actionView": func(id, action, label, csrf, tz string) actionView { return actionView{id, action, label, csrf, tz} },
		"has":        slices.Contains[[]string],
		// oneLine is a description of the spec (wrapped over lines) as one line.
		"oneLine": func(s string) string { return strings.Join(strings.Fields(s), " ") },
		// percent writes a share the way people read it: 100 %, 99.5 %, 0 %.
		"percent": func(f float64) string {
			return strings.TrimSuffix(strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64), ".0") + " %"
		},
		"ms": func(d time.Duration) string {
			if d >= time.Second {
				return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
			}
			return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
		},
	} {
		templateFuncs[name] = fn
	}
}
