package handlers_test

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A contact's profile picture through the sandbox: fetched once and kept as a media file, the same file while the
// picture is the same, a new one when the person changes it (refresh), none for a number without an account, and
// refused where the provider has no pictures or the contact is another workspace's.
func TestContactPictures(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		alice, bob, _, _ := e.talking("Alice", "Bob")
		var contacts gen.ContactList
		e.get("/api/v1/instances/"+alice.Id+"/contacts", &contacts)
		if len(contacts.Data) != 1 {
			t.Fatalf("alice's contacts: %+v", contacts.Data)
		}
		path := "/api/v1/instances/" + alice.Id + "/contacts/" + contacts.Data[0].Id + "/picture"
		var pic gen.ContactPicture
		e.get(path, &pic)
		if pic.Media == nil || pic.Media.MimeType != "image/png" || pic.Media.Kind != "image" {
			t.Fatalf("picture = %+v", pic)
		}
		res := e.do(request{path: "/api/v1/media/" + pic.Media.Id + "/content", key: e.apiKey})
		img, err := png.Decode(bytes.NewReader([]byte(res.body)))
		if res.StatusCode != 200 || err != nil || img.Bounds().Dx() != 80 {
			t.Fatalf("the picture's file: %d %v", res.StatusCode, err)
		}
		// Kept: asked again, the same file and fetch time without asking the network.
		var again gen.ContactPicture
		e.get(path, &again)
		if again.Media == nil || again.Media.Id != pic.Media.Id || !again.FetchedAt.Equal(pic.FetchedAt) {
			t.Fatalf("the kept picture = %+v, first %+v", again, pic)
		}
		// Refreshed: the same picture is not stored twice.
		e.get(path+"?refresh=true", &again)
		if again.Media == nil || again.Media.Id != pic.Media.Id || !again.FetchedAt.After(pic.FetchedAt) {
			t.Fatalf("the refreshed same picture = %+v", again)
		}
		// Bob changes his display name: his picture changes with it.
		if res := e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bob.Id, key: e.apiKey,
			body: `{"config":{"auto_pair":true,"display_name":"Robert"}}`}); res.StatusCode != 200 {
			t.Fatalf("rename bob: %d %s", res.StatusCode, res.body)
		}
		e.post("/api/v1/instances/"+bob.Id+"/disconnect", "")
		e.status(bob.Id, "disconnected")
		e.post("/api/v1/instances/"+bob.Id+"/connect", "")
		e.status(bob.Id, "connected")
		e.get(path+"?refresh=true", &again)
		if again.Media == nil || again.Media.Id == pic.Media.Id {
			t.Fatalf("the changed picture = %+v", again)
		}

		// A looked-up number without an account has no picture.
		var looked gen.ContactLookupResult
		lres := e.post("/api/v1/instances/"+alice.Id+"/contacts/lookup", `{"addresses":["+9990000000001"]}`)
		if lres.StatusCode != 200 {
			t.Fatalf("lookup: %d %s", lres.StatusCode, lres.body)
		}
		lres.json(t, &looked)
		for _, r := range looked.Data {
			if r.Contact != nil {
				var none gen.ContactPicture
				e.get("/api/v1/instances/"+alice.Id+"/contacts/"+r.Contact.Id+"/picture", &none)
				if none.Media != nil {
					t.Errorf("a number without an account has a picture: %+v", none)
				}
			}
		}

		// Refused: another workspace's contact; a provider without pictures.
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:read")
		e.do(request{path: path, key: otherKey}).problem(t, 404, "not_found")
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.do(request{path: "/api/v1/instances/" + bare.Id + "/contacts/con_01JDAD3A1B2C3D4E5F6G7H8J9K/picture", key: e.apiKey}).
			problem(t, 422, "capability_not_supported")
	})
}

// A Telegram user's profile photo through the fake Bot API: getUserProfilePhotos then getFile, kept while the photo
// is the same, a new file when the user sets another, none for a user without one.
func TestTelegramContactPictures(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := telegramtest.Start(t)
		e := newProviderEnv(t, db, "Pictures", telegram.New(telegram.Options{PollTimeout: time.Second, BotInterval: time.Millisecond}))
		token := fake.AddBot(7401, "PictureBot")
		inst := e.instance("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q,"inbound":"polling"}`, token, fake.URL))
		e.post("/api/v1/instances/"+inst.Id+"/connect", "")
		e.status(inst.Id, "connected")
		for _, u := range []telegramtest.User{{ID: 701, FirstName: "Ada"}, {ID: 702, FirstName: "Bo"}} {
			upd, _ := fake.Message(token, u, "hi")
			fake.Push(token, upd)
		}
		contacts := await.Until(t, "two contacts", func() gen.ContactList {
			var l gen.ContactList
			e.get("/api/v1/instances/"+inst.Id+"/contacts", &l)
			return l
		}, func(l gen.ContactList) bool { return len(l.Data) == 2 })
		byAddress := map[string]string{}
		for _, c := range contacts.Data {
			byAddress[c.Addresses[0]] = c.Id
		}
		photo := []byte("\xff\xd8\xff\xe0 a jpeg of Ada")
		fake.SetProfilePhoto(token, 701, photo)
		path := "/api/v1/instances/" + inst.Id + "/contacts/" + byAddress["701"] + "/picture"
		var pic gen.ContactPicture
		e.get(path, &pic)
		if pic.Media == nil || pic.Media.Size != int64(len(photo)) || pic.Media.MimeType != "image/jpeg" {
			t.Fatalf("ada's picture = %+v", pic)
		}
		if res := e.do(request{path: "/api/v1/media/" + pic.Media.Id + "/content", key: e.apiKey}); string(res.body) != string(photo) {
			t.Fatalf("the file is %q", res.body)
		}
		var again gen.ContactPicture
		e.get(path+"?refresh=true", &again)
		if again.Media == nil || again.Media.Id != pic.Media.Id {
			t.Fatalf("the same photo was stored again: %+v", again)
		}
		fake.SetProfilePhoto(token, 701, []byte("\xff\xd8\xff\xe0 another jpeg"))
		e.get(path+"?refresh=true", &again)
		if again.Media == nil || again.Media.Id == pic.Media.Id {
			t.Fatalf("the new photo = %+v", again)
		}
		var none gen.ContactPicture
		e.get("/api/v1/instances/"+inst.Id+"/contacts/"+byAddress["702"]+"/picture", &none)
		if none.Media != nil {
			t.Fatalf("bo has a picture: %+v", none)
		}
		e.get(path, &again) // kept: not asked again
		if n := len(fake.Calls("getUserProfilePhotos")); n != 4 {
			t.Errorf("getUserProfilePhotos calls = %d, want 4 (a kept answer is not asked again)", n)
		}
	})
}
