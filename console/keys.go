package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
)

// keyRow is one line of the key table.
type keyRow struct {
	store.APIKey
	Masked    string
	Preset    string // preset name, or "" for a custom set
	CreatedBy string // an email, "CLI" or "a former member"
	Status    string
}

// apiData is what the /user/api page shows.
type apiData struct {
	Keys         []keyRow
	RevokedCount int
	ShowRevoked  bool
	Presets      []apikey.Preset
	Resources    []apikey.Resource
	Expiries     []expiry
	Form         keyForm
	// NewKey and NewSecret are set only in the response that created the key: the one time the secret is shown.
	NewKey    *store.APIKey
	NewSecret string
	BaseURL   string
}

// keyForm is the create form as submitted (kept when it is shown again with an error).
type keyForm struct {
	Name   string
	Preset string
	Expiry string
	Custom map[string]string // resource → "none" | "read" | "write"
	Nonce  string
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
	case ec.QueryParam("revoked") != "" && ses.Workspace != nil:
		k, err := c.db.APIKeys.Get(ec.Request().Context(), ses.Workspace.ID, ec.QueryParam("revoked"))
		if err == nil && k.RevokedAt != nil {
			return "The key “" + k.Name + "” was revoked. Requests with it now answer 401 api_key_revoked."
		}
	}
	return ""
}

func (c *Console) renderAPI(ec echo.Context, status int, notice, errMsg string, form keyForm, newKey *store.APIKey, secret string) error {
	ses := sessionFrom(ec)
	p := page{Title: "API keys", Session: ses, Notice: notice, Error: errMsg}
	data := apiData{Presets: apikey.Presets, Resources: apikey.Resources, Expiries: expiries, NewKey: newKey,
		NewSecret: secret, BaseURL: c.baseURL(ec), ShowRevoked: ec.QueryParam("show") == "revoked"}
	if form.Preset == "" {
		form = keyForm{Preset: "full", Expiry: "90d", Custom: map[string]string{}}
	}
	form.Nonce = randomToken()
	data.Form = form
	if ses.Workspace != nil {
		keys, err := c.db.APIKeys.List(ec.Request().Context(), ses.Workspace.ID)
		if err != nil {
			return err
		}
		var creators []string
		for _, k := range keys {
			creators = append(creators, k.CreatedBy)
		}
		emails, err := c.db.Users.Emails(ec.Request().Context(), creators)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, k := range keys {
			row := keyRow{APIKey: k, Masked: apikey.Mask(k.DisplayPrefix, k.Last4), Status: k.Status(now)}
			if pr, ok := apikey.PresetFor(k.Scopes); ok {
				row.Preset = pr.Name
			}
			switch {
			case k.CreatedBy == "cli":
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
		Expiry: ec.FormValue("expiry"), Custom: map[string]string{}, Nonce: ec.FormValue("nonce")}
	for _, r := range apikey.Resources {
		form.Custom[r.Name] = ec.FormValue("scope_" + r.Name)
	}
	fail := func(msg string) error {
		return c.renderAPI(ec, http.StatusUnprocessableEntity, "", msg, form, nil, "")
	}
	if form.Name == "" || len([]rune(form.Name)) > 100 {
		return fail("Give the key a name of 1 to 100 characters, so you know later where it is used.")
	}
	scopes, err := formScopes(form)
	if err != nil {
		return fail(err.Error())
	}
	exp := slices.IndexFunc(expiries, func(e expiry) bool { return e.Value == form.Expiry })
	if exp < 0 {
		return fail("Choose when the key expires.")
	}
	if form.Nonce == "" {
		return fail("This form has expired. Reload the page and try again.")
	}
	if !c.claimNonce(form.Nonce) {
		return c.renderAPI(ec, http.StatusConflict, "", "This form was already submitted, so no second key was created. "+
			"The secret of the key it created was shown once and cannot be shown again; if you lost it, revoke that key and create a new one.",
			keyForm{}, nil, "")
	}
	var expiresAt *time.Time
	if ttl := expiries[exp].TTL; ttl > 0 {
		t := time.Now().Add(ttl)
		expiresAt = &t
	}
	k, secret, err := apikey.Issue(ec.Request().Context(), c.db.APIKeys, store.NewAPIKey{
		WorkspaceID: ses.Workspace.ID, Name: form.Name, Scopes: scopes, CreatedBy: ses.UserID, ExpiresAt: expiresAt,
	})
	if err != nil {
		return err
	}
	c.log.Info("console created API key", "key_id", k.ID, "workspace_id", k.WorkspaceID, "user_id", ses.UserID)
	return c.renderAPI(ec, http.StatusCreated, "", "", keyForm{}, &k, secret)
}

// formScopes turns the preset or the custom matrix into scopes.
func formScopes(f keyForm) ([]string, error) {
	if f.Preset != "custom" {
		for _, p := range apikey.Presets {
			if p.ID == f.Preset {
				return p.Scopes, nil
			}
		}
		return nil, errors.New("Choose what the key may do.")
	}
	var scopes []string
	for _, r := range apikey.Resources {
		switch f.Custom[r.Name] {
		case "", "none":
		case "read":
			scopes = append(scopes, r.Name+":read")
		case "write":
			if !r.Writable {
				return nil, errors.New("“" + r.Name + "” can only be read.")
			}
			scopes = append(scopes, r.Name+":write")
		default:
			return nil, errors.New("Choose none, read or write for each resource.")
		}
	}
	if len(scopes) == 0 {
		return nil, errors.New("A custom key needs at least one permission: choose read or write for a resource.")
	}
	return scopes, nil
}

// claimNonce records a create form's nonce; false when it was used already. Nonces are kept for a day.
func (c *Console) claimNonce(nonce string) bool {
	c.createdMu.Lock()
	defer c.createdMu.Unlock()
	now := time.Now()
	if len(c.created) > 10_000 {
		for n, ck := range c.created {
			if now.Sub(ck.at) > 24*time.Hour {
				delete(c.created, n)
			}
		}
	}
	if _, used := c.created[nonce]; used {
		return false
	}
	c.created[nonce] = createdKey{at: now}
	return true
}

// revokePage asks for confirmation, naming the key.
func (c *Console) revokePage(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return c.notFound(ec)
	}
	k, err := c.db.APIKeys.Get(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return c.notFound(ec)
	}
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "revoke", page{Title: "Revoke " + k.Name, Session: ses,
		Data: keyRow{APIKey: k, Masked: apikey.Mask(k.DisplayPrefix, k.Last4), Status: k.Status(time.Now())}})
}

func (c *Console) revokeKey(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return c.notFound(ec)
	}
	k, err := c.db.APIKeys.RevokeInWorkspace(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return c.notFound(ec)
	}
	if err != nil {
		return err
	}
	c.log.Info("console revoked API key", "key_id", k.ID, "workspace_id", k.WorkspaceID, "user_id", ses.UserID)
	return ec.Redirect(http.StatusSeeOther, "/user/api?revoked="+url.QueryEscape(k.ID))
}

func (c *Console) notFound(ec echo.Context) error {
	return c.render(ec, http.StatusNotFound, "error", page{Title: "Not found", Session: sessionFrom(ec),
		Error: "There is no such key in this workspace."})
}
