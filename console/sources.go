package console

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// The Sources pages: the workspace's sources with the create form (the ingest URL shown once), a source's recent
// requests with their verification outcome and the event each produced (replayable to subscribers), and the
// workspace's custom event types. Every change goes through the automation service.

func (c *Console) registerSources(g *echo.Group) {
	g.GET("/sources", c.sourcesPage)
	g.POST("/sources", c.createSource)
	g.POST("/sources/event-types", c.createEventType)
	g.POST("/sources/event-types/archive", c.archiveEventType)
	g.GET("/sources/:id", c.sourcePage)
	g.POST("/sources/:id/replay", c.replayEvent)
	g.POST("/sources/:id/delete", c.deleteSource)
}

// sourceForm is the create form as submitted.
type sourceForm struct {
	Name, EventType, Scheme, Secret, Header, Username, Nonce string
}

// typeForm is the custom event type form as submitted.
type typeForm struct {
	Name, Description, Schema, Example string
}

// sourcesData is what the Sources page shows.
type sourcesData struct {
	Sources []automation.Source
	Types   []events.Type
	Form    sourceForm
	Type    typeForm
	Errors  map[string]string
	// Created and IngestURL are the source this response created and its URL, shown this once.
	Created   *automation.Source
	IngestURL string
	Schemes   []string
}

var sourceSchemes = []string{automation.SchemeNone, automation.SchemeHMAC, automation.SchemeStandardWebhooks,
	automation.SchemeGitHub, automation.SchemeStripe, automation.SchemeShopify, automation.SchemeSlack,
	automation.SchemeBasic, automation.SchemeAPIKey}

// sourceNotices are the messages a redirect back to the Sources page names (fixed texts, so that a crafted link
// cannot put words on the page).
var sourceNotices = map[string]string{
	"type-created":   "The event type was created.",
	"type-archived":  "The event type was archived: it refuses new events.",
	"type-restored":  "The event type was restored.",
	"source-deleted": "The source was deleted; its URL answers 404 now.",
}

func (c *Console) sourcesPage(ec echo.Context) error {
	return c.renderSources(ec, http.StatusOK, sourceNotices[ec.QueryParam("done")], "", sourcesData{})
}

func (c *Console) renderSources(ec echo.Context, status int, notice, errMsg string, d sourcesData) error {
	ses := sessionFrom(ec)
	d.Schemes = sourceSchemes
	if d.Form.Nonce == "" {
		d.Form.Nonce = randomToken()
	}
	if d.Form.Scheme == "" {
		d.Form.Scheme = automation.SchemeNone
	}
	if ses.Workspace != nil {
		ctx := ec.Request().Context()
		srcs, _, err := c.automation.Sources(ctx, ses.Workspace.ID, store.Page{Limit: 100})
		if err != nil {
			return err
		}
		d.Sources = srcs
		types, err := c.automation.Types(ctx, ses.Workspace.ID)
		if err != nil {
			return err
		}
		for _, t := range types {
			if t.WorkspaceID != "" {
				d.Types = append(d.Types, t)
			}
		}
	}
	return c.render(ec, status, "sources", page{Title: "Sources", Session: ses, Notice: notice, Error: errMsg, Data: d})
}

// createSource creates a source from the form and shows its ingest URL once. A resubmitted form finds its nonce
// spent and creates nothing.
func (c *Console) createSource(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	v := func(name string) string { return strings.TrimSpace(ec.FormValue(name)) }
	form := sourceForm{Name: v("name"), EventType: v("event_type"), Scheme: v("scheme"), Secret: ec.FormValue("secret"),
		Header: v("header"), Username: v("username"), Nonce: ec.FormValue("nonce")}
	if form.Nonce == "" || !c.created.Claim(form.Nonce) {
		return ec.Redirect(http.StatusSeeOther, "/user/sources")
	}
	n := automation.NewSource{Name: form.Name, EventType: form.EventType, Verification: automation.Verification{
		Scheme: form.Scheme, Secret: form.Secret, Header: form.Header, Username: form.Username}}
	var errs problem.Fields
	if n.Name == "" {
		errs.Add("/name", "is required")
	}
	var (
		src   automation.Source
		token string
		err   = errs.Err()
	)
	if err == nil {
		src, token, err = c.automation.CreateSource(ec.Request().Context(), ses.Workspace.ID, n)
	}
	if err != nil {
		c.created.Release(form.Nonce)
		if fe := fieldErrors(err); fe != nil {
			form.Nonce, form.Secret = "", ""
			return c.renderSources(ec, http.StatusUnprocessableEntity, "", "The source was not created: correct the fields marked below.",
				sourcesData{Form: form, Errors: fe})
		}
		return err
	}
	return c.renderSources(ec, http.StatusOK, "", "", sourcesData{Created: &src, IngestURL: c.automation.IngestURL(token)})
}

// createEventType adds a custom event type from its form (schema and example as JSON text).
func (c *Console) createEventType(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	form := typeForm{Name: strings.TrimSpace(ec.FormValue("type_name")), Description: strings.TrimSpace(ec.FormValue("description")),
		Schema: ec.FormValue("schema"), Example: ec.FormValue("example")}
	var errs problem.Fields
	n := automation.NewType{Name: form.Name, Description: form.Description}
	for _, f := range []struct {
		pointer, text string
		dst           *map[string]any
	}{{"/schema", form.Schema, &n.Schema}, {"/example", form.Example, &n.Example}} {
		if strings.TrimSpace(f.text) == "" {
			continue
		}
		if json.Unmarshal([]byte(f.text), f.dst) != nil {
			errs.Add(f.pointer, "must be a JSON object")
		}
	}
	if n.Schema == nil {
		n.Schema = map[string]any{"type": "object"}
	}
	if n.Description == "" {
		errs.Add("/description", "is required")
	}
	err := errs.Err()
	if err == nil {
		_, err = c.automation.CreateType(ec.Request().Context(), ses.Workspace.ID, n)
	}
	if err != nil {
		fe := fieldErrors(err)
		if p := problemOf(err); fe == nil && p != nil && p.Code == problem.EventTypeExists {
			fe = map[string]string{"/name": p.Detail}
		}
		if fe == nil {
			return err
		}
		return c.renderSources(ec, http.StatusUnprocessableEntity, "", "The event type was not created: correct the fields marked below.",
			sourcesData{Type: form, Errors: prefixed(fe, "type")})
	}
	return ec.Redirect(http.StatusSeeOther, "/user/sources?done=type-created")
}

// prefixed renames the pointers of a form's errors so that two forms of one page keep theirs apart.
func prefixed(errs map[string]string, form string) map[string]string {
	out := make(map[string]string, len(errs))
	for k, v := range errs {
		out[form+k] = v
	}
	return out
}

// archiveEventType archives or restores a custom event type.
func (c *Console) archiveEventType(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	archived := ec.FormValue("archived") == "true"
	name := ec.FormValue("type_name")
	if _, err := c.automation.UpdateType(ec.Request().Context(), ses.Workspace.ID, name,
		automation.TypeChange{Archived: &archived}); err != nil {
		if isNotFound(err) {
			return c.notFoundPage(ec, "There is no such event type in this workspace.")
		}
		return err
	}
	if archived {
		return ec.Redirect(http.StatusSeeOther, "/user/sources?done=type-archived")
	}
	return ec.Redirect(http.StatusSeeOther, "/user/sources?done=type-restored")
}

// sourceData is what a source's page shows.
type sourceData struct {
	Source   automation.Source
	Requests []automation.SourceRequest
	Outcome  string
	Replayed string
}

func (c *Console) sourcePage(ec echo.Context) error {
	src, found, err := c.workspaceSource(ec)
	if !found {
		return err
	}
	return c.renderSource(ec, src, ec.QueryParam("replayed"))
}

func (c *Console) renderSource(ec echo.Context, src automation.Source, replayed string) error {
	outcome := ec.QueryParam("outcome")
	reqs, _, err := c.automation.Requests(ec.Request().Context(), src.WorkspaceID, src.ID, outcome, store.Page{Limit: 100})
	if err != nil {
		return err
	}
	notice := ""
	if replayed != "" {
		notice = "Replayed to the subscribers as " + replayed + "."
	}
	return c.render(ec, http.StatusOK, "source", page{Title: src.Name, Session: sessionFrom(ec), Notice: notice,
		Data: sourceData{Source: src, Requests: reqs, Outcome: outcome, Replayed: replayed}})
}

// replayEvent publishes an event the source made again, to the subscribers as they are now.
func (c *Console) replayEvent(ec echo.Context) error {
	src, found, err := c.workspaceSource(ec)
	if !found {
		return err
	}
	ev, err := c.automation.Replay(ec.Request().Context(), src.WorkspaceID, src.ID, ec.FormValue("event_id"))
	if err != nil {
		if p := problemOf(err); p != nil {
			return c.render(ec, p.Status(), "error", page{Title: "Not replayed", Session: sessionFrom(ec), Error: p.Detail})
		}
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/sources/"+src.ID+"?replayed="+ev.ID)
}

func (c *Console) deleteSource(ec echo.Context) error {
	src, found, err := c.workspaceSource(ec)
	if !found {
		return err
	}
	if err := c.automation.DeleteSource(ec.Request().Context(), src.WorkspaceID, src.ID); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/sources?done=source-deleted")
}

// workspaceSource is the source of the path's :id in the session's workspace; found is false when it answered 404.
func (c *Console) workspaceSource(ec echo.Context) (src automation.Source, found bool, err error) {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return src, false, c.notFoundPage(ec, "There is no such source in this workspace.")
	}
	src, err = c.automation.Source(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if isNotFound(err) {
		return src, false, c.notFoundPage(ec, "There is no such source in this workspace.")
	}
	return src, err == nil, err
}

func init() {
	// list makes a list of strings in a template (the outcomes of the request log's filter).
	templateFuncs["list"] = func(xs ...string) []string { return xs }
}
