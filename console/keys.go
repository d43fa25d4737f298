package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
)

// keyRow is one line of the key table.
type keyRow struct {
	workspaces.Key
	Masked    string
	Preset    string // preset name, or "" for a custom set
	CreatedBy string // an email, "CLI" or "a former member"
	Status    string
}

// apiData is what the /user/api page shows.
type apiData struct {
	Keys          []keyRow
	RevokedCount  int
	ShowRevoked   bool
	Presets       []workspaces.Preset
	Resources     []apikey.Resource
	BrowserScopes []apikey.BrowserScope
	Expiries      []expiry
	Form          keyForm
	// NewKey and NewSecret are set only in the response that created the key: the one time the secret is shown.
	NewKey    *workspaces.Key
	NewSecret string
	BaseURL   string
	// Instances are the workspace's messaging instances a secret key may be limited to (none without the messaging
	// service, or in a workspace without instances).
	Instances []store.Instance
}

// keyForm is the create form as submitted (kept when it is shown again with an error).
type keyForm struct {
	Name   string
	Preset string
	Expiry string
	Custom map[string]string // resource → "none" | "read" | "write"
	Nonce  string
	// Kind is "secret" or "browser"; Origins one origin a line (or comma-separated); the rest a browser key's job.
	Kind         string
	Origins      string
	BrowserScope string
	Target       string
	DailyQuota   string
	// Instances are the IDs of the instances a secret key is limited to; none means every instance.
	Instances []string
}

type expiry struct {
	Value string
	Label string
	TTL   time.Duration // 0 = never
}

var expiries = []expiry{
	{"30d", "30 days", 30 * 24 * time.Hour},
	{"90d", "90 days", 90 * 24 * time.Hour},
	{"1y", "1 year", 365 * 24 * time.Hour},
	{"never", "Never", 0},
}

func (c *Console) apiPage(ec echo.Context) error {
	return c.renderAPI(ec, http.StatusOK, c.pageNotice(ec), "", keyForm{}, nil, "")
}

// pageNotice confirms what the previous form did. The revoked key is named by ID and looked up in the current
// workspace, so a crafted link cannot make the page say something it did not do.
func (c *Console) pageNotice(ec echo.Context) string {
	ses := sessionFrom(ec)
	switch {
	case ec.QueryParam("workspace-created") == "1":
		return "Your workspace is ready. Create your first API key below."
	case ec.QueryParam("origins") != "" && ses.Workspace != nil:
		k, err := c.workspaces.Key(ec.Request().Context(), ses.Workspace.ID, ec.QueryParam("origins"))
		if err == nil {
			return "The key “" + k.Name + "” now works from: " + originsText(k.Origins) + "."
		}
	case ec.QueryParam("revoked") != "" && ses.Workspace != nil:
		k, err := c.workspaces.Key(ec.Request().Context(), ses.Workspace.ID, ec.QueryParam("revoked"))
		if err == nil && k.RevokedAt != nil {
			return "The key “" + k.Name + "” was revoked. Requests with it now answer 401 api_key_revoked."
		}
	}
	return ""
}

func (c *Console) renderAPI(ec echo.Context, status int, notice, errMsg string, form keyForm, newKey *workspaces.Key, secret string) error {
	ses := sessionFrom(ec)
	p := page{Title: "API keys", Session: ses, Notice: notice, Error: errMsg}
	data := apiData{Presets: workspaces.Presets, Resources: apikey.Resources, BrowserScopes: apikey.BrowserScopes,
		Expiries: expiries, NewKey: newKey,
		NewSecret: secret, BaseURL: c.baseURL(ec), ShowRevoked: ec.QueryParam("show") == "revoked"}
	if form.Preset == "" {
		form = keyForm{Preset: "full", Expiry: "90d", Custom: map[string]string{}, Kind: apikey.KindSecret,
			BrowserScope: apikey.BrowserScopes[0].Name}
	}
	form.Nonce = randomToken()
	data.Form = form
	if ses.Workspace != nil && c.channels != nil {
		insts, _, err := c.channels.List(ec.Request().Context(), ses.Workspace.ID, store.InstanceFilter{},
			store.Page{Limit: workspaces.MaxKeyInstances})
		if err != nil {
			return err
		}
		data.Instances = insts
	}
	if ses.Workspace != nil {
		keys, err := c.workspaces.Keys(ec.Request().Context(), ses.Workspace.ID)
		if err != nil {
			return err
		}
		var creators []string
		for _, k := range keys {
			creators = append(creators, k.CreatedBy)
		}
		emails, err := c.accounts.Emails(ec.Request().Context(), creators)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, k := range keys {
			row := keyRow{Key: k, Masked: apikey.Mask(k.DisplayPrefix, k.Last4), Status: k.Status(now)}
			if pr, ok := workspaces.PresetFor(k.Scopes); ok {
				row.Preset = pr.Name
			}
			switch {
			case k.CreatedBy == workspaces.CreatedByCLI:
				row.CreatedBy = "CLI"
			case emails[k.CreatedBy] != "":
				row.CreatedBy = emails[k.CreatedBy]
			default:
				row.CreatedBy = "a former member"
			}
			if row.Status == "revoked" {
				data.RevokedCount++
				if !data.ShowRevoked {
					continue
				}
			}
			data.Keys = append(data.Keys, row)
		}
	}
	p.Data = data
	return c.render(ec, status, "api", p)
}

// baseURL is where API calls go: the configured public URL, else the host the browser used.
func (c *Console) baseURL(ec echo.Context) string {
	if c.cfg.BaseURL != "" {
		return strings.TrimSuffix(c.cfg.BaseURL, "/")
	}
	return ec.Scheme() + "://" + ec.Request().Host
}

// createKey creates a key in the current workspace and shows its secret in this response only. A resubmitted form
// (reload, double click) finds its nonce already used and creates nothing.
func (c *Console) createKey(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	form := keyForm{Name: strings.TrimSpace(ec.FormValue("name")), Preset: ec.FormValue("preset"),
		Expiry: ec.FormValue("expiry"), Custom: map[string]string{}, Nonce: ec.FormValue("nonce"),
		Kind: ec.FormValue("kind"), Origins: ec.FormValue("origins"), BrowserScope: ec.FormValue("browser_scope"),
		Target: strings.TrimSpace(ec.FormValue("target")), DailyQuota: strings.TrimSpace(ec.FormValue("daily_quota"))}
	if form.Kind == "" {
		form.Kind = apikey.KindSecret
	}
	for _, r := range apikey.Resources {
		form.Custom[r.Name] = ec.FormValue("scope_" + r.Name)
	}
	form.Instances = ec.Request().Form["instances"]
	fail := func(msg string) error {
		return c.renderAPI(ec, http.StatusUnprocessableEntity, "", msg, form, nil, "")
	}
	// The form's own choices are read here; what they ask for is judged by the service.
	n := workspaces.NewKey{WorkspaceID: ses.Workspace.ID, Name: form.Name, Preset: form.Preset, CreatedBy: ses.UserID,
		Kind: form.Kind, Origins: splitOrigins(form.Origins), Instances: form.Instances}
	if form.Kind == apikey.KindBrowser {
		n.Preset, n.BrowserScope, n.Target, n.Instances = "", form.BrowserScope, form.Target, nil
		if form.DailyQuota != "" {
			q, err := strconv.Atoi(form.DailyQuota)
			if err != nil {
				return fail("The daily quota is a whole number of links.")
			}
			n.DailyQuota = q
		}
	}
	switch {
	case form.Kind == apikey.KindBrowser:
	case form.Preset == "":
		return fail(chooseAccess)
	case form.Preset == "custom":
		scopes, ok := customScopes(form.Custom)
		if !ok {
			return fail("Choose none, read or write for each resource.")
		}
		n.Preset, n.Scopes = "", scopes
	}
	exp := slices.IndexFunc(expiries, func(e expiry) bool { return e.Value == form.Expiry })
	if exp < 0 {
		return fail("Choose when the key expires.")
	}
	n.ExpiresIn = expiries[exp].TTL
	if form.Nonce == "" {
		return fail("This form has expired. Reload the page and try again.")
	}
	if !c.created.Claim(form.Nonce) {
		return c.renderAPI(ec, http.StatusConflict, "", "This form was already submitted, so no second key was created. "+
			"The secret of the key it created was shown once and cannot be shown again; if you lost it, revoke that key and create a new one.",
			keyForm{}, nil, "")
	}
	k, secret, err := c.workspaces.CreateKey(ec.Request().Context(), n)
	if err != nil {
		// Nothing was created: the form, corrected, may be sent again.
		c.created.Release(form.Nonce)
		if msg := keyFormMessage(err, n.Scopes); msg != "" {
			return fail(msg)
		}
		return err
	}
	c.log.Info("console created API key", "key_id", k.ID, "workspace_id", k.WorkspaceID, "user_id", ses.UserID)
	return c.renderAPI(ec, http.StatusCreated, "", "", keyForm{}, &k, secret)
}

const chooseAccess = "Choose what the key may do."

// customScopes turns the custom matrix (resource → none, read or write) into scopes; false when a level is none of
// those. Whether the resource can be written is the service's to judge.
func customScopes(levels map[string]string) ([]string, bool) {
	var scopes []string
	for _, r := range apikey.Resources {
		switch level := levels[r.Name]; level {
		case "", "none":
		case "read", "write":
			scopes = append(scopes, r.Name+":"+level)
		default:
			return nil, false
		}
	}
	return scopes, true
}

// keyFormMessage tells what to correct in the create form when the service refused the key (the first invalid field
// of the form, in its order), or "" when err is no refusal. scopes are the custom scopes asked for.
func keyFormMessage(err error, scopes []string) string {
	var p *problem.Error
	if !errors.As(err, &p) || p.Code != problem.ValidationFailed || len(p.Fields) == 0 {
		return ""
	}
	f := p.Fields[0]
	switch {
	case f.Pointer == workspaces.FieldName:
		return fmt.Sprintf("Give the key a name of 1 to %d characters, so you know later where it is used.",
			workspaces.MaxNameLength)
	case f.Pointer == workspaces.FieldPreset:
		return chooseAccess
	case strings.HasPrefix(f.Pointer, workspaces.FieldInstances):
		return fmt.Sprintf("Limit the key to instances of this workspace (at most %d): %s.", workspaces.MaxKeyInstances, f.Detail)
	case strings.HasPrefix(f.Pointer, workspaces.FieldOrigins):
		return "Allowed origins: " + f.Detail + ". Write one origin a line, like https://www.example.com or https://*.example.com."
	case f.Pointer == workspaces.FieldBrowserScope:
		return "Choose what the browser key may do."
	case f.Pointer == workspaces.FieldTarget:
		return "The browser key's target: " + f.Detail + "."
	case f.Pointer == workspaces.FieldDailyQuota:
		return "The daily quota: " + f.Detail + "."
	case f.Pointer == workspaces.FieldScopes:
		return "A custom key needs at least one permission: choose read or write for a resource."
	case strings.HasPrefix(f.Pointer, workspaces.FieldScopes+"/"):
		// The matrix offers read and write on known resources only, so a refused scope is a write where there is
		// nothing to write.
		if i, err := strconv.Atoi(strings.TrimPrefix(f.Pointer, workspaces.FieldScopes+"/")); err == nil && i < len(scopes) {
			resource, _, _ := strings.Cut(scopes[i], ":")
			return "“" + resource + "” can only be read."
		}
	}
	return f.Detail
}

// originsData is what the page that edits a key's origins shows.
type originsData struct {
	Key keyRow
	// Origins is the text of the form: the key's origins one a line, or what was submitted.
	Origins string
}

// originsPage shows the form that changes a key's allowed origins.
func (c *Console) originsPage(ec echo.Context) error {
	return c.renderOrigins(ec, http.StatusOK, "", nil)
}

// renderOrigins shows the origins form of the key named in the path, with the submitted text and errMsg when
// submitted is not nil.
func (c *Console) renderOrigins(ec echo.Context, status int, errMsg string, submitted *string) error {
	ses := sessionFrom(ec)
	row, found, err := c.pathKey(ec)
	if !found {
		return err
	}
	d := originsData{Key: row, Origins: strings.Join(row.Origins, "\n")}
	if submitted != nil {
		d.Origins = *submitted
	}
	return c.render(ec, status, "key-origins", page{Title: "Origins of " + row.Name, Session: ses, Error: errMsg, Data: d})
}

// setOrigins replaces a key's allowed origins; the service judges them as it does when a key is made.
func (c *Console) setOrigins(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return c.notFound(ec)
	}
	text := ec.FormValue("origins")
	k, err := c.workspaces.SetKeyOrigins(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"), splitOrigins(text))
	var p *problem.Error
	switch {
	case isNotFound(err):
		return c.notFound(ec)
	case errors.As(err, &p) && p.Code == problem.OriginsRequired:
		return c.renderOrigins(ec, http.StatusUnprocessableEntity,
			"A browser key keeps at least one origin. To stop it everywhere, revoke it.", &text)
	case errors.As(err, &p) && p.Code == problem.Conflict:
		return c.renderOrigins(ec, http.StatusConflict, "This key is revoked; its origins are not changed.", &text)
	case err != nil:
		if msg := keyFormMessage(err, nil); msg != "" {
			return c.renderOrigins(ec, http.StatusUnprocessableEntity, msg, &text)
		}
		return err
	}
	c.log.Info("console changed the origins of an API key", "key_id", k.ID, "workspace_id", k.WorkspaceID, "user_id", ses.UserID)
	return ec.Redirect(http.StatusSeeOther, "/user/api?origins="+url.QueryEscape(k.ID))
}

// splitOrigins reads the origins of a form: one a line, or comma-separated.
func splitOrigins(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
}

// pathKey is the key named in the path, of the workspace the console shows. When found is false, err is what to
// return: the not-found page (another workspace's key, or none) or a failure.
func (c *Console) pathKey(ec echo.Context) (row keyRow, found bool, err error) {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return keyRow{}, false, c.notFound(ec)
	}
	k, err := c.workspaces.Key(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if isNotFound(err) {
		return keyRow{}, false, c.notFound(ec)
	}
	if err != nil {
		return keyRow{}, false, err
	}
	return keyRow{Key: k, Masked: apikey.Mask(k.DisplayPrefix, k.Last4), Status: k.Status(time.Now())}, true, nil
}

// revokePage asks for confirmation, naming the key.
func (c *Console) revokePage(ec echo.Context) error {
	row, found, err := c.pathKey(ec)
	if !found {
		return err
	}
	return c.render(ec, http.StatusOK, "revoke", page{Title: "Revoke " + row.Name, Session: sessionFrom(ec), Data: row})
}

func (c *Console) revokeKey(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return c.notFound(ec)
	}
	k, err := c.workspaces.RevokeWorkspaceKey(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if isNotFound(err) {
		return c.notFound(ec)
	}
	if err != nil {
		return err
	}
	c.log.Info("console revoked API key", "key_id", k.ID, "workspace_id", k.WorkspaceID, "user_id", ses.UserID)
	return ec.Redirect(http.StatusSeeOther, "/user/api?revoked="+url.QueryEscape(k.ID))
}

// originsText names a key's origins in a sentence.
func originsText(origins []string) string {
	if len(origins) == 0 {
		return "servers only (no origins)"
	}
	return strings.Join(origins, ", ")
}

func (c *Console) notFound(ec echo.Context) error {
	return c.render(ec, http.StatusNotFound, "error", page{Title: "Not found", Session: sessionFrom(ec),
		Error: "There is no such key in this workspace."})
}

// isNotFound reports whether the service answered that the object does not exist.
func isNotFound(err error) bool {
	var p *problem.Error
	return errors.As(err, &p) && p.Code == problem.NotFound
}
