package handlers_test

import (
	"bytes"
	"fmt"
	"image/color"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A Telegram group's settings and photo and the bot's own profile through the fake Bot API: an announcement
// group is one whose members may not send (setChatPermissions, the other permissions kept), locked info one whose
// members may not change it; the photo is set (setChatPhoto) and removed (deleteChatPhoto) and read back by
// getChat; the bot's name and about text are getMyName/setMyName and its short description; a bot has no profile
// photo of its own to set, which is refused before Telegram is asked.
func TestTelegramGroupSettingsPictureAndProfile(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := telegramtest.Start(t)
		e := newProviderEnv(t, db, "Groups", telegram.New(telegram.Options{PollTimeout: time.Second, BotInterval: time.Millisecond}))
		token := fake.AddBot(7501, "GroupBot")
		inst := e.instance("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q,"inbound":"polling"}`, token, fake.URL))
		e.post("/api/v1/instances/"+inst.Id+"/connect", "")
		e.status(inst.Id, "connected")
		fake.AddGroup(token, -1005555, "Team", 501)
		botUser := map[string]any{"id": 7501, "is_bot": true, "first_name": "GroupBot"}
		fake.Push(token, map[string]any{"my_chat_member": map[string]any{
			"chat": map[string]any{"id": -1005555, "type": "supergroup", "title": "Team"},
			"from": map[string]any{"id": 501, "is_bot": false, "first_name": "Ada"}, "date": time.Now().Unix(),
			"old_chat_member": map[string]any{"status": "left", "user": botUser},
			"new_chat_member": map[string]any{"status": "administrator", "user": botUser}}})
		var groups gen.GroupList
		for range 100 {
			if e.get("/api/v1/instances/"+inst.Id+"/groups", &groups); len(groups.Data) == 1 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(groups.Data) != 1 {
			t.Fatalf("groups = %+v", groups.Data)
		}
		gp := "/api/v1/instances/" + inst.Id + "/groups/" + groups.Data[0].Id

		var g gen.Group
		res := e.do(request{method: http.MethodPatch, path: gp, key: e.apiKey, body: `{"settings":{"send":"admins","edit_info":"admins"}}`})
		if res.json(t, &g); res.StatusCode != 200 || g.Settings == nil || g.Settings.Send != gen.GroupSettingsSendAdmins ||
			g.Settings.EditInfo != gen.GroupSettingsEditInfoAdmins {
			t.Fatalf("settings: %d %s", res.StatusCode, res.body)
		}
		perms := fake.Permissions(token, -1005555)
		if perms["can_send_messages"] || perms["can_send_photos"] || perms["can_change_info"] || !perms["can_invite_users"] {
			t.Fatalf("the group's permissions on Telegram = %v", perms)
		}
		res = e.do(request{method: http.MethodPatch, path: gp, key: e.apiKey, body: `{"settings":{"send":"all"}}`})
		if res.json(t, &g); res.StatusCode != 200 || g.Settings.Send != gen.GroupSettingsSendAll || g.Settings.EditInfo != gen.GroupSettingsEditInfoAdmins {
			t.Fatalf("send reopened: %d %s", res.StatusCode, res.body)
		}

		photo := jpegOf(t, color.RGBA{240, 200, 0, 255})
		file := e.upload("team.jpg", "image/jpeg", photo)
		var pic gen.GroupPicture
		res = e.do(request{method: http.MethodPut, path: gp + "/picture", key: e.apiKey, body: fmt.Sprintf(`{"media_id":%q}`, file.Id)})
		if res.json(t, &pic); res.StatusCode != 200 || pic.Media == nil || !bytes.Equal(fake.ChatPhoto(token, -1005555), photo) {
			t.Fatalf("set photo: %d %s", res.StatusCode, res.body)
		}
		e.get(gp+"/picture?refresh=true", &pic)
		if pic.Media == nil || pic.Media.Id != file.Id {
			t.Fatalf("the photo read back = %+v", pic.Media)
		}
		res = e.do(request{method: http.MethodDelete, path: gp + "/picture", key: e.apiKey})
		if res.json(t, &pic); res.StatusCode != 200 || pic.Media != nil || fake.ChatPhoto(token, -1005555) != nil {
			t.Fatalf("delete photo: %d %s", res.StatusCode, res.body)
		}

		pp := "/api/v1/instances/" + inst.Id + "/profile"
		var p gen.InstanceProfile
		res = e.do(request{method: http.MethodPatch, path: pp, key: e.apiKey, body: `{"name":"Acme Support","about":"Orders and returns, 9–17."}`})
		if res.json(t, &p); res.StatusCode != 200 || deref(p.Name) != "Acme Support" || deref(p.About) != "Orders and returns, 9–17." {
			t.Fatalf("profile: %d %s", res.StatusCode, res.body)
		}
		if name, about := fake.Profile(token); name != "Acme Support" || about != "Orders and returns, 9–17." {
			t.Fatalf("on Telegram: %q %q", name, about)
		}
		e.do(request{method: http.MethodPatch, path: pp, key: e.apiKey, body: fmt.Sprintf(`{"picture_media_id":%q}`, file.Id)}).
			problem(t, 422, "capability_not_supported")
		if n := len(fake.Calls("setMyName")); n != 1 {
			t.Errorf("setMyName calls = %d, want 1", n)
		}
	})
}
