package handlers_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"mime/multipart"
	"net/http"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// upload posts a file as a media file of the workspace and returns it.
func (e *msgEnv) upload(name, contentType string, content []byte) gen.Media {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, name)}
	h["Content-Type"] = []string{contentType}
	fw, _ := mw.CreatePart(h)
	_, _ = fw.Write(content)
	_ = mw.Close()
	res := e.do(request{method: http.MethodPost, path: "/api/v1/media", key: e.apiKey, body: buf.String(),
		header: map[string]string{"Content-Type": mw.FormDataContentType()}})
	if res.StatusCode != 201 {
		e.t.Fatalf("upload: %d %s", res.StatusCode, res.body)
	}
	var m gen.Media
	res.json(e.t, &m)
	return m
}

// jpegOf is a small JPEG image of one colour.
func jpegOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// groupUpdates are the group.updated events of an instance, oldest first.
func (e *msgEnv) groupUpdates(instanceID string) []gen.GroupUpdatedEvent {
	e.t.Helper()
	return instanceEvents(e, "group.updated", instanceID, func(g gen.GroupUpdatedEvent) (string, int64) {
		return g.InstanceId, g.Sequence
	})
}

// A group's settings and picture through the sandbox: the owner makes it an announcement group (a member's send
// then fails on the network) and opens its info to every participant (a member may then rename it); a picture set
// from a media file is the group's picture for every participant, and removing it leaves none; each change is a
// group.updated naming it. Refused: a member changing settings, a file that is no image or not there, another
// workspace's group, and a provider without the capabilities — each before anything changes.
func TestGroupSettingsAndPicture(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		alice, bob := e.connected("Alice"), e.connected("Bob")
		res := e.post("/api/v1/instances/"+alice.Id+"/groups",
			fmt.Sprintf(`{"subject":"Launch","participants":[%q]}`, bob.Account.Address))
		if res.StatusCode != 201 {
			t.Fatalf("group: %d %s", res.StatusCode, res.body)
		}
		var group gen.GroupCreated
		res.json(t, &group)
		if group.Settings == nil || group.Settings.Send != gen.GroupSettingsSendAll || group.Settings.EditInfo != gen.GroupSettingsEditInfoAdmins {
			t.Fatalf("a new group's settings = %+v", group.Settings)
		}
		bobGroup := await.Until(t, "bob's group", func() gen.GroupList {
			var l gen.GroupList
			e.get("/api/v1/instances/"+bob.Id+"/groups", &l)
			return l
		}, func(l gen.GroupList) bool { return len(l.Data) == 1 }).Data[0]
		alicePath := "/api/v1/instances/" + alice.Id + "/groups/" + group.Id
		bobPath := "/api/v1/instances/" + bob.Id + "/groups/" + bobGroup.Id

		// Bob, a member, may not change the settings; info is admins-only, so neither the subject.
		e.do(request{method: http.MethodPatch, path: bobPath, key: e.apiKey, body: `{"settings":{"send":"admins"}}`}).
			problem(t, 409, "conflict")
		e.do(request{method: http.MethodPatch, path: bobPath, key: e.apiKey, body: `{"subject":"Mine"}`}).
			problem(t, 409, "conflict")

		// Alice makes it an announcement group and lets everyone edit its info.
		res = e.do(request{method: http.MethodPatch, path: alicePath, key: e.apiKey,
			body: `{"settings":{"send":"admins","edit_info":"all"}}`})
		var g gen.Group
		if res.json(t, &g); res.StatusCode != 200 || g.Settings == nil || g.Settings.Send != gen.GroupSettingsSendAdmins ||
			g.Settings.EditInfo != gen.GroupSettingsEditInfoAll {
			t.Fatalf("settings: %d %s", res.StatusCode, res.body)
		}
		updates := e.groupUpdates(alice.Id)
		if last := updates[len(updates)-1]; !slices.Equal(last.Changed, []string{"settings"}) || last.Group.Settings.Send != gen.GroupSettingsSendAdmins {
			t.Fatalf("the settings' event = %+v", last)
		}
		// Bob is told: his copy of the group has the settings too.
		await.Until(t, "bob's copy of the settings", func() gen.Group {
			var bg gen.Group
			e.get(bobPath, &bg)
			return bg
		}, func(bg gen.Group) bool { return bg.Settings != nil && bg.Settings.Send == gen.GroupSettingsSendAdmins })
		// His group.updated names what the network changed, as the one of the change made here does.
		if bu := e.groupUpdates(bob.Id); !slices.Equal(bu[len(bu)-1].Changed, []string{"settings"}) {
			t.Fatalf("bob's group.updated = %+v", bu[len(bu)-1].Changed)
		}
		// A member's message to an announcement group fails on the network; his rename now succeeds.
		res = e.post("/api/v1/instances/"+bob.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"hi all"}`, group.Address))
		var sent gen.Message
		res.json(t, &sent)
		failed := await.Until(t, "bob's send to fail", func() gen.Message {
			var m gen.Message
			e.get("/api/v1/instances/"+bob.Id+"/messages/"+sent.Id, &m)
			return m
		}, func(m gen.Message) bool { return m.Status == gen.MessageStatusFailed })
		if failed.Failure == nil || failed.Failure.Code != "not_group_admin" {
			t.Fatalf("bob's failed send = %+v", failed.Failure)
		}
		if res := e.do(request{method: http.MethodPatch, path: bobPath, key: e.apiKey, body: `{"subject":"Launch 2027"}`}); res.StatusCode != 200 {
			t.Fatalf("bob's rename with open info: %d %s", res.StatusCode, res.body)
		}

		// A picture: set from a JPEG file, read back by Bob, removed.
		jpg := e.upload("team.jpg", "image/jpeg", jpegOf(t, color.RGBA{200, 30, 30, 255}))
		var pic gen.GroupPicture
		res = e.do(request{method: http.MethodPut, path: alicePath + "/picture", key: e.apiKey, body: fmt.Sprintf(`{"media_id":%q}`, jpg.Id)})
		if res.json(t, &pic); res.StatusCode != 200 || pic.Media == nil || pic.Media.Id != jpg.Id || pic.GroupId != group.Id {
			t.Fatalf("set picture: %d %s", res.StatusCode, res.body)
		}
		if last := e.groupUpdates(alice.Id); !slices.Equal(last[len(last)-1].Changed, []string{"picture"}) {
			t.Fatalf("the picture's event = %+v", last[len(last)-1])
		}
		var kept gen.GroupPicture
		e.get(alicePath+"/picture", &kept)
		if kept.Media == nil || kept.Media.Id != jpg.Id {
			t.Fatalf("alice's kept picture = %+v", kept)
		}
		var seen gen.GroupPicture
		e.get(bobPath+"/picture", &seen)
		if seen.Media == nil || seen.Media.Sha256 != jpg.Sha256 || seen.Media.MimeType != "image/jpeg" {
			t.Fatalf("bob sees %+v, want the file %s", seen.Media, jpg.Sha256)
		}
		res = e.do(request{method: http.MethodDelete, path: alicePath + "/picture", key: e.apiKey})
		if res.json(t, &pic); res.StatusCode != 200 || pic.Media != nil {
			t.Fatalf("remove picture: %d %s", res.StatusCode, res.body)
		}
		e.get(bobPath+"/picture?refresh=true", &seen)
		if seen.Media != nil {
			t.Fatalf("bob still sees a picture: %+v", seen.Media)
		}

		// Refused up front: no image, no such file, another workspace's group, a provider without the capability.
		txt := e.upload("note.txt", "text/plain", []byte("not a picture"))
		e.do(request{method: http.MethodPut, path: alicePath + "/picture", key: e.apiKey, body: fmt.Sprintf(`{"media_id":%q}`, txt.Id)}).
			problem(t, 400, "validation_failed")
		e.do(request{method: http.MethodPut, path: alicePath + "/picture", key: e.apiKey, body: `{"media_id":"med_01JDAD5A1B2C3D4E5F6G7H8J9K"}`}).
			problem(t, 422, "reference_not_found")
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{method: http.MethodPut, path: alicePath + "/picture", key: otherKey, body: fmt.Sprintf(`{"media_id":%q}`, jpg.Id)}).
			problem(t, 404, "not_found")
		e.do(request{method: http.MethodPatch, path: alicePath, key: otherKey, body: `{"settings":{"send":"all"}}`}).
			problem(t, 404, "not_found")
		bare := e.instance("bare", `{"token":"abcd"}`)
		gid := "grp_01JDAD4A1B2C3D4E5F6G7H8J9K"
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bare.Id + "/groups/" + gid, key: e.apiKey,
			body: `{"settings":{"send":"all"}}`}).problem(t, 422, "capability_not_supported")
		e.do(request{method: http.MethodPut, path: "/api/v1/instances/" + bare.Id + "/groups/" + gid + "/picture", key: e.apiKey,
			body: fmt.Sprintf(`{"media_id":%q}`, jpg.Id)}).problem(t, 422, "capability_not_supported")
		e.do(request{method: http.MethodPatch, path: alicePath, key: e.apiKey, body: `{"settings":{"send":"everyone"}}`}).
			problem(t, 400, "validation_failed")
		e.do(request{method: http.MethodPatch, path: alicePath, key: e.apiKey, body: `{"settings":{}}`}).
			problem(t, 400, "validation_failed")
	})
}

// The instance's own profile through the sandbox: name and about text read from the network and changed there
// (its contacts see the new name; the instance's account shows it; instance.updated names what changed), a picture
// set from a media file and read back, removed; refused for a provider without profiles and for another
// workspace's instance.
func TestInstanceProfile(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
		alice, bob, _, _ := e.talking("Alice", "Bob")
		path := "/api/v1/instances/" + alice.Id + "/profile"
		var p gen.InstanceProfile
		e.get(path, &p)
		if p.Name == nil || *p.Name != "Alice" || p.About == nil || *p.About != "" || p.Picture == nil || p.InstanceId != alice.Id {
			t.Fatalf("profile = %+v", p)
		}
		drawn := p.Picture.Id
		jpg := e.upload("me.jpg", "image/jpeg", jpegOf(t, color.RGBA{20, 120, 220, 255}))
		res := e.do(request{method: http.MethodPatch, path: path, key: e.apiKey,
			body: fmt.Sprintf(`{"name":"Alice Support","about":"We answer within the hour.","picture_media_id":%q}`, jpg.Id)})
		if res.json(t, &p); res.StatusCode != 200 || deref(p.Name) != "Alice Support" || deref(p.About) != "We answer within the hour." ||
			p.Picture == nil || p.Picture.Id != jpg.Id {
			t.Fatalf("update: %d %s", res.StatusCode, res.body)
		}
		var inst gen.Instance
		e.get("/api/v1/instances/"+alice.Id, &inst)
		if inst.Account == nil || deref(inst.Account.DisplayName) != "Alice Support" {
			t.Fatalf("the instance's account = %+v", inst.Account)
		}
		ups := instanceEvents(e, "instance.updated", alice.Id, func(u gen.InstanceUpdatedEvent) (string, int64) { return u.InstanceId, u.Sequence })
		if last := ups[len(ups)-1]; !slices.Equal(last.Changed, []string{"profile.name", "profile.about", "profile.picture"}) {
			t.Fatalf("instance.updated = %+v", last.Changed)
		}
		// Bob's contact of Alice takes the new name.
		await.Until(t, "bob's contact renamed", func() gen.ContactList {
			var l gen.ContactList
			e.get("/api/v1/instances/"+bob.Id+"/contacts", &l)
			return l
		}, func(l gen.ContactList) bool {
			return len(l.Data) == 1 && deref(l.Data[0].DisplayName) == "Alice Support"
		})
		// Read again: the same picture is the same file.
		e.get(path, &p)
		if p.Picture == nil || p.Picture.Id != jpg.Id {
			t.Fatalf("the kept picture = %+v", p.Picture)
		}
		// Removed: the network draws its own again.
		res = e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: `{"picture_media_id":null}`})
		if res.json(t, &p); res.StatusCode != 200 || p.Picture == nil || p.Picture.Id == jpg.Id || p.Picture.Id == drawn {
			t.Fatalf("removed: %d %s", res.StatusCode, res.body)
		}

		// Refused: a provider without profiles, another workspace, bad input, a file that is not there.
		bare := e.instance("bare", `{"token":"abcd"}`)
		e.do(request{path: "/api/v1/instances/" + bare.Id + "/profile", key: e.apiKey}).problem(t, 422, "capability_not_supported")
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + bare.Id + "/profile", key: e.apiKey,
			body: `{"about":"x"}`}).problem(t, 422, "capability_not_supported")
		otherKey, _ := e.key(e.workspace("Other").ID, "messaging:write")
		e.do(request{path: path, key: otherKey}).problem(t, 404, "not_found")
		e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: `{}`}).problem(t, 400, "validation_failed")
		e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: `{"name":"   "}`}).problem(t, 400, "validation_failed")
		e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: `{"picture_media_id":"med_01JDAD5A1B2C3D4E5F6G7H8J9K"}`}).
			problem(t, 422, "reference_not_found")
		e.do(request{method: http.MethodPatch, path: path, key: e.apiKey, body: `{"name":"A name far longer than the sandbox allows"}`}).
			problem(t, 400, "validation_failed")
	})
}
