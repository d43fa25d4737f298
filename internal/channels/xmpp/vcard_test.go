package xmpp

import (
	"bytes"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
)

// The account's own profile is its vCard on the server (Prosody's vcard-temp): a nickname and description set
// through the session read back, the card's photo is the account's picture, which another account reads as the
// contact's picture (named by its SHA-1, the same while the photo is), and removing it leaves none. The server
// lists vcard-temp, so the instance has the profile capabilities.
func TestVCardProfileAndPictures(t *testing.T) {
	srv, alice, _ := twoAccounts(t)
	ctx := ctxT(t)
	for _, c := range []channels.Capability{channels.CapContactsPicture, channels.CapProfileName, channels.CapProfileAbout, channels.CapProfilePicture} {
		if !contains(alice.Capabilities(), c) {
			t.Fatalf("capabilities %v lack %s", alice.Capabilities(), c)
		}
	}
	name, about := "Alice Support", "We answer within the hour."
	if err := alice.SetProfile(ctx, channels.Profile{Name: &name, About: &about}); err != nil {
		t.Fatal(err)
	}
	p, err := alice.Profile(ctx)
	if err != nil || p.Name == nil || *p.Name != name || p.About == nil || *p.About != about {
		t.Fatalf("profile = %+v, %v", p, err)
	}
	photo := []byte("\xff\xd8\xff\xe0 a small jpeg of alice")
	id, err := alice.SetPicture(ctx, "", photo, "image/jpeg")
	if err != nil || len(id) != 40 {
		t.Fatalf("set picture: %q, %v", id, err)
	}
	// The name stays when the photo is set: the card is changed, not replaced.
	if p, _ := alice.Profile(ctx); p.Name == nil || *p.Name != name {
		t.Fatalf("the name after the photo: %+v", p)
	}
	carol := srv.Register("carol", "secret-c")
	cs := connect(t, testProvider(), "ins_carol", srv.Config(carol, "secret-c"))
	pic, err := cs.Picture(ctx, alice.cfg.JID.Bare().String())
	if err != nil || !bytes.Equal(pic.Data, photo) || pic.ID != id || pic.MIMEType != "image/jpeg" {
		t.Fatalf("alice's picture seen by carol: %+v, %v", pic, err)
	}
	if _, err := alice.SetPicture(ctx, "", nil, ""); err != nil {
		t.Fatal(err)
	}
	if pic, err := cs.Picture(ctx, alice.cfg.JID.Bare().String()); err != nil || pic.Data != nil {
		t.Fatalf("the removed picture: %+v, %v", pic, err)
	}
	if pic, err := cs.Picture(ctx, "nobody@"+srv.Domain); err != nil || pic.Data != nil {
		t.Fatalf("an account without a card: %+v, %v", pic, err)
	}
	if _, err := alice.SetPicture(ctx, "room@conference."+srv.Domain, photo, "image/jpeg"); err == nil {
		t.Fatal("a room's picture was set")
	}
}
