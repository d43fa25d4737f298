package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// The Channels pages: the workspace's instances with their live status and the create form (the provider picked from
// the service's providers, the config form built from the provider's JSON Schema); an instance's page with its QR
// code while it waits to be paired, connect / disconnect / logout / delete, a test message and its recent messages
// with their status history. The instance page follows the instance's events live (see live.go); without script it
// reloads itself every two seconds while the instance changes state. The list reloads itself the same way (a
// Refresh header). Every change goes through the messaging service.

func (c *Console) registerChannels(g *echo.Group) {
	g.GET("/channels", c.channelsPage)
	g.POST("/channels", c.createInstance)
	g.GET("/channels/:id", c.channelPage)
	g.POST("/channels/:id/connect", c.instanceAction)
	g.POST("/channels/:id/disconnect", c.instanceAction)
	g.POST("/channels/:id/logout", c.instanceAction)
	g.POST("/channels/:id/scan", c.instanceAction)
	g.POST("/channels/:id/send", c.sendTestMessage)
	g.POST("/channels/:id/calls", c.setCalls)
	g.POST("/channels/:id/proxy", c.setProxy)
	g.GET("/channels/:id/delete", c.deleteInstancePage)
	g.POST("/channels/:id/delete", c.deleteInstance)
	c.registerProfiles(g)
	g.GET("/people", c.peoplePage)
	g.GET("/people/:id", c.personPage)
	g.POST("/people/:id/send", c.sendToPerson)
}

// configField is one input of a provider's config form, from a property of its JSON Schema.
type configField struct {
	Name, Title, Description, Type string
	Enum                           []string
	Secret, Required               bool
	Value                          string
}

// providerForm is a provider as the create form shows it.
type providerForm struct {
	Info   channels.Info
	Fields []configField
}

// channelsData is what the Channels page shows.
type channelsData struct {
	Instances []store.Instance
	Providers []providerForm
	Provider  string
	Name      string
	Errors    map[string]string
}

// transitional are the states a page keeps reloading for.
func transitional(status string) bool {
	switch channels.Status(status) {
	case channels.StatusConnecting, channels.StatusAwaitingAuth, channels.StatusReconnecting:
		return true
	}
	return false
}

// configFields reads the inputs of a provider's config form from its JSON Schema: string, integer, number and
// boolean properties (with enums), writeOnly ones as password inputs.
func configFields(info channels.Info) []configField {
	props, _ := info.ConfigSchema["properties"].(map[string]any)
	var required []string
	if rs, ok := info.ConfigSchema["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	var out []configField
	for name, raw := range props {
		p, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		f := configField{Name: name, Title: name, Required: slices.Contains(required, name)}
		f.Type, _ = p["type"].(string)
		f.Description, _ = p["description"].(string)
		if t, ok := p["title"].(string); ok {
			f.Title = t
		}
		f.Secret, _ = p["writeOnly"].(bool)
		if enum, ok := p["enum"].([]any); ok {
			for _, v := range enum {
				if s, ok := v.(string); ok {
					f.Enum = append(f.Enum, s)
				}
			}
		}
		switch f.Type {
		case "string", "integer", "number", "boolean":
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b configField) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// configOf reads a provider's config from the create form: empty inputs are left out; integers, numbers and
// booleans are converted (what does not convert is left as text for the schema to refuse).
func configOf(ec echo.Context, info channels.Info) map[string]any {
	config := map[string]any{}
	for _, f := range configFields(info) {
		v := ec.FormValue("config." + info.Name + "." + f.Name)
		if f.Type != "string" {
			v = strings.TrimSpace(v)
		}
		if v == "" && f.Type != "boolean" {
			continue
		}
		switch f.Type {
		case "boolean":
			if v == "true" {
				config[f.Name] = true
			}
		case "integer":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				config[f.Name] = n
			} else {
				config[f.Name] = v
			}
		case "number":
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				config[f.Name] = n
			} else {
				config[f.Name] = v
			}
		default:
			config[f.Name] = v
		}
	}
	return config
}

func (c *Console) channelsPage(ec echo.Context) error {
	return c.renderChannels(ec, http.StatusOK, channelNotices[ec.QueryParam("done")], "", channelsData{})
}

// channelNotices are the messages a redirect back to a Channels page names (fixed texts).
var channelNotices = map[string]string{
	"deleted":         "The instance was logged out and deleted.",
	"connect":         "Connecting…",
	"disconnect":      "Disconnected; the credentials are kept, and queued messages wait.",
	"logout":          "Logged out; the credentials were dropped.",
	"scan":            "The QR code was scanned.",
	"sent":            "The message was queued.",
	"calls":           "Saved: incoming calls are handled as shown.",
	"proxy":           "Saved: the proxy applies from the next connect.",
	"profile":         "Saved: the account's profile is as shown.",
	"group-settings":  "Saved: the group's settings are as shown.",
	"group-picture":   "Saved: the group's picture is as shown.",
	"label-created":   "The label was created.",
	"label-saved":     "The label was saved.",
	"label-deleted":   "The label was deleted; the chats that carried it lost it.",
	"chat-labelled":   "The label is on the chat.",
	"chat-unlabelled": "The label was taken off the chat.",
	"bot-added":       "The bot was added: it answers the instance's next messages.",
	"bot-enable":      "The bot answers again.",
	"bot-disable":     "The bot is stopped; it answers nothing until enabled.",
	"bot-delete":      "The bot was deleted with its runs.",
	"bot-resumed":     "The bots answer the chat again.",
}

func (c *Console) renderChannels(ec echo.Context, status int, notice, errMsg string, d channelsData) error {
	ses := sessionFrom(ec)
	for _, info := range c.channels.Providers() {
		d.Providers = append(d.Providers, providerForm{Info: info, Fields: configFields(info)})
	}
	if d.Provider == "" && len(d.Providers) > 0 {
		d.Provider = d.Providers[0].Info.Name
		for _, p := range d.Providers {
			if p.Info.Name == "sandbox" {
				d.Provider = p.Info.Name
			}
		}
	}
	if ses.Workspace != nil {
		insts, _, err := c.channels.List(ec.Request().Context(), ses.Workspace.ID, store.InstanceFilter{}, store.Page{Limit: 100})
		if err != nil {
			return err
		}
		d.Instances = insts
		for _, i := range insts {
			if transitional(i.Status) {
				ec.Response().Header().Set("Refresh", "2")
				break
			}
		}
	}
	return c.render(ec, status, "channels", page{Title: "Channels", Session: ses, Notice: notice, Error: errMsg, Data: d})
}

// createInstance creates an instance from the form and opens its page.
func (c *Console) createInstance(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/workspaces")
	}
	name, provider := strings.TrimSpace(ec.FormValue("name")), ec.FormValue("provider")
	info, err := c.channels.Provider(provider)
	if err != nil {
		return c.renderChannels(ec, http.StatusUnprocessableEntity, "", "Pick one of the providers.",
			channelsData{Name: name, Errors: map[string]string{"/provider": "is not a provider of this server"}})
	}
	var errs problem.Fields
	if name == "" {
		errs.Add("/name", "is required")
	}
	var inst store.Instance
	if err = errs.Err(); err == nil {
		inst, err = c.channels.Create(ec.Request().Context(), ses.Workspace.ID, channels.NewInstance{Name: name,
			Provider: provider, Config: configOf(ec, info)})
	}
	if err != nil {
		if fe := fieldErrors(err); fe != nil {
			return c.renderChannels(ec, http.StatusUnprocessableEntity, "", "The instance was not created: correct the fields marked below.",
				channelsData{Name: name, Provider: provider, Errors: fe})
		}
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID)
}

// channelData is what an instance's page shows.
type channelData struct {
	Instance store.Instance
	Info     channels.Info
	// HookURL is where the network pushes the instance's updates (providers that take pushes).
	HookURL string
	QR      *channels.QRCode
	// QRImage is the QR code's PNG as a data URL: made by the server, so trusted as an image source.
	QRImage  template.URL
	Messages []gen.Message
	// Chats are the instance's latest chats with how the account keeps them (archived, pinned, muted until).
	Chats []store.Chat
	// Contacts are the instance's latest contacts with their presence, each linking to its person.
	Contacts []store.Contact
	Now      time.Time
	Queue    *channels.QueueStats
	To       string
	Text     string
	// BotsOn is set when the console has the bot service: the page then shows the instance's bots (Bots), the chats
	// in takeover, the add-a-bot form (BotForm) and the models it offers.
	BotsOn    bool
	Bots      []botView
	Takeovers []takeoverView
	Models    []string
	BotForm   botForm
	// ProfileOn is set when the provider keeps a profile (name, about text or picture): Profile is it as the network
	// shows it, or ProfileUnread says why it was not read.
	ProfileOn     bool
	Profile       *channels.InstanceProfile
	ProfileUnread string
	// GroupsOn is set when the provider changes groups' settings or pictures: Groups are the instance's groups.
	GroupsOn bool
	Groups   []store.ChatGroup
	// Labels are the instance's labels (providers with chats.labels), ChatLabels those each listed chat carries.
	Labels     []store.Label
	ChatLabels map[string][]store.Label
}

func (c *Console) instanceOf(ec echo.Context) (store.Instance, error) {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return store.Instance{}, problem.New(problem.NotFound, "There is no such instance in this workspace.")
	}
	return c.channels.Get(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
}

func (c *Console) channelPage(ec echo.Context) error {
	return c.renderChannel(ec, http.StatusOK, channelNotices[ec.QueryParam("done")], ec.QueryParam("error"), channelData{})
}

func (c *Console) renderChannel(ec echo.Context, status int, notice, errMsg string, d channelData) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	ctx := ec.Request().Context()
	ses := sessionFrom(ec)
	d.Instance = inst
	if d.Info, err = c.channels.Provider(inst.Provider); err != nil {
		d.Info = channels.Info{Name: inst.Provider}
	}
	d.HookURL = c.channels.HookURL(inst)
	if inst.Status == string(channels.StatusAwaitingAuth) && inst.QRCode != nil {
		if qr, err := channels.QRCodeOf(inst); err == nil && strings.HasPrefix(qr.Image, "data:image/png;base64,") {
			d.QR, d.QRImage = &qr, template.URL(qr.Image) //nolint:gosec // our own PNG, base64-encoded
		}
	}
	ms, _, err := c.channels.ListMessages(ctx, ses.Workspace.ID, inst.ID, store.MessageFilter{}, store.Page{Limit: 20})
	if err != nil {
		return err
	}
	if d.Messages, err = c.channels.MessagesAPI(ctx, c.db.Reader(), ms); err != nil {
		return err
	}
	d.Now = time.Now()
	if d.Chats, _, err = c.channels.ListChats(ctx, ses.Workspace.ID, inst.ID, store.ChatFilter{Now: d.Now}, store.Page{Limit: 20}); err != nil {
		return err
	}
	if d.Contacts, _, err = c.channels.ListContacts(ctx, ses.Workspace.ID, inst.ID, nil, store.Page{Limit: 20}); err != nil {
		return err
	}
	if st, err := c.channels.QueueStats(ctx, ses.Workspace.ID, inst.ID); err == nil {
		d.Queue = &st
	}
	if err := c.botsSection(ec, inst, &d); err != nil {
		return err
	}
	if err := c.profileSection(ec, inst, &d); err != nil {
		return err
	}
	// The page follows a state change, and a message sent within the last half minute up to read.
	refresh := transitional(inst.Status)
	for _, m := range d.Messages {
		switch m.Status {
		case gen.MessageStatusRead, gen.MessageStatusFailed, gen.MessageStatusCanceled, gen.MessageStatusReceived:
		default:
			refresh = refresh || time.Since(m.CreatedAt) < 30*time.Second
		}
	}
	p := page{Title: inst.Name, Session: ses, Notice: notice, Error: errMsg, Data: d}
	if refresh {
		p.Refresh = 2 // without script; with it, the page's sections follow the event stream
	}
	return c.render(ec, status, "channel", p)
}

// instanceAction connects, disconnects, logs out or (on the sandbox) scans the QR code of an instance, then shows
// its page again.
func (c *Console) instanceAction(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	ctx, ws := ec.Request().Context(), inst.WorkspaceID
	action := ec.Path()[strings.LastIndex(ec.Path(), "/")+1:]
	switch action {
	case "connect":
		_, err = c.channels.Connect(ctx, ws, inst.ID)
	case "disconnect":
		_, err = c.channels.Disconnect(ctx, ws, inst.ID)
	case "logout":
		_, err = c.channels.Logout(ctx, ws, inst.ID)
	case "scan":
		err = c.channels.Control(ctx, ws, inst.ID, channels.Control{Kind: "scan"})
	}
	if p := problemOf(err); p != nil {
		return c.renderChannel(ec, http.StatusConflict, "", p.Detail, channelData{})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done="+action)
}

// sendTestMessage queues a text message from the instance.
func (c *Console) sendTestMessage(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	to, text := strings.TrimSpace(ec.FormValue("to")), ec.FormValue("text")
	_, _, err = c.channels.Send(ec.Request().Context(), inst.WorkspaceID, inst.ID, channels.MessageDraft{Type: channels.TypeText,
		To: &to, Text: &text})
	if p := problemOf(err); p != nil {
		msg := p.Detail
		if fe := fieldErrors(err); fe != nil {
			var parts []string
			for k, v := range fe {
				parts = append(parts, strings.TrimPrefix(k, "/")+" "+v)
			}
			slices.Sort(parts)
			msg = "The message was not sent: " + strings.Join(parts, "; ") + "."
		}
		return c.renderChannel(ec, http.StatusUnprocessableEntity, "", msg, channelData{To: string(to), Text: text})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done=sent")
}

// setCalls saves what the instance does with incoming calls: decline them, with an optional message to the caller.
func (c *Console) setCalls(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	calls := channels.Calls{Reject: ec.FormValue("reject") == "on", Message: strings.TrimSpace(ec.FormValue("message"))}
	if n := len([]rune(calls.Message)); n > 1000 {
		return c.renderChannel(ec, http.StatusUnprocessableEntity, "",
			fmt.Sprintf("The message to callers has %d characters; at most 1000 fit.", n), channelData{})
	}
	_, err = c.channels.Update(ec.Request().Context(), inst.WorkspaceID, inst.ID, channels.InstanceUpdate{Calls: &calls})
	if p := problemOf(err); p != nil {
		return c.renderChannel(ec, http.StatusUnprocessableEntity, "", p.Detail, channelData{})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done=calls")
}

// setProxy sets, changes or (with "remove") drops the instance's forward proxy; a password left empty keeps the
// stored one while the URL and user name stay.
func (c *Console) setProxy(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	u := channels.InstanceUpdate{RemoveProxy: ec.FormValue("remove") != ""}
	if !u.RemoveProxy {
		ps := channels.ProxySetting{URL: strings.TrimSpace(ec.FormValue("url")), Username: strings.TrimSpace(ec.FormValue("username"))}
		if pw := ec.FormValue("password"); pw != "" {
			ps.Password = &pw
		}
		u.Proxy = &ps
	}
	_, err = c.channels.Update(ec.Request().Context(), inst.WorkspaceID, inst.ID, u)
	if p := problemOf(err); p != nil {
		msg := p.Detail
		for _, f := range p.Fields {
			msg += " " + f.Detail + "."
		}
		return c.renderChannel(ec, http.StatusUnprocessableEntity, "", msg, channelData{})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done=proxy")
}

func (c *Console) deleteInstancePage(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "channel-delete", page{Title: "Delete " + inst.Name, Session: sessionFrom(ec),
		Data: channelData{Instance: inst}})
}

// deleteInstance logs the instance out and deletes it with its messages, after the confirmation page.
func (c *Console) deleteInstance(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	if ec.FormValue("confirm") != inst.Name {
		return c.render(ec, http.StatusUnprocessableEntity, "channel-delete", page{Title: "Delete " + inst.Name,
			Session: sessionFrom(ec), Error: "Type the instance's name to delete it.", Data: channelData{Instance: inst}})
	}
	if err := c.channels.Delete(ec.Request().Context(), inst.WorkspaceID, inst.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels?done=deleted")
}
