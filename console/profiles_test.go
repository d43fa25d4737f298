package console_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// pngPicture is a small PNG image of one color.
func pngPicture(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload is a file of a multipart form: its input's name, the file's name, media type and bytes.
type upload struct {
	field, name, mimeType string
	data                  []byte
}

// postFile posts a multipart form (as a form with a file input sends it) with the session's CSRF token.
func (b *browser) postFile(t *testing.T, path string, form url.Values, file *upload) *resp {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	form.Set("csrf_token", b.csrf(t))
	for k, vs := range form {
		for _, v := range vs {
			if err := w.WriteField(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if file != nil {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+file.field+`"; filename="`+file.name+`"`)
		h.Set("Content-Type", file.mimeType)
		part, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := part.Write(file.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.e.url+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &resp{Response: res, body: string(raw)}
}

// thumbnail is the path of the first picture the page shows in the element with that id (its img's src), or "".
func (r *resp) thumbnail(id string) string {
	m := regexp.MustCompile(`<img[^>]*id="` + regexp.QuoteMeta(id) + `"[^>]*src="([^"]*)"`).FindStringSubmatch(r.body)
	if m == nil {
		return ""
	}
	return m[1]
}

// instancePages is the console over the messaging service with providers (the sandbox when none are given), and a
// browser signed up as name with a workspace of its own.
func instancePages(t *testing.T, db *store.DB, name string, providers ...channels.Provider) (*channels.Service, *env, *browser, store.MemberWorkspace) {
	t.Helper()
	svc := newChannels(t, db)
	if len(providers) > 0 {
		svc = newChannelsOf(t, db, providers...)
	}
	e := newEnv(t, db, console.Config{Channels: svc})
	b := e.browser()
	b.newUser(t, name)
	return svc, e, b, b.newWorkspace(t, name)
}

// telegramInstance is a Telegram instance of the workspace, never connected.
func telegramInstance(t *testing.T, svc *channels.Service, workspaceID string) store.Instance {
	t.Helper()
	inst, err := svc.Create(ctx, workspaceID, channels.NewInstance{Name: "Bot", Provider: "telegram",
		Config: map[string]any{"bot_token": "123456:AAH-not-a-real-token-0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// The instance's profile from its page: the name and about text as the network shows them, changed by the form;
// a picture uploaded, shown as a thumbnail the session (and no other workspace) can load, and removed; refusals
// (a name too long, a file that is no picture, nothing changed, no CSRF token) say why and change nothing.
func TestProfileForm(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc, e, b, ws := instancePages(t, db, "profile")
		alice := connectedSandbox(t, svc, ws.ID, "Alice")
		path := "/user/channels/" + alice.ID

		// The instance is connected; the page reads the profile through its session, which may take its first
		// command a moment after the status says connected (then the page says why it could not read it).
		page := await.Until(t, "the page to show the profile's name", func() *resp { return b.get(t, path) },
			func(r *resp) bool { got, _ := r.elementText("profile-name"); return got == "Alice" })
		if page.field(t, "name_was") != "Alice" {
			t.Fatalf("the form holds the name %q", page.field(t, "name_was"))
		}

		b.postFile(t, path+"/profile", url.Values{"name": {" Alice Support "}, "name_was": {"Alice"},
			"about": {"We answer\r\nevery day"}, "about_was": {""}}, nil).wantRedirect(t, path+"?done=profile#profile")
		p, err := svc.Profile(ctx, ws.ID, alice.ID)
		if err != nil || deref(p.Name) != "Alice Support" || deref(p.About) != "We answer\nevery day" {
			t.Fatalf("profile after the form: %v %v, %v", deref(p.Name), deref(p.About), err)
		}
		page = b.get(t, path+"?done=profile")
		page.wantText(t, "Saved: the account's profile is as shown.")
		if got, _ := page.elementText("profile-about"); got != "We answer\nevery day" {
			t.Fatalf("the about text shows as %q", got)
		}

		// The live module's fetches swap in only the live sections: they do not ask the network for the profile.
		live := b.do(t, http.MethodGet, path, nil, http.Header{"X-Console-Live": {"1"}})
		if strings.Contains(live.body, `id="profile-form"`) || !strings.Contains(live.body, `id="instance-chats"`) {
			t.Fatalf("a live fetch read the profile, or lacks the live sections:\n%s", live.body)
		}

		// A picture: uploaded into the workspace's media, then set (the sandbox's accounts start with one of their
		// own); the name unchanged is not sent again.
		pic := pngPicture(t, color.RGBA{R: 200, A: 255})
		b.postFile(t, path+"/profile", url.Values{"name": {"Alice Support"}, "name_was": {"Alice Support"},
			"about": {"We answer\nevery day"}, "about_was": {"We answer\nevery day"}},
			&upload{"picture", "me.png", "image/png", pic}).wantRedirect(t, path+"?done=profile#profile")
		page = b.get(t, path)
		p, _ = svc.Profile(ctx, ws.ID, alice.ID)
		src := page.thumbnail("profile-picture")
		if p.Picture == nil || src != "/user/media/"+p.Picture.ID {
			t.Fatalf("no thumbnail of the picture:\n%s", page.body)
		}
		img := b.get(t, src)
		img.wantStatus(t, http.StatusOK)
		if img.Header.Get("Content-Type") != "image/png" || img.body != string(pic) || img.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("the thumbnail: %s, %d bytes, nosniff %q", img.Header.Get("Content-Type"), len(img.body), img.Header.Get("X-Content-Type-Options"))
		}
		other := e.browser()
		other.newUser(t, "stranger")
		other.newWorkspace(t, "Elsewhere")
		other.get(t, src).wantStatus(t, http.StatusNotFound)
		other.postFile(t, path+"/profile", url.Values{"name": {"Mallory"}}, nil).wantStatus(t, http.StatusNotFound)
		// A file of the workspace that is no image is never served as a page of the console.
		doc, err := svc.Upload(ctx, ws.ID, "page.html", "text/html", []byte("<script>alert(1)</script>"))
		if err != nil {
			t.Fatal(err)
		}
		b.get(t, "/user/media/"+doc.ID).wantStatus(t, http.StatusNotFound)

		// Refused, with the reason: a name longer than the spec allows; a file that is no picture; nothing changed.
		long := b.postFile(t, path+"/profile", url.Values{"name": {strings.Repeat("n", 65)}, "name_was": {"Alice Support"}}, nil)
		long.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(long.alert(), "The profile was not changed: name") {
			t.Fatalf("the refusal says %q", long.alert())
		}
		// A picture over the API's body limit reaches the form (the media limit applies) and the network's limit
		// refuses it with the reason.
		big := append(slices.Clone(pic), make([]byte, 1536<<10)...)
		large := b.postFile(t, path+"/profile", url.Values{}, &upload{"picture", "big.png", "image/png", big})
		large.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(large.alert(), "The profile was not changed") {
			t.Fatalf("the large picture's refusal says %q", large.alert())
		}
		notPic := b.postFile(t, path+"/profile", url.Values{}, &upload{"picture", "notes.txt", "text/plain", []byte("hello")})
		notPic.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(notPic.alert(), "JPEG or PNG") {
			t.Fatalf("the refusal says %q", notPic.alert())
		}
		same := b.postFile(t, path+"/profile", url.Values{"name": {"Alice Support"}, "name_was": {"Alice Support"}}, nil)
		same.wantStatus(t, http.StatusUnprocessableEntity)
		if same.alert() == "" {
			t.Fatal("a form that changes nothing says nothing")
		}
		if p, _ := svc.Profile(ctx, ws.ID, alice.ID); deref(p.Name) != "Alice Support" || p.Picture == nil {
			t.Fatalf("a refused form changed the profile: %v, picture %v", deref(p.Name), p.Picture != nil)
		}
		b.post(t, path+"/profile", url.Values{"name": {"x"}}).wantStatus(t, http.StatusForbidden)

		// Removed: the sandbox shows the account's own pattern again.
		b.postFile(t, path+"/profile", url.Values{"remove_picture": {"1"}}, nil).wantRedirect(t, path+"?done=profile#profile")
		sum := sha256.Sum256(pic)
		if p, _ := svc.Profile(ctx, ws.ID, alice.ID); p.Picture != nil && p.Picture.SHA256 == hex.EncodeToString(sum[:]) {
			t.Fatal("the picture was not removed")
		}
		if b.get(t, path).thumbnail("profile-picture") == src {
			t.Fatal("the removed picture still shows")
		}

		// Disconnected, the profile cannot be read: the page says so and offers no form.
		if _, err := svc.Disconnect(ctx, ws.ID, alice.ID); err != nil {
			t.Fatal(err)
		}
		page = b.get(t, path)
		page.wantText(t, "Connect the instance to read and change its profile.")
		if strings.Contains(page.body, `id="profile-form"`) {
			t.Fatal("the profile form shows while the profile cannot be read")
		}
	})
}

// A group's settings and picture from the instance page: the group listed with who may send and edit, changed by
// its form; a value that is not one of the spec's refused; a picture set (its thumbnail shown) and removed.
func TestGroupForms(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc, _, b, ws := instancePages(t, db, "groups")
		alice, bob := connectedSandbox(t, svc, ws.ID, "Alice"), connectedSandbox(t, svc, ws.ID, "Bob")
		g, _, err := svc.CreateGroup(ctx, ws.ID, alice.ID, "Team <A>", nil, []string{bob.Account.Address})
		if err != nil {
			t.Fatal(err)
		}
		path := "/user/channels/" + alice.ID

		page := b.get(t, path)
		page.wantText(t, "Team <A>")
		if page.selected("send") != deref(g.SettingsSend) || page.selected("edit_info") != deref(g.SettingsEditInfo) ||
			page.selected("send") != "all" {
			t.Fatalf("the settings show as %q, %q; the group has %v, %v", page.selected("send"), page.selected("edit_info"),
				deref(g.SettingsSend), deref(g.SettingsEditInfo))
		}

		b.postCSRF(t, path+"/groups/"+g.ID+"/settings", url.Values{"send": {"admins"}, "edit_info": {"admins"}}).
			wantRedirect(t, path+"?done=group-settings#groups")
		if got, _ := svc.GetGroup(ctx, ws.ID, alice.ID, g.ID); deref(got.SettingsSend) != "admins" || deref(got.SettingsEditInfo) != "admins" {
			t.Fatalf("settings after the form: %v %v", deref(got.SettingsSend), deref(got.SettingsEditInfo))
		}
		page = b.get(t, path)
		if page.selected("send") != "admins" || page.selected("edit_info") != "admins" {
			t.Fatalf("the settings show as %q, %q:\n%s", page.selected("send"), page.selected("edit_info"), page.body[strings.Index(page.body, `id="groups"`):])
		}
		bad := b.postCSRF(t, path+"/groups/"+g.ID+"/settings", url.Values{"send": {"everyone"}})
		bad.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(bad.alert(), "send") {
			t.Fatalf("the refusal says %q", bad.alert())
		}
		b.postCSRF(t, path+"/groups/grp_00000000000000000000000000/settings", url.Values{"send": {"all"}}).
			wantStatus(t, http.StatusNotFound)

		// The picture: set from a file, shown, removed; a form without a file is refused.
		b.postFile(t, path+"/groups/"+g.ID+"/picture", url.Values{}, &upload{"picture", "team.png", "image/png",
			pngPicture(t, color.RGBA{B: 200, A: 255})}).wantRedirect(t, path+"?done=group-picture#groups")
		got, _ := svc.GetGroup(ctx, ws.ID, alice.ID, g.ID)
		if got.PictureMediaID == nil {
			t.Fatal("the group's picture was not set")
		}
		page = b.get(t, path)
		if !strings.Contains(page.body, `src="/user/media/`+*got.PictureMediaID+`"`) {
			t.Fatalf("the group's picture does not show:\n%s", page.body)
		}
		b.postFile(t, path+"/groups/"+g.ID+"/picture", url.Values{}, nil).wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, path+"/groups/"+g.ID+"/picture", url.Values{"remove": {"1"}}).wantRedirect(t, path+"?done=group-picture#groups")
		if got, _ := svc.GetGroup(ctx, ws.ID, alice.ID, g.ID); got.PictureMediaID != nil {
			t.Fatal("the group's picture was not removed")
		}
	})
}

// Labels from the instance page: created with a color (its swatch shown), refused with the reason when the spec
// refuses it, renamed and recolored, put on a chat and taken off it (the chat list shows it), deleted; another
// workspace gets 404.
func TestLabelForms(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc, e, b, ws := instancePages(t, db, "labels")
		alice, bob := connectedSandbox(t, svc, ws.ID, "Alice"), connectedSandbox(t, svc, ws.ID, "Bob")
		to, text := bob.Account.Address, "hello"
		if _, _, err := svc.Send(ctx, ws.ID, alice.ID, channels.MessageDraft{To: &to, Type: channels.TypeText, Text: &text}); err != nil {
			t.Fatal(err)
		}
		chat := await.Until(t, "alice's chat with bob", func() []store.Chat {
			cs, _, _ := svc.ListChats(ctx, ws.ID, alice.ID, store.ChatFilter{}, store.Page{Limit: 5})
			return cs
		}, func(cs []store.Chat) bool { return len(cs) == 1 })[0]
		path := "/user/channels/" + alice.ID
		b.get(t, path).wantText(t, "No labels yet.")

		b.postCSRF(t, path+"/labels", url.Values{"name": {" Follow up "}, "color": {"3"}}).wantRedirect(t, path+"?done=label-created#labels")
		ls, _, err := svc.ListLabels(ctx, ws.ID, alice.ID, store.Page{Limit: 10})
		if err != nil || len(ls) != 1 || ls[0].Name != "Follow up" || ls[0].Color != 3 {
			t.Fatalf("labels: %+v %v", ls, err)
		}
		l := ls[0]
		page := b.get(t, path)
		if !strings.Contains(page.body, `<span class="label-chip label-color-3" data-label="`+l.ID+`"`) {
			t.Fatalf("the label has no swatch:\n%s", page.body)
		}
		for _, form := range []url.Values{{"name": {""}}, {"name": {"x"}, "color": {"20"}}, {"name": {"x"}, "color": {"red"}}} {
			r := b.postCSRF(t, path+"/labels", form)
			r.wantStatus(t, http.StatusUnprocessableEntity)
			if !strings.HasPrefix(r.alert(), "The label was not created: ") {
				t.Fatalf("%v: the refusal says %q", form, r.alert())
			}
		}

		b.postCSRF(t, path+"/labels/"+l.ID, url.Values{"name": {"Call back"}, "color": {"5"}}).wantRedirect(t, path+"?done=label-saved#labels")
		if got, _ := svc.GetLabel(ctx, ws.ID, alice.ID, l.ID); got.Name != "Call back" || got.Color != 5 {
			t.Fatalf("the label after the form: %+v", got)
		}

		// On the chat, and off it.
		chatPath := path + "/chats/" + chat.ID + "/labels"
		b.postCSRF(t, chatPath, url.Values{"label": {l.ID}}).wantRedirect(t, path+"?done=chat-labelled#instance-chats")
		page = b.get(t, path)
		if !strings.Contains(page.body, `data-chat-label="`+l.ID+`"`) {
			t.Fatalf("the chat does not show its label:\n%s", page.body)
		}
		if on, _ := db.Labels.OfChats(ctx, db.Reader(), []string{chat.ID}); len(on[chat.ID]) != 1 {
			t.Fatalf("the chat carries %v", on[chat.ID])
		}
		b.postCSRF(t, chatPath, url.Values{}).wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, chatPath, url.Values{"label": {"lbl_00000000000000000000000000"}}).wantStatus(t, http.StatusNotFound)
		b.postCSRF(t, chatPath+"/"+l.ID+"/remove", url.Values{}).wantRedirect(t, path+"?done=chat-unlabelled#instance-chats")
		if strings.Contains(b.get(t, path).body, `data-chat-label="`) {
			t.Fatal("the label taken off still shows on the chat")
		}

		other := e.browser()
		other.newUser(t, "intruder")
		other.newWorkspace(t, "Elsewhere")
		other.postCSRF(t, path+"/labels/"+l.ID+"/delete", url.Values{}).wantStatus(t, http.StatusNotFound)

		b.postCSRF(t, path+"/labels/"+l.ID+"/delete", url.Values{}).wantRedirect(t, path+"?done=label-deleted#labels")
		if ls, _, _ := svc.ListLabels(ctx, ws.ID, alice.ID, store.Page{Limit: 10}); len(ls) != 0 {
			t.Fatalf("labels after the delete: %+v", ls)
		}
	})
}

// A provider without labels (Telegram) has no labels section and no labels column on its chats, and shows its
// groups section (it changes their settings and pictures); its profile, which cannot be read while the instance is
// not connected, says so instead of offering a form.
func TestProfileSectionsFollowCapabilities(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc, _, b, ws := instancePages(t, db, "caps", telegram.New(telegram.Options{}))
		inst := telegramInstance(t, svc, ws.ID)
		page := b.get(t, "/user/channels/"+inst.ID)
		page.wantText(t, "Connect the instance to read and change its profile.")
		for _, s := range []string{`id="labels"`, `Labels</th>`, `id="profile-form"`} {
			if strings.Contains(page.body, s) {
				t.Fatalf("the telegram instance's page has %s", s)
			}
		}
		if !strings.Contains(page.body, `id="groups"`) {
			t.Fatal("the telegram instance's page has no groups section")
		}
		// A label form sent anyway is refused by the service, with the reason on the page.
		r := b.postCSRF(t, "/user/channels/"+inst.ID+"/labels", url.Values{"name": {"Follow up"}})
		if r.StatusCode < 400 || r.StatusCode == http.StatusNotFound || !strings.Contains(r.alert(), "The label was not created: ") {
			t.Fatalf("a label on telegram: %d %q", r.StatusCode, r.alert())
		}
	})
}

// deref is an optional text, or "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
