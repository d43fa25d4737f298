package console

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// What an instance's page shows and changes of the account beyond its messages, where the provider can: its own
// profile (name, about text, picture), its groups' settings and pictures, and its chat labels with the labels each
// chat carries. A picture is uploaded from the form into the workspace's media first (as an API client uploads it
// to POST /api/v1/media), then set; thumbnails come from /user/media, which serves the workspace's images to the
// session. Every change goes through the messaging service, with the checks the API's requests get (the spec's
// schemas of their bodies, then the service's capabilities).

func (c *Console) registerProfiles(g *echo.Group) {
	g.POST("/channels/:id/profile", c.instanceForm("The profile was not changed", "profile#profile", c.setProfile))
	g.POST("/channels/:id/groups/:group/settings", c.instanceForm("The group's settings were not changed",
		"group-settings#groups", c.setGroupSettings))
	g.POST("/channels/:id/groups/:group/picture", c.instanceForm("The group's picture was not changed",
		"group-picture#groups", c.setGroupPicture))
	g.POST("/channels/:id/labels", c.instanceForm("The label was not created", "label-created#labels", c.createLabel))
	g.POST("/channels/:id/labels/:label", c.instanceForm("The label was not changed", "label-saved#labels", c.updateLabel))
	g.POST("/channels/:id/labels/:label/delete", c.instanceForm("The label was not deleted", "label-deleted#labels", c.deleteLabel))
	g.POST("/channels/:id/chats/:chat/labels", c.instanceForm("The label was not put on the chat",
		"chat-labelled#instance-chats", c.labelChat))
	g.POST("/channels/:id/chats/:chat/labels/:label/remove", c.instanceForm("The label was not taken off the chat",
		"chat-unlabelled#instance-chats", c.unlabelChat))
	g.GET("/media/:id", c.mediaContent)
}

// liveHeader marks the page fetches of static/live.js, which swap in only the page's live sections: the sections
// that ask the network (the profile, the groups' pictures) are not among them, so such a fetch skips those reads.
const liveHeader = "X-Console-Live"

// groupsShown bounds the groups the instance page lists with their settings.
const groupsShown = 20

// labelsShown bounds the labels the instance page lists (an account keeps a handful; WhatsApp allows 20).
const labelsShown = 100

// labelColors names the label colors by the API's index (0–19, the palette the providers map theirs onto, as
// WhatsApp's 20 are): the page's swatches are the CSS classes label-color-N.
var labelColors = []string{"salmon", "sky blue", "yellow", "lavender", "slate", "teal", "pink", "mustard", "indigo",
	"lime", "cyan", "rose", "sage", "red", "blue", "green", "orange", "ice", "periwinkle", "purple"}

// profileSection fills the page's profile (read from the network on the page's own loads while the instance is
// connected: the network is its only record of the about text), its groups with their settings and pictures, and
// its labels with the labels each listed chat carries, each where the provider has the capability.
func (c *Console) profileSection(ec echo.Context, inst store.Instance, d *channelData) error {
	ctx, ws := ec.Request().Context(), inst.WorkspaceID
	live := ec.Request().Header.Get(liveHeader) != ""
	connected := inst.Status == string(channels.StatusConnected)
	d.ProfileOn = d.Info.Has(channels.CapProfileName) || d.Info.Has(channels.CapProfileAbout) || d.Info.Has(channels.CapProfilePicture)
	switch {
	case !d.ProfileOn || live:
	case !connected:
		d.ProfileUnread = "Connect the instance to read and change its profile."
	default:
		p, err := c.channels.Profile(ctx, ws, inst.ID)
		if pe := problemOf(err); pe != nil {
			d.ProfileUnread = "The profile could not be read: " + pe.Detail
		} else if err != nil {
			return err
		} else {
			d.Profile = &p
		}
	}

	d.GroupsOn = d.Info.Has(channels.CapGroupsSettings) || d.Info.Has(channels.CapGroupsPicture)
	if d.GroupsOn {
		groups, _, err := c.channels.ListGroups(ctx, ws, inst.ID, store.Page{Limit: groupsShown})
		if err != nil {
			return err
		}
		for _, g := range groups {
			// A picture not fetched lately is asked for once a day (the service keeps it meanwhile); a failure
			// (offline) leaves the one kept.
			if !live && connected && d.Info.Has(channels.CapContactsPicture) {
				if p, err := c.channels.GroupPicture(ctx, ws, inst.ID, g.ID, false); err == nil {
					g.PictureMediaID = nil
					if p.Media != nil {
						g.PictureMediaID = &p.Media.ID
					}
				}
			}
			d.Groups = append(d.Groups, g)
		}
	}

	if d.Info.Has(channels.CapLabels) {
		labels, _, err := c.channels.ListLabels(ctx, ws, inst.ID, store.Page{Limit: labelsShown})
		if err != nil {
			return err
		}
		d.Labels = labels
		byID := map[string]store.Label{}
		for _, l := range labels {
			byID[l.ID] = l
		}
		ids := make([]string, len(d.Chats))
		for i, ch := range d.Chats {
			ids[i] = ch.ID
		}
		carried, err := c.db.Labels.OfChats(ctx, c.db.Reader(), ids)
		if err != nil {
			return err
		}
		d.ChatLabels = map[string][]store.Label{}
		for chatID, labelIDs := range carried {
			for _, id := range labelIDs {
				if l, ok := byID[id]; ok {
					d.ChatLabels[chatID] = append(d.ChatLabels[chatID], l)
				}
			}
		}
	}
	return nil
}

// formError is what a form of the instance page lacks (no file chosen, no label picked), said to the person.
type formError string

func (e formError) Error() string { return string(e) }

// instanceForm answers a form of the instance page: change makes the change through the service, then the page is
// shown again with the notice done names (and its anchor). A change refused — the form's own lack, a problem the
// service told, the fields the spec refuses — shows the page again with why, after what; a problem of something
// not found, and any failure, is returned for the error page.
func (c *Console) instanceForm(what, done string, change func(ec echo.Context, inst store.Instance) error) echo.HandlerFunc {
	return func(ec echo.Context) error {
		inst, err := c.instanceOf(ec)
		if err != nil {
			return err
		}
		err = change(ec, inst)
		if err == nil {
			return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done="+done)
		}
		var fe formError
		if errors.As(err, &fe) {
			return c.renderChannel(ec, http.StatusUnprocessableEntity, "", what+": "+string(fe)+".", channelData{})
		}
		p := problemOf(err)
		if p == nil || p.Status() >= 500 || p.Status() == http.StatusNotFound {
			return err
		}
		status, msg := p.Status(), what+": "+p.Detail
		if fields := fieldErrors(err); fields != nil {
			// As the console's other forms answer a form the spec refuses.
			status, msg = http.StatusUnprocessableEntity, what+": "+joinErrors(fields)+"."
		}
		return c.renderChannel(ec, status, "", msg, channelData{})
	}
}

// uploadedPicture stores the file of the form's input named field as a media file of the workspace, as an upload
// to the API would; nil when no file was chosen.
func (c *Console) uploadedPicture(ec echo.Context, workspaceID, field string) (*channels.MediaFile, error) {
	fh, err := ec.FormFile(field)
	if errors.Is(err, http.ErrMissingFile) || errors.Is(err, http.ErrNotMultipart) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	m, err := c.channels.Upload(ec.Request().Context(), workspaceID, fh.Filename, fh.Header.Get("Content-Type"), data)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// setProfile changes the account's name and about text where the form changed them (the form holds the values it
// showed), and its picture: a file chosen is uploaded and set, "remove_picture" removes it.
func (c *Console) setProfile(ec echo.Context, inst store.Instance) error {
	doc := map[string]any{}
	if name := formText(ec, "name"); name != formText(ec, "name_was") {
		doc["name"] = name
	}
	if about := formText(ec, "about"); about != formText(ec, "about_was") {
		doc["about"] = about
	}
	if len(doc) > 0 {
		if err := requestBody("InstanceProfileUpdate", doc, &gen.InstanceProfileUpdate{}); err != nil {
			return err
		}
	}
	u := channels.ProfileUpdate{PictureSet: ec.FormValue("remove_picture") != ""}
	if name, ok := doc["name"].(string); ok {
		u.Name = &name
	}
	if about, ok := doc["about"].(string); ok {
		u.About = &about
	}
	if !u.PictureSet {
		m, err := c.uploadedPicture(ec, inst.WorkspaceID, "picture")
		if err != nil {
			return err
		}
		if m != nil {
			u.PictureSet, u.PictureMediaID = true, m.ID
		}
	}
	if u.Name == nil && u.About == nil && !u.PictureSet {
		return formError("change the name or the about text, or choose a picture")
	}
	_, err := c.channels.UpdateProfile(ec.Request().Context(), inst.WorkspaceID, inst.ID, u)
	return err
}

// formText is a text field of the form without spaces around it and with its line breaks as the page had them
// (browsers send each as CR LF).
func formText(ec echo.Context, name string) string {
	return strings.TrimSpace(strings.ReplaceAll(ec.FormValue(name), "\r\n", "\n"))
}

// setGroupSettings changes who may send to a group and who may edit its info.
func (c *Console) setGroupSettings(ec echo.Context, inst store.Instance) error {
	doc := map[string]any{}
	for _, f := range []string{"send", "edit_info"} {
		if v := ec.FormValue(f); v != "" {
			doc[f] = v
		}
	}
	if err := requestBody("GroupSettingsUpdate", doc, &gen.GroupSettingsUpdate{}); err != nil {
		return err
	}
	set := channels.GroupSettings{Send: ec.FormValue("send"), EditInfo: ec.FormValue("edit_info")}
	_, err := c.channels.UpdateGroup(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("group"), nil, nil, &set)
	return err
}

// setGroupPicture sets a group's picture from the file chosen, or (with "remove") removes it.
func (c *Console) setGroupPicture(ec echo.Context, inst store.Instance) error {
	mediaID := ""
	if ec.FormValue("remove") == "" {
		m, err := c.uploadedPicture(ec, inst.WorkspaceID, "picture")
		if err != nil {
			return err
		}
		if m == nil {
			return formError("choose a JPEG or PNG picture")
		}
		mediaID = m.ID
	}
	_, err := c.channels.SetGroupPicture(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("group"), mediaID)
	return err
}

// labelForm is a label's name and color as the form sent them, as the API's request body: a color that is no
// number stays text, for the schema to refuse.
func labelForm(ec echo.Context) map[string]any {
	doc := map[string]any{"name": strings.TrimSpace(ec.FormValue("name"))}
	if v := strings.TrimSpace(ec.FormValue("color")); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			doc["color"] = n
		} else {
			doc["color"] = v
		}
	}
	return doc
}

// createLabel makes a label from the form.
func (c *Console) createLabel(ec echo.Context, inst store.Instance) error {
	var in gen.LabelCreate
	if err := requestBody("LabelCreate", labelForm(ec), &in); err != nil {
		return err
	}
	color := 0
	if in.Color != nil {
		color = *in.Color
	}
	_, err := c.channels.CreateLabel(ec.Request().Context(), inst.WorkspaceID, inst.ID, in.Name, color)
	return err
}

// updateLabel renames or recolors a label from its row's form.
func (c *Console) updateLabel(ec echo.Context, inst store.Instance) error {
	var in gen.LabelUpdate
	if err := requestBody("LabelUpdate", labelForm(ec), &in); err != nil {
		return err
	}
	_, err := c.channels.UpdateLabel(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("label"),
		channels.LabelChange{Name: in.Name, Color: in.Color})
	return err
}

// deleteLabel deletes a label; the chats that carried it lose it.
func (c *Console) deleteLabel(ec echo.Context, inst store.Instance) error {
	return c.channels.DeleteLabel(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("label"))
}

// labelChat puts the label the form picked on a chat.
func (c *Console) labelChat(ec echo.Context, inst store.Instance) error {
	label := ec.FormValue("label")
	if label == "" {
		return formError("choose a label")
	}
	_, err := c.channels.LabelChat(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("chat"), label, true)
	return err
}

// unlabelChat takes a label off a chat.
func (c *Console) unlabelChat(ec echo.Context, inst store.Instance) error {
	_, err := c.channels.LabelChat(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("chat"), ec.Param("label"), false)
	return err
}

// thumbnailTypes are the media types /user/media serves: images every browser shows as such and none runs script
// in (SVG can). Any other file of the workspace stays an API download, never a response of the console's origin.
var thumbnailTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// mediaContent answers GET /user/media/:id with an image of the session's workspace (a profile's or a group's
// picture), for the pages' thumbnails.
func (c *Console) mediaContent(ec echo.Context) error {
	ses := sessionFrom(ec)
	notFound := problem.New(problem.NotFound, "There is no such picture in this workspace.")
	if ses.Workspace == nil {
		return notFound
	}
	f, data, err := c.channels.MediaContent(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"))
	if err != nil {
		return err
	}
	if !thumbnailTypes[f.MIMEType] {
		return notFound
	}
	h := ec.Response().Header()
	// A media file never changes under its ID; it is the workspace's, so no shared cache keeps it.
	h.Set("Cache-Control", "private, max-age=86400")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	return ec.Blob(http.StatusOK, f.MIMEType, data)
}

func init() {
	// labelColors gives templates the label colors' names by index, for the swatches and the color choices.
	templateFuncs["labelColors"] = func() []string { return labelColors }
}
