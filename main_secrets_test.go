package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud/cloudtest"
)

// Every kind of secret a deployment handles goes through a real server that logs at debug level, on both
// databases: console passwords, session cookies and CSRF tokens; an API key made in the console (and a made-up one
// refused); webhook secrets, rotated; source secrets of four schemes and ingest tokens, rotated, with accepted,
// refused, oversized and unstorable requests and URL checks; a Telegram bot token (a bot polling, a file that fails
// to download, a token Telegram refuses); a WhatsApp Cloud access token, app secret and verify token (Meta's URL
// check and its echoed challenge, signed and forged pushes, a refused token). Neither the server's log nor /metrics
// holds any of them; an ingest URL is logged as its prefix and last four characters.
func TestNoSecretInLogs(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		tg, wa := telegramtest.Start(t), cloudtest.Start(t)
		var delivered atomic.Int64
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { delivered.Add(1) }))
		t.Cleanup(receiver.Close)
		srv := runServer(t, dbURL, "", append([]string{"SWITCHBOARD_LOG_LEVEL=debug"}, webhookEnv...)...)
		s := &secretTraffic{t: t, base: srv.url, secrets: map[string]string{}}

		s.console()
		s.browserKey()
		s.webhooks(receiver.URL, &delivered)
		s.sources()
		s.telegram(tg)
		s.whatsapp(wa)
		s.secret("a made-up API key", "sb_sk_"+strings.Repeat("Zx9", 12)+"Qq")
		if status, _ := s.api(http.MethodGet, "/api/v1/models", "", s.secrets["a made-up API key"]); status != 401 {
			t.Errorf("a made-up key: %d", status)
		}
		s.secret("a made-up browser key", "sb_pk_"+strings.Repeat("Zx9", 12)+"Qq")
		if status, _ := s.api(http.MethodGet, "/api/v1/models", "", s.secrets["a made-up browser key"]); status != 401 {
			t.Errorf("a made-up browser key: %d", status)
		}
		_, metrics := s.request(http.MethodGet, "/metrics", "", "", nil)

		logs := srv.stop()
		for name, secret := range s.secrets {
			if strings.Contains(logs, secret) {
				t.Errorf("the log holds %s", name)
			}
			if strings.Contains(metrics, secret) {
				t.Errorf("/metrics holds %s", name)
			}
		}
		for _, token := range s.tokens {
			if want := `"path":"/in/in_***` + token[len(token)-4:]; !strings.Contains(logs, want) {
				t.Errorf("no access log line with %s", want)
			}
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
}

// secretTraffic drives a server with secrets and remembers each by what it is.
type secretTraffic struct {
	t       *testing.T
	base    string
	client  *http.Client
	key     string
	secrets map[string]string
	// tokens are the ingest tokens used, whose redacted form the access log must show.
	tokens []string
}

func (s *secretTraffic) secret(name, value string) string {
	s.secrets[name] = value
	return value
}

// request sends a request with the console's cookies; it returns the status and the body.
func (s *secretTraffic) request(method, path, contentType, body string, header map[string]string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := s.client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// api calls the API with a key (the console's unless given) and returns the status and body.
func (s *secretTraffic) api(method, path, body string, key ...string) (int, string) {
	s.t.Helper()
	k := s.key
	if len(key) > 0 {
		k = key[0]
	}
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return s.request(method, path, ct, body, map[string]string{"Authorization": "Bearer " + k})
}

// apiJSON calls the API, requires a 2xx and decodes the answer.
func (s *secretTraffic) apiJSON(method, path, body string, v any) {
	s.t.Helper()
	status, out := s.api(method, path, body)
	if status >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, status, out)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			s.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

var (
	inputField = regexp.MustCompile(`<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"`)
	keyPattern = regexp.MustCompile(`sb_[sp]k_[0-9A-Za-z]{38}`)
)

// form reads the hidden fields of a console page.
func (s *secretTraffic) form(path string) url.Values {
	s.t.Helper()
	status, page := s.request(http.MethodGet, path, "", "", nil)
	if status != http.StatusOK {
		s.t.Fatalf("GET %s: %d", path, status)
	}
	v := url.Values{}
	for _, m := range inputField.FindAllStringSubmatch(page, -1) {
		if v.Get(m[1]) == "" {
			v.Set(m[1], m[2])
		}
	}
	return v
}

// post sends a console form from the page it belongs to, as a browser on this origin does.
func (s *secretTraffic) post(path string, form url.Values) (int, string) {
	s.t.Helper()
	return s.request(http.MethodPost, path, "application/x-www-form-urlencoded", form.Encode(),
		map[string]string{"Origin": s.base})
}

// console signs up, makes a workspace and a key with full access (the key the rest uses), signs out and in again.
func (s *secretTraffic) console() {
	t := s.t
	jar, _ := cookiejar.New(nil)
	s.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	email, password := "ada@example.com", s.secret("a console password", "correct horse battery staple 0xC0FFEE")
	form := s.form("/user/sign-up")
	s.secret("a sign-up CSRF token", form.Get("csrf_token"))
	form.Set("email", email)
	form.Set("password", password)
	if status, body := s.post("/user/sign-up", form); status != http.StatusSeeOther && status != http.StatusFound {
		t.Fatalf("sign-up: %d %s", status, body)
	}
	form = s.form("/user/workspaces")
	form.Set("name", "Secrets")
	if status, body := s.post("/user/workspaces", form); status >= 400 {
		t.Fatalf("create workspace: %d %s", status, body)
	}
	form = s.form("/user/api")
	s.secret("a session's CSRF token", form.Get("csrf_token"))
	form.Set("name", "everything")
	form.Set("preset", "full")
	form.Set("expiry", "never")
	status, page := s.post("/user/api/keys", form)
	if s.key = keyPattern.FindString(page); status != http.StatusCreated || s.key == "" {
		t.Fatalf("create key: %d", status)
	}
	s.secret("an API key made in the console", s.key)
	s.sessionCookies()
	if status, _ := s.post("/user/sign-out", s.form("/user/account")); status >= 400 {
		t.Fatalf("sign-out: %d", status)
	}
	form = s.form("/user/sign-in")
	form.Set("email", email)
	form.Set("password", password)
	if status, _ := s.post("/user/sign-in", form); status != http.StatusSeeOther && status != http.StatusFound {
		t.Fatalf("sign-in: %d", status)
	}
	s.sessionCookies()
	s.form("/user/sources")
	s.form("/user/webhooks")
}

// browserKey makes a browser key in the console and uses it as pages do: from its origin, from another, without
// one, and for what it may not do.
func (s *secretTraffic) browserKey() {
	t := s.t
	form := s.form("/user/api")
	form.Set("name", "embed")
	form.Set("kind", "browser")
	form.Set("browser_scope", "links:create")
	form.Set("origins", "https://www.acme.example")
	form.Set("expiry", "never")
	status, page := s.post("/user/api/keys", form)
	key := keyPattern.FindString(page)
	if status != http.StatusCreated || !strings.HasPrefix(key, "sb_pk_") {
		t.Fatalf("create browser key: %d %q", status, key)
	}
	s.secret("a browser key made in the console", key)
	for origin, want := range map[string]int{"https://www.acme.example": 201, "https://evil.example": 403, "": 403} {
		header := map[string]string{"Authorization": "Bearer " + key}
		if origin != "" {
			header["Origin"] = origin
		}
		if status, body := s.request(http.MethodPost, "/api/v1/links", "application/json",
			`{"destination_url":"https://www.acme.example/"}`, header); status != want {
			t.Errorf("browser key from %q: %d %s", origin, status, body)
		}
	}
	if status, _ := s.request(http.MethodGet, "/api/v1/links", "", "",
		map[string]string{"Authorization": "Bearer " + key, "Origin": "https://www.acme.example"}); status != 403 {
		t.Errorf("browser key listing links: %d", status)
	}
}

// sessionCookies remembers the console's cookies as secrets.
func (s *secretTraffic) sessionCookies() {
	u, _ := url.Parse(s.base + "/user/")
	for _, c := range s.client.Jar.Cookies(u) {
		s.secret("the console cookie "+c.Name+" "+c.Value[:min(4, len(c.Value))], c.Value)
	}
}

// webhooks registers an endpoint, rotates its secret and has events delivered to it signed with both.
func (s *secretTraffic) webhooks(receiverURL string, delivered *atomic.Int64) {
	var e struct{ ID, Secret string }
	s.apiJSON(http.MethodPost, "/api/v1/webhooks", fmt.Sprintf(`{"url":%q,"events":["*"]}`, receiverURL), &e)
	s.secret("a webhook secret", e.Secret)
	s.apiJSON(http.MethodPost, "/api/v1/links", `{"destination_url":"https://example.com/a"}`, nil)
	await.Until(s.t, "a delivery", delivered.Load, func(n int64) bool { return n > 0 })
	var rotated struct{ Secret string }
	s.apiJSON(http.MethodPost, "/api/v1/webhooks/"+e.ID+"/rotate-secret", `{"grace_period_seconds":3600}`, &rotated)
	s.secret("a rotated webhook secret", rotated.Secret)
	before := delivered.Load()
	s.apiJSON(http.MethodPost, "/api/v1/links", `{"destination_url":"https://example.com/b"}`, nil)
	await.Until(s.t, "a delivery signed with both secrets", delivered.Load, func(n int64) bool { return n > before })
}

// sources makes sources of four schemes and sends them what senders send: signed and forged requests, URL checks,
// bodies too large and bodies whose text cannot be stored; then rotates a token and uses both.
func (s *secretTraffic) sources() {
	t := s.t
	type source struct {
		ID        string `json:"id"`
		IngestURL string `json:"ingest_url"`
	}
	create := func(name, verification string) (source, string) {
		var src source
		s.apiJSON(http.MethodPost, "/api/v1/sources", fmt.Sprintf(`{"name":%q,"event_type":"custom.secret.test",
			"verification":%s}`, name, verification), &src)
		token := src.IngestURL[strings.LastIndex(src.IngestURL, "/")+1:]
		s.tokens = append(s.tokens, token)
		return src, "/in/" + token
	}
	send := func(path, contentType, body string, header map[string]string, want int) {
		t.Helper()
		if status, out := s.request(http.MethodPost, path, contentType, body, header); status != want {
			t.Errorf("POST %s: %d %s, want %d", redactedForTest(path), status, out, want)
		}
	}

	open, openPath := create("token only", `{"scheme":"none"}`)
	s.secret("an ingest token (scheme none)", openPath[4:])
	send(openPath, "application/json", `{"order":1}`, nil, 200)
	send(openPath, "application/json", `{"s":"a\u0000b"}`, nil, 400)
	send(openPath, "text/plain", "a\x00b", nil, 400)
	send(openPath, "application/json", `{"s":"`+strings.Repeat("x", 1<<20)+`"}`, nil, 413)
	send(openPath+"/extra", "application/json", `{}`, nil, 404)
	challenge := s.secret("a challenge echoed by an ingest URL", "challenge-0f3a9c2e7b14d6a85e90c1b2")
	if status, out := s.request(http.MethodGet, openPath+"?challenge="+challenge, "", "", nil); status != 200 || out != challenge {
		t.Errorf("challenge: %d %q", status, out)
	}
	var rotated source
	s.apiJSON(http.MethodPost, "/api/v1/sources/"+open.ID+"/rotate-token", `{"grace_period_seconds":3600}`, &rotated)
	newPath := rotated.IngestURL[strings.Index(rotated.IngestURL, "/in/"):]
	s.tokens = append(s.tokens, newPath[4:])
	s.secret("a rotated ingest token", newPath[4:])
	send(openPath, "application/json", `{"old":true}`, nil, 200)
	send(newPath, "application/json", `{"new":true}`, nil, 200)

	ghSecret := s.secret("a GitHub source's secret", "gh-webhook-secret-5c1d8e2f9a")
	_, ghPath := create("GitHub", fmt.Sprintf(`{"scheme":"github","secret":%q}`, ghSecret))
	s.secret("an ingest token (scheme github)", ghPath[4:])
	body := `{"ref":"refs/heads/main"}`
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write([]byte(body))
	signature := s.secret("a request's signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
	send(ghPath, "application/json", body, map[string]string{"X-Hub-Signature-256": signature}, 200)
	send(ghPath, "application/json", body, map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}, 401)

	basicPassword := s.secret("a Basic source's password", "basic-password-71c0e2d94b")
	_, basicPath := create("Basic", fmt.Sprintf(`{"scheme":"basic","username":"sender","secret":%q}`, basicPassword))
	s.secret("an ingest token (scheme basic)", basicPath[4:])
	send(basicPath, "application/json", `{}`, map[string]string{"Authorization": "Basic " + basicAuth("sender", basicPassword)}, 200)
	send(basicPath, "application/json", `{}`, map[string]string{"Authorization": "Basic " + basicAuth("sender", basicPassword+"x")}, 401)

	apiKey := s.secret("an api_key source's key", "source-api-key-9e8d7c6b5a4f")
	_, keyPath := create("API key", fmt.Sprintf(`{"scheme":"api_key","secret":%q}`, apiKey))
	s.secret("an ingest token (scheme api_key)", keyPath[4:])
	send(keyPath, "application/json", `{}`, map[string]string{"X-API-Key": apiKey}, 200)
	send(keyPath, "application/json", `{}`, map[string]string{"X-API-Key": "source-api-key-guess"}, 401)
}

// redactedForTest keeps a failing test's message free of the tokens it checks the log for.
func redactedForTest(path string) string {
	if len(path) > 12 {
		return path[:8] + "…"
	}
	return path
}

// basicAuth is the credentials of an Authorization: Basic header.
func basicAuth(user, password string) string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(user, password)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

type instance struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// connect creates an instance of a provider with config, connects it and waits until it is in a state of want.
func (s *secretTraffic) connect(provider, config string, want ...string) instance {
	s.t.Helper()
	var inst instance
	s.apiJSON(http.MethodPost, "/api/v1/instances", fmt.Sprintf(`{"name":%q,"provider":%q,"config":%s}`, provider,
		provider, config), &inst)
	s.apiJSON(http.MethodPost, "/api/v1/instances/"+inst.ID+"/connect", "", nil)
	return await.Until(s.t, provider+" instance "+strings.Join(want, " or "), func() instance {
		var got instance
		s.apiJSON(http.MethodGet, "/api/v1/instances/"+inst.ID, "", &got)
		return got
	}, func(i instance) bool { return strings.Contains(strings.Join(want, " "), i.Status) && i.Status != "" })
}

// messages is how many messages an instance holds.
func (s *secretTraffic) messages(id string) int {
	var list struct{ Data []any }
	s.apiJSON(http.MethodGet, "/api/v1/instances/"+id+"/messages", "", &list)
	return len(list.Data)
}

// telegram connects a bot that polls, receives a message and a photo whose download fails once, and connects a
// bot whose token Telegram refuses.
func (s *secretTraffic) telegram(tg *telegramtest.Server) {
	token := s.secret("a Telegram bot token", tg.AddBot(7001, "SecretsBot"))
	inst := s.connect("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q}`, token, tg.URL), "connected")
	ada := telegramtest.User{ID: 501, FirstName: "Ada"}
	msg, _ := tg.Message(token, ada, "hello")
	tg.Push(token, msg)
	await.Equal(s.t, "the Telegram message", func() int { return s.messages(inst.ID) }, 1)
	tg.Fail("getFile", 1, telegramtest.Failure{Status: 500, Description: "Internal Server Error"})
	tg.Push(token, tg.Photo(token, ada, "a photo", []byte("\xff\xd8\xff photo")))
	await.Equal(s.t, "the Telegram photo, after a failed download", func() int { return s.messages(inst.ID) }, 2)

	refused := s.secret("a Telegram bot token Telegram refuses", "123456:AAHnot-a-real-token-0f1e2d3c4b5a")
	s.connect("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q}`, refused, tg.URL), "failed")
	if status, _ := s.request(http.MethodPost, "/hooks/channels/"+inst.ID, "application/json", `{"update_id":1}`,
		map[string]string{"X-Telegram-Bot-Api-Secret-Token": s.secret("a forged Telegram secret token", "forged-secret-token-1a2b3c4d")}); status != 401 {
		s.t.Errorf("a forged Telegram push: %d", status)
	}
}

// whatsapp connects a phone number, passes Meta's URL check, takes a signed push and refuses a forged one, and
// connects a number whose access token Meta refuses.
func (s *secretTraffic) whatsapp(wa *cloudtest.Server) {
	s.secret("a WhatsApp access token", wa.Token)
	s.secret("a WhatsApp app secret", wa.AppSecret)
	verify := s.secret("a WhatsApp verify token", "verify-token-3e4f5a6b7c8d")
	config := func(token string) string {
		b, _ := json.Marshal(map[string]string{"phone_number_id": wa.PhoneID, "business_account_id": wa.WABAID,
			"access_token": token, "app_secret": wa.AppSecret, "verify_token": verify, "base_url": wa.URL})
		return string(b)
	}
	inst := s.connect("whatsapp_cloud", config(wa.Token), "connected")
	hook := "/hooks/channels/" + inst.ID
	challenge := s.secret("Meta's challenge", "1158201444-challenge-7d6c")
	q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {verify}, "hub.challenge": {challenge}}
	if status, out := s.request(http.MethodGet, hook+"?"+q.Encode(), "", "", nil); status != 200 || out != challenge {
		s.t.Errorf("Meta's URL check: %d %q", status, out)
	}
	q.Set("hub.verify_token", s.secret("a wrong verify token", "verify-token-guess-0000"))
	if status, _ := s.request(http.MethodGet, hook+"?"+q.Encode(), "", "", nil); status != 401 {
		s.t.Errorf("a wrong verify token: %d", status)
	}
	wa.Callback = s.base + hook
	if status := wa.Push(cloudtest.Text("15550100002", "Bob", "wamid.S1", "hello")); status != 200 {
		s.t.Errorf("a signed push: %d", status)
	}
	if status := wa.Push(cloudtest.Text("15550100002", "Bob", "wamid.S2", "forged"), s.secret("a forged app secret", "forged-app-secret-9f8e7d")); status != 401 {
		s.t.Errorf("a forged push: %d", status)
	}
	s.connect("whatsapp_cloud", config(s.secret("a WhatsApp access token Meta refuses", "EAAJnot-the-token-5a4b3c2d1e")), "failed")
}
