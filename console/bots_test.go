package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The bots on an instance's page: a model bot added with the form (a refused form says why) answers a message from
// another instance through a fake OpenAI-compatible upstream, its run shows on the page with the tokens it cost;
// the handoff keyword lists the chat as with a human until it is given back; a bot stops and starts; a workflow
// bot's signing secret is shown once; another workspace gets 404.
func TestBotsOnTheInstancePage(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		a, _ := apptest.WithBots(t, db, app.Config{})
		e := newEnv(t, db, console.Config{Channels: a.Messaging, Bots: a.Bots, LLM: a.LLM})
		b := e.browser()
		b.newUser(t, "bots")
		ws := b.newWorkspace(t, "Bots")

		connected := func(name string) store.Instance {
			r := b.postCSRF(t, "/user/channels", url.Values{"name": {name}, "provider": {"sandbox"},
				"config.sandbox.auto_pair": {"true"}, "config.sandbox.display_name": {name}})
			if r.StatusCode != http.StatusSeeOther {
				t.Fatalf("create %s: %d %s", name, r.StatusCode, r.text())
			}
			id := strings.TrimPrefix(r.location(t).Path, "/user/channels/")
			b.postCSRF(t, "/user/channels/"+id+"/connect", url.Values{})
			return await.Until(t, name+" connected", func() store.Instance {
				i, _ := a.Messaging.Get(ctx, ws.ID, id)
				return i
			}, func(i store.Instance) bool { return i.Status == "connected" })
		}
		alice, bob := connected("Alice"), connected("Bob")
		page := "/user/channels/" + bob.ID

		empty := b.get(t, page)
		empty.wantText(t, "No bots yet")
		empty.wantText(t, "No chat is with a human")
		if !strings.Contains(empty.body, `<option value="llama3.1">`) {
			t.Fatal("the form does not offer the upstream's model")
		}

		// Refused: a model bot without its model; the page keeps what was typed.
		bad := b.postCSRF(t, page+"/bots", url.Values{"name": {"Helper"}, "kind": {"model"}, "trigger": {"all"}})
		bad.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(bad.alert(), "The bot was not added") || bad.fieldByID(t, "bot-name") != "Helper" {
			t.Fatalf("refused form: alert %q, name %q", bad.alert(), bad.fieldByID(t, "bot-name"))
		}
		b.postCSRF(t, page+"/bots", url.Values{"name": {"Helper"}, "kind": {"model"}, "model": {"llama3.1"},
			"trigger": {"all"}, "keyword": {"human"}, "minutes": {"0"}, "tokens_per_day": {"5000"},
			"system_prompt": {"Be brief."}}).wantRedirect(t, page+"?done=bot-added#bots")
		bots, _, err := a.Bots.List(ctx, ws.ID, bob.ID, store.Page{Limit: 10})
		if err != nil || len(bots) != 1 {
			t.Fatalf("bots = %v, %v", bots, err)
		}
		botID := bots[0].ID

		// Alice writes to Bob; the bot answers and its run shows with its tokens.
		b.postCSRF(t, "/user/channels/"+alice.ID+"/send", url.Values{"to": {bob.Account.Address}, "text": {"hello bot"}})
		// The page reads the messages before the bots: one render can show the run replied and not yet its reply.
		answered := await.Until(t, "the bot's run and its reply on the page", func() *resp { return b.get(t, page) },
			func(r *resp) bool {
				return strings.Contains(r.body, `<span class="badge status-replied">replied</span>`) &&
					strings.Contains(r.body, "echo: hello bot")
			})
		answered.wantText(t, "echo: hello bot")
		answered.wantText(t, "18 tokens")
		answered.wantText(t, "5000 tokens a day")

		// "human": the chat is with a human until given back.
		b.postCSRF(t, "/user/channels/"+alice.ID+"/send", url.Values{"to": {bob.Account.Address}, "text": {"human"}})
		taken := await.Until(t, "the chat with a human", func() *resp { return b.get(t, page) },
			func(r *resp) bool { return strings.Contains(r.body, `id="takeover-cht_`) })
		taken.wantText(t, alice.Account.Address)
		taken.wantText(t, "until given back")
		chat := taken.body[strings.Index(taken.body, `id="takeover-cht_`)+len(`id="takeover-`):]
		chat = chat[:strings.IndexByte(chat, '"')]
		b.postCSRF(t, page+"/chats/"+chat+"/resume", url.Values{}).wantRedirect(t, page+"?done=bot-resumed#bots")
		b.get(t, page).wantText(t, "No chat is with a human")

		// Stop and start.
		b.postCSRF(t, page+"/bots/"+botID+"/disable", url.Values{}).wantRedirect(t, page+"?done=bot-disable#bots")
		if !strings.Contains(b.get(t, page).body, `data-enabled="false"`) {
			t.Fatal("the stopped bot is not shown off")
		}
		b.postCSRF(t, page+"/bots/"+botID+"/enable", url.Values{}).wantRedirect(t, page+"?done=bot-enable#bots")

		// A workflow bot: its secret in the answer, and never again.
		wf := b.postCSRF(t, page+"/bots", url.Values{"name": {"Flow"}, "kind": {"workflow"}, "trigger": {"keyword"},
			"pattern": {"order"}, "url": {"http://127.0.0.1:9/bot"}})
		wf.wantStatus(t, http.StatusOK)
		secret, _ := wf.elementText("bot-signing-secret")
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("no signing secret shown: %q", secret)
		}
		if strings.Contains(b.get(t, page).body, "whsec_") {
			t.Fatal("the signing secret is shown again")
		}

		// Another workspace's member reaches none of it; the delete needs the form's token.
		other := e.browser()
		other.newUser(t, "intruder")
		other.newWorkspace(t, "Elsewhere")
		other.postCSRF(t, page+"/bots/"+botID+"/delete", url.Values{}).wantStatus(t, http.StatusNotFound)
		other.postCSRF(t, page+"/bots", url.Values{"name": {"Mine"}, "kind": {"model"}, "model": {"llama3.1"}}).
			wantStatus(t, http.StatusNotFound)
		b.post(t, page+"/bots/"+botID+"/delete", url.Values{}).wantStatus(t, http.StatusForbidden)
		b.postCSRF(t, page+"/bots/"+botID+"/delete", url.Values{}).wantRedirect(t, page+"?done=bot-delete#bots")
		if _, err := a.Bots.Get(ctx, ws.ID, bob.ID, botID); err == nil {
			t.Fatal("the bot was not deleted")
		}
	})
}
