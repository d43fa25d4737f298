//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"testing"

	"go.mau.fi/whatsmeow/types"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// pngImage is a small PNG of one colour.
func pngImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{10, 160, 90, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// isJPEG reports whether data starts as a JPEG does.
func isJPEG(data []byte) bool {
	return len(data) > 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF
}

// A group's settings and picture, and the account's own profile, through the service to WhatsApp: announcement and
// locked info are WhatsApp's group settings and come back on the group; a PNG picture reaches WhatsApp as the JPEG
// it takes and reads back as the group's picture; the push name, about text and picture are the account's on
// WhatsApp and the profile reads them back; a participant who is no admin is refused by WhatsApp.
func TestGroupSettingsPicturesAndProfileOnWhatsApp(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n, me, peer, e, id := pairedEngine(t, db)
		g, _, err := e.svc.CreateGroup(ctx, e.ws, id, "Launch", nil, []string{"+" + peer.phone})
		if err != nil {
			t.Fatal(err)
		}
		if g.SettingsSend == nil || *g.SettingsSend != channels.GroupAll || *g.SettingsEditInfo != channels.GroupAll {
			t.Fatalf("a new group's settings: %v %v", g.SettingsSend, g.SettingsEditInfo)
		}
		g, err = e.svc.UpdateGroup(ctx, e.ws, id, g.ID, nil, nil, &channels.GroupSettings{Send: channels.GroupAdmins, EditInfo: channels.GroupAdmins})
		if err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		fg := n.groups[groupKey(g.Address)]
		announce, locked := fg.info.IsAnnounce, fg.info.IsLocked
		n.mu.Unlock()
		if !announce || !locked || *g.SettingsSend != channels.GroupAdmins || *g.SettingsEditInfo != channels.GroupAdmins {
			t.Fatalf("on WhatsApp announce=%v locked=%v; recorded %v %v", announce, locked, *g.SettingsSend, *g.SettingsEditInfo)
		}
		if evs := e.events(t, "group.updated"); len(evs) == 0 || evs[len(evs)-1]["changed"].([]any)[0] != "settings" {
			t.Fatalf("group.updated = %v", evs)
		}

		// A PNG picture goes to WhatsApp as a JPEG, and reads back as the group's picture.
		file, err := e.svc.Upload(ctx, e.ws, "team.png", "image/png", pngImage(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.SetGroupPicture(ctx, e.ws, id, g.ID, file.ID); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		sent := fg.picture
		n.mu.Unlock()
		if !isJPEG(sent) {
			t.Fatalf("WhatsApp got a picture that is no JPEG: % x", sent[:min(8, len(sent))])
		}
		pic, err := e.svc.GroupPicture(ctx, e.ws, id, g.ID, true)
		if err != nil || pic.Media == nil || pic.Media.ID != file.ID {
			// WhatsApp's ID of the picture is the one it answered the set with: the file set stays the picture.
			t.Fatalf("the group's picture: %+v, %v", pic, err)
		}
		if _, err := e.svc.SetGroupPicture(ctx, e.ws, id, g.ID, ""); err != nil {
			t.Fatal(err)
		}
		if pic, err := e.svc.GroupPicture(ctx, e.ws, id, g.ID, true); err != nil || pic.Media != nil {
			t.Fatalf("the removed picture: %+v, %v", pic, err)
		}

		// The account's own profile.
		name, about := "Acme Support", "We answer within the hour."
		p, err := e.svc.UpdateProfile(ctx, e.ws, id, channels.ProfileUpdate{Name: &name, About: &about, PictureSet: true, PictureMediaID: file.ID})
		if err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		gotName, gotAbout, gotPicture := me.name, me.about, me.picture
		n.mu.Unlock()
		if gotName != name || gotAbout != about || !isJPEG(gotPicture) {
			t.Fatalf("on WhatsApp: name %q about %q picture %d bytes", gotName, gotAbout, len(gotPicture))
		}
		if p.Name == nil || *p.Name != name || p.About == nil || *p.About != about || p.Picture == nil || p.Picture.ID != file.ID {
			t.Fatalf("profile = %+v", p)
		}
		if inst := e.instance(t, id); inst.Account == nil || inst.Account.DisplayName != name {
			t.Fatalf("the instance's account = %+v", inst.Account)
		}
		long := "a name longer than WhatsApp allows"
		if _, err := e.svc.UpdateProfile(ctx, e.ws, id, channels.ProfileUpdate{Name: &long}); problemCode(err) != "validation_failed" {
			t.Errorf("a name too long: %v", err)
		}
	})
}

// groupKey is the user part of a group's address (its JID), the fake network's key of it.
func groupKey(address string) string {
	j, _ := groupJID(address)
	return j.User
}

// Only a group's admins change its settings: WhatsApp answers a participant 403, which is the API's not_permitted.
func TestGroupSettingsNeedAnAdmin(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	j := types.NewJID("120363000000000901", types.GroupServer)
	owner := participant(r.peer)
	owner.IsAdmin, owner.IsSuperAdmin = true, true
	r.n.mu.Lock()
	r.n.groups[j.User] = &fakeGroup{info: types.GroupInfo{JID: j, GroupName: types.GroupName{Name: "Others'"},
		Participants: []types.GroupParticipant{owner, participant(r.me)}}}
	r.n.mu.Unlock()
	_, err := r.sess.SetGroupSettings(t.Context(), j.String(), channels.GroupSettings{Send: channels.GroupAdmins})
	if failureCode(err) != "not_permitted" {
		t.Fatalf("a participant's change of settings: %v, want not_permitted", err)
	}
	// Its info is open to everyone: a participant may set its picture.
	if _, err := r.sess.SetPicture(t.Context(), j.String(), []byte("\xff\xd8\xff a jpeg"), "image/jpeg"); err != nil {
		t.Fatalf("a participant's picture of an open group: %v", err)
	}
}
