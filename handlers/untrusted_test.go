package handlers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud/cloudtest"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// untrustedEnv is a server that takes bytes from outside without an API key: a source's ingest URL (scheme none,
// limits at their highest) and the hook URLs of a Telegram and a WhatsApp Cloud instance, whose pushes it signs as
// the networks do. The networks' APIs are a fake that serves any file a push names, so that what a push carries is
// what is tested, not a download.
type untrustedEnv struct {
	*env
	ws                             string // the workspace of the instances and the source
	key                            string
	ingest                         string
	telegramHook, telegramSecret   string
	whatsappHook, appSecret, phone string
}

func newUntrustedEnv(t testing.TB, db *store.DB) *untrustedEnv {
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	box, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	files := httptest.NewServer(http.HandlerFunc(anyFile))
	t.Cleanup(files.Close)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	outbox := events.NewOutbox(db, events.Builtin())
	rec, err := channels.NewRecorder(db, outbox, channels.Config{Sealer: box, Logger: log, BaseURL: publicURL,
		Providers: []channels.Provider{telegram.New(telegram.Options{PublicURL: publicURL}), whatsappcloud.New(whatsappcloud.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	// A process that runs no channel runtime: the API alone.
	svc, err := channels.New(rec, channels.NoRuntime)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, db, handlers.Config{Events: outbox, Channels: svc, Logger: log,
		Box: box, AddressRateLimit: 1 << 30, HookRateLimit: 1 << 30})
	ws := e.workspace("Untrusted")
	u := &untrustedEnv{env: e, ws: ws.ID, appSecret: "the-app-secret-of-the-fuzz", phone: "106540352242922",
		telegramSecret: "the-webhook-secret-token-of-the-fuzz"}
	u.key, _ = e.key(ws.ID, "automation:write", "messaging:write")

	var src sourceBody
	res := e.do(request{method: http.MethodPost, path: "/api/v1/sources", key: u.key, body: `{"name":"Any",
		"event_type":"custom.any.thing","verification":{"scheme":"none"},"dedup":{"pointer":"/id"},
		"limits":{"max_body_bytes":1048576,"rate_limit_per_minute":100000}}`})
	if res.json(t, &src); res.StatusCode != http.StatusCreated {
		t.Fatalf("create source: %d %s", res.StatusCode, res.body)
	}
	u.ingest = src.IngestURL[strings.Index(src.IngestURL, "/in/"):]

	instance := func(provider string, config map[string]any) string {
		b, _ := json.Marshal(map[string]any{"name": provider, "provider": provider, "config": config})
		res := e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: u.key, body: string(b)})
		var inst struct{ ID string }
		if res.json(t, &inst); res.StatusCode != http.StatusCreated {
			t.Fatalf("create %s instance: %d %s", provider, res.StatusCode, res.body)
		}
		return inst.ID
	}
	tg := instance("telegram", map[string]any{"bot_token": "7001:AAHthe-bot-token-of-the-fuzz-0123", "api_url": files.URL})
	// The secret Telegram sends with each push is what the session saved when it registered the webhook.
	creds, _ := json.Marshal(map[string]string{"webhook_secret": u.telegramSecret})
	if err := svc.SinkFor(tg).Connected(context.Background(), channels.Party{Address: "7001"}, creds); err != nil {
		t.Fatal(err)
	}
	wa := instance("whatsapp_cloud", map[string]any{"phone_number_id": u.phone, "access_token": "EAAJthe-access-token-of-the-fuzz",
		"app_secret": u.appSecret, "verify_token": "the-verify-token-of-the-fuzz", "base_url": files.URL})
	u.telegramHook, u.whatsappHook = "/hooks/channels/"+tg, "/hooks/channels/"+wa
	return u
}

// anyFile answers the file calls of both networks' APIs for any file: Telegram's getFile and file download, the
// Graph API's media URL lookup and download.
func anyFile(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/getFile"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"result":{"file_id":"f","file_unique_id":"u","file_size":3,"file_path":"files/f"}}`)
	case strings.HasPrefix(r.URL.Path, "/file/") || r.URL.Path == "/download":
		_, _ = io.WriteString(w, "abc")
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"url":"http://%s/download","mime_type":"image/jpeg","file_size":3}`, r.Host)
	}
}

// pushTelegram posts body to the Telegram instance's hook URL with its secret, as Telegram does.
func (u *untrustedEnv) pushTelegram(body []byte) *http.Response {
	return u.raw(http.MethodPost, u.telegramHook, "application/json", body,
		map[string]string{"X-Telegram-Bot-Api-Secret-Token": u.telegramSecret})
}

// pushWhatsApp posts body to the WhatsApp Cloud instance's hook URL signed with its app secret, as Meta does.
func (u *untrustedEnv) pushWhatsApp(body []byte) *http.Response {
	return u.raw(http.MethodPost, u.whatsappHook, "application/json", body,
		map[string]string{"X-Hub-Signature-256": cloudtest.Sign(body, u.appSecret)})
}

// raw sends a request through the server's handler in this process (no network: the fuzz target sends many).
func (u *untrustedEnv) raw(method, path, contentType string, body []byte, header map[string]string) *http.Response {
	req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	u.srv.ServeHTTP(w, req)
	return w.Result()
}

// A verified push whose strings hold what a text column cannot keep — U+0000 (JSON's \u0000) in a message's text, a
// sender's name, a file's name, a caption; bytes that are not UTF-8 — is stored, those characters shown as U+FFFD,
// and answered 200: a network retries anything else, and the message would never arrive.
func TestPushesWithUnstorableTextAreStored(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		u := newUntrustedEnv(t, db)
		for _, c := range []struct {
			name string
			push func([]byte) *http.Response
			body string
		}{
			{"telegram text", u.pushTelegram, `{"update_id":1,"message":{"message_id":1,"date":1700000000,
				"chat":{"id":501,"type":"private"},"from":{"id":501,"is_bot":false,"first_name":"A\u0000da"},
				"text":"hello\u0000bot"}}`},
			{"telegram document", u.pushTelegram, `{"update_id":2,"message":{"message_id":2,"date":1700000000,
				"chat":{"id":501,"type":"private"},"from":{"id":501,"is_bot":false,"first_name":"Ada"},
				"caption":"see\u0000this","document":{"file_id":"d1","file_unique_id":"u1","file_name":"re\u0000port.pdf",
				"mime_type":"application/pdf","file_size":3}}}`},
			{"whatsapp text", u.pushWhatsApp, `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages",
				"value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + u.phone + `"},
				"contacts":[{"wa_id":"15550100002","profile":{"name":"B\u0000ob` + "\xff" + `"}}],
				"messages":[{"from":"15550100002","id":"wamid.1","timestamp":"1700000000","type":"text",
				"text":{"body":"hi\u0000there"}}]}}]}]}`},
			{"whatsapp document", u.pushWhatsApp, `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages",
				"value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + u.phone + `"},
				"messages":[{"from":"15550100002","id":"wamid.2","timestamp":"1700000000","type":"document",
				"document":{"id":"m1","mime_type":"application/pdf","filename":"in\u0000voice.pdf","caption":"a\u0000b"}}]}}]}]}`},
		} {
			res := c.push([]byte(c.body))
			if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s", c.name, res.StatusCode, b)
			}
		}
		var texts []string
		// This test's own rows: other tests share the PostgreSQL database.
		if err := db.Bun().NewSelect().Table("messages").ColumnExpr("COALESCE(text, '')").Where("workspace_id = ?", u.ws).
			Order("id").Scan(context.Background(), &texts); err != nil {
			t.Fatal(err)
		}
		if strings.Join(texts, "|") != "hello\uFFFDbot||hi\uFFFDthere|" {
			t.Errorf("texts %q", texts)
		}
		var names []string
		if err := db.Bun().NewSelect().Table("media").Column("filename").Where("workspace_id = ?", u.ws).Order("id").
			Scan(context.Background(), &names); err != nil {
			t.Fatal(err)
		}
		if strings.Join(names, "|") != "re\uFFFDport.pdf|in\uFFFDvoice.pdf" {
			t.Errorf("media names %q", names)
		}
	})
}

// Routes of FuzzUntrustedBytes: where an input goes.
const (
	toIngest = iota
	toTelegram
	toWhatsApp
	routes
)

// Any bytes at all, sent to a source's ingest URL (with any content type) or as a verified push to a Telegram or
// WhatsApp Cloud hook URL, on both databases, are answered without a 5xx: stored, or refused with a 4xx problem.
// `make fuzz` runs it; go test runs the seeds.
func FuzzUntrustedBytes(f *testing.F) {
	for _, s := range []struct {
		route       uint8
		contentType string
		body        string
	}{
		{toIngest, "application/json", `{"id":"a1","s":"caf\u00e9","n":[1,2.5e300,null,true]}`},
		{toIngest, "application/json", `{"s":"a\u0000b"}`},
		{toIngest, "application/json", "{\"s\":\"a\x00b\xff\"}"},
		{toIngest, "application/json", `[{"a\u0000":1}]`},
		{toIngest, "text/plain", "a\x00b"},
		{toIngest, "text/plain; charset=latin1", "caf\xe9"},
		{toIngest, "application/x-www-form-urlencoded", "id=1&a=%00&a=%FF&%00=x"},
		{toIngest, "application/cloudevents+json", `{"id":7}`},
		{toIngest, "", ""},
		{toTelegram, "", `{"update_id":1,"message":{"message_id":1,"date":1700000000,"chat":{"id":501,"type":"private"},
			"from":{"id":501,"is_bot":false,"first_name":"A\u0000","username":"a\u0000"},"text":"hi\u0000"}}`},
		{toTelegram, "", `{"update_id":2,"message":{"message_id":2,"date":1,"chat":{"id":-100,"type":"group","title":"\u0000"},
			"from":{"id":9,"is_bot":false,"first_name":"B"},"document":{"file_id":"\u0000","file_unique_id":"u",
			"file_name":"\u0000.pdf","mime_type":"\u0000","file_size":3},"caption":"\u0000"}}`},
		{toTelegram, "", `{"update_id":3,"edited_message":{"message_id":1,"date":1,"edit_date":2,"chat":{"id":501,"type":"private"},
			"from":{"id":501,"is_bot":false,"first_name":"A"},"text":"\u0000"}}`},
		{toTelegram, "", `{"update_id":4,"callback_query":{"id":"\u0000","from":{"id":501,"is_bot":false,"first_name":"A"},
			"data":"\u0000","chat_instance":"c"}}`},
		{toTelegram, "", `{"update_id":5,"my_chat_member":{"chat":{"id":-5,"type":"group","title":"T\u0000"},"from":{"id":1,
			"is_bot":false,"first_name":"x"},"date":1,"old_chat_member":{"status":"left","user":{"id":7001,"is_bot":true,
			"first_name":"bot"}},"new_chat_member":{"status":"member","user":{"id":7001,"is_bot":true,"first_name":"bot"}}}}`},
		{toWhatsApp, "", `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
			"messaging_product":"whatsapp","metadata":{"phone_number_id":"106540352242922"},
			"contacts":[{"wa_id":"15550100002","profile":{"name":"\u0000"}}],
			"messages":[{"from":"15550100002","id":"wamid.\u0000","timestamp":"1700000000","type":"text","text":{"body":"\u0000"}},
			{"from":"15550100002","id":"wamid.2","timestamp":"x","type":"image","image":{"id":"../\u0000?x","mime_type":"\u0000"}},
			{"from":"\u0000","id":"wamid.3","timestamp":"1","type":"location","location":{"latitude":91.5,"name":"\u0000"}},
			{"from":"15550100002","id":"wamid.4","timestamp":"1","type":"contacts","contacts":[{"name":{"formatted_name":"\u0000"},
			"phones":[{"phone":"\u0000"}]}]},
			{"from":"15550100002","id":"wamid.5","timestamp":"1","type":"reaction","reaction":{"message_id":"wamid.1","emoji":"\u0000"}}],
			"statuses":[{"id":"wamid.\u0000","status":"failed","timestamp":"1","recipient_id":"1",
			"errors":[{"code":131026,"title":"\u0000"}]}]}}]}]}`},
	} {
		f.Add(s.route, s.contentType, []byte(s.body))
	}
	envs := []*untrustedEnv{newUntrustedEnv(f, storetest.SQLite(f)), newUntrustedEnv(f, storetest.Postgres(f))}
	f.Fuzz(func(t *testing.T, route uint8, contentType string, body []byte) {
		for _, u := range envs {
			var res *http.Response
			switch route % routes {
			case toIngest:
				res = u.raw(http.MethodPost, u.ingest, contentType, body, nil)
			case toTelegram:
				res = u.pushTelegram(body)
			case toWhatsApp:
				res = u.pushWhatsApp(body)
			}
			if res.StatusCode >= 500 {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("route %d, %q, %q: %d %s", route%routes, contentType, body, res.StatusCode, b)
			}
		}
	})
}
