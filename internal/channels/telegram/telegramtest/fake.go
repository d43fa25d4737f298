// Package telegramtest is a fake Telegram Bot API server for tests, following the published contract
// (https://core.telegram.org/bots/api): methods at /bot<token>/<method> taking JSON, form or multipart parameters;
// answers {"ok":true,"result":…} or {"ok":false,"error_code":…,"description":…,"parameters":{"retry_after":…}};
// 401 for an unknown token; 400 "chat not found" for a chat the bot never saw; 403 "bot was blocked by the user";
// 409 for getUpdates while a webhook is set; webhook pushes carrying X-Telegram-Bot-Api-Secret-Token; files at
// /file/bot<token>/<path>. What it does not model: https-only webhooks (it pushes to http test servers), real
// flood-control counting (tests script 429s), and the thousands of fields a real update may carry.
package telegramtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one method call the fake answered.
type Call struct {
	Token, Method string
	Params        map[string]string
	Files         map[string][]byte
	At            time.Time
	Status        int
}

// Failure is a scripted error answer.
type Failure struct {
	Status      int
	Description string
	RetryAfter  int
}

// Server is the fake.
type Server struct {
	*httptest.Server
	t testing.TB
	// Reroute maps a registered webhook URL to where the fake pushes (a public https URL to the test server's).
	Reroute func(string) string

	mu       sync.Mutex
	bots     map[string]*botState
	calls    []Call
	failures map[string][]Failure // method → answers to give before working again
	lose     map[string]int       // method → calls to carry out without answering
	nextMsg  int
	nextUpd  int64
}

type botState struct {
	id                  int64
	username, firstName string
	webhook, secret     string
	updates             []json.RawMessage
	wake                chan struct{}
	known               map[int64]bool // chats the bot may write to
	blocked             map[int64]bool
	admins              map[int64][]int64
	titles              map[int64]string
	files               map[string][]byte
	invite              int
	polls               map[string]poll  // poll ID → the poll
	photos              map[int64]string // user → the file ID of their profile photo
	// permissions are each group's default member permissions as set (none: every permission); chatPhotos the file
	// ID of each group's photo.
	permissions map[int64]json.RawMessage
	chatPhotos  map[int64]string
	// name and about are the bot's name and short description (getMyName, getMyShortDescription).
	name, about string
}

// poll is a poll a bot sent.
type poll struct {
	options            int
	anonymous, several bool
}

// Start starts a fake Bot API server.
func Start(t testing.TB) *Server {
	s := &Server{t: t, bots: map[string]*botState{}, failures: map[string][]Failure{}, lose: map[string]int{},
		nextMsg: 100, nextUpd: 1000}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// AddBot registers a bot and returns its token.
func (s *Server) AddBot(id int64, username string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	token := fmt.Sprintf("%d:AAH%s_fake-token-0123456789abcdef", id, strings.ToLower(username))
	s.bots[token] = &botState{id: id, username: username, firstName: username, wake: make(chan struct{}, 1),
		known: map[int64]bool{}, blocked: map[int64]bool{}, admins: map[int64][]int64{}, titles: map[int64]string{},
		files: map[string][]byte{}, permissions: map[int64]json.RawMessage{}, chatPhotos: map[int64]string{},
		name: username}
	return token
}

// Block makes a user block the bot.
func (s *Server) Block(token string, user int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bots[token].blocked[user] = true
}

// AddGroup puts the bot in a group with a title and administrators.
func (s *Server) AddGroup(token string, chat int64, title string, admins ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[token]
	b.known[chat], b.titles[chat], b.admins[chat] = true, title, admins
}

// Fail makes the next n calls of method answer f.
func (s *Server) Fail(method string, n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[method] = append(s.failures[method], f)
	}
}

// LoseAnswers makes the next n calls of method that succeed go unanswered: the fake carries them out, then drops
// the connection, as when an answer is lost on its way.
func (s *Server) LoseAnswers(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose[method] += n
}

// Calls returns the calls of a method so far (all methods for "").
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Webhook returns the webhook URL and secret a bot registered ("" when none).
func (s *Server) Webhook(token string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[token]
	return b.webhook, b.secret
}

// User is a Telegram user of the fake.
type User struct {
	ID        int64
	FirstName string
	Username  string
}

func (u User) json() map[string]any {
	m := map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName}
	if u.Username != "" {
		m["username"] = u.Username
	}
	return m
}

// Message builds a private text message of a user to the bot (which may then write to the user).
func (s *Server) Message(token string, from User, text string) (update map[string]any, messageID int) {
	s.mu.Lock()
	s.bots[token].known[from.ID] = true
	s.nextMsg++
	id := s.nextMsg
	s.mu.Unlock()
	return map[string]any{"message": map[string]any{"message_id": id, "from": from.json(),
		"chat": map[string]any{"id": from.ID, "type": "private", "first_name": from.FirstName},
		"date": time.Now().Unix(), "text": text}}, id
}

// PollAnswer builds a user's answer to a non-anonymous poll the bot sent (an update of type poll_answer; no
// options: the vote was retracted). It fails the test for a poll the bot did not send, an anonymous one (Telegram
// sends no answers of those), or options that do not fit the poll.
func (s *Server) PollAnswer(token string, from User, pollID string, options ...int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.bots[token].polls[pollID]
	switch {
	case !ok:
		s.t.Fatalf("telegramtest: no poll %s", pollID)
	case p.anonymous:
		s.t.Fatalf("telegramtest: poll %s is anonymous: Telegram reports no answers", pollID)
	case len(options) > 1 && !p.several:
		s.t.Fatalf("telegramtest: poll %s takes one answer", pollID)
	}
	for _, o := range options {
		if o < 0 || o >= p.options {
			s.t.Fatalf("telegramtest: poll %s has no option %d", pollID, o)
		}
	}
	if options == nil {
		options = []int{}
	}
	return map[string]any{"poll_answer": map[string]any{"poll_id": pollID, "user": from.json(), "option_ids": options}}
}

// SetProfilePhoto gives a user a profile photo the bot can read (getUserProfilePhotos, then getFile); the photo's
// file ID is returned (a new one for each call: a changed photo).
func (s *Server) SetProfilePhoto(token string, user int64, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[token]
	s.nextMsg++
	fileID := fmt.Sprintf("profile-%d-%d", user, s.nextMsg)
	b.files[fileID] = data
	if b.photos == nil {
		b.photos = map[int64]string{}
	}
	b.photos[user] = fileID
	return fileID
}

// LastPollID is the ID of the last poll the bot sent ("" before the first).
func (s *Server) LastPollID(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := ""
	for id := range s.bots[token].polls {
		if len(id) > len(last) || (len(id) == len(last) && id > last) {
			last = id
		}
	}
	return last
}

// Photo builds a private photo message whose file the fake serves.
func (s *Server) Photo(token string, from User, caption string, data []byte) map[string]any {
	s.mu.Lock()
	b := s.bots[token]
	b.known[from.ID] = true
	s.nextMsg++
	id := s.nextMsg
	fileID := fmt.Sprintf("photo-%d", id)
	b.files[fileID] = data
	s.mu.Unlock()
	return map[string]any{"message": map[string]any{"message_id": id, "from": from.json(),
		"chat": map[string]any{"id": from.ID, "type": "private"}, "date": time.Now().Unix(), "caption": caption,
		"photo": []any{map[string]any{"file_id": fileID, "file_unique_id": "u" + fileID, "width": 90, "height": 90,
			"file_size": len(data)}}}}
}

// Push delivers an update: to the webhook (answering its HTTP status) when one is set, else to getUpdates (0).
// A push with secret overrides the registered secret token (a forged push).
func (s *Server) Push(token string, update map[string]any, secret ...string) int {
	s.mu.Lock()
	b := s.bots[token]
	s.nextUpd++
	update["update_id"] = s.nextUpd
	raw, _ := json.Marshal(update)
	hook, sec := b.webhook, b.secret
	if hook == "" {
		b.updates = append(b.updates, raw)
		select {
		case b.wake <- struct{}{}:
		default:
		}
		s.mu.Unlock()
		return 0
	}
	s.mu.Unlock()
	if len(secret) > 0 {
		sec = secret[0]
	}
	if s.Reroute != nil {
		hook = s.Reroute(hook)
	}
	req, _ := http.NewRequest(http.MethodPost, hook, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if sec != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", sec)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Errorf("telegramtest: push: %v", err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// Update returns the JSON of an update as Push would deliver it (numbered), for tests that post it themselves.
func (s *Server) Update(update map[string]any) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpd++
	update["update_id"] = s.nextUpd
	raw, _ := json.Marshal(update)
	return raw
}

// DropWebhook deletes a bot's webhook behind its back (another process or tool called deleteWebhook).
func (s *Server) DropWebhook(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bots[token].webhook, s.bots[token].secret = "", ""
}

// Pending is the number of updates waiting for getUpdates to confirm them.
func (s *Server) Pending(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bots[token].updates)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		token, path, _ := strings.Cut(rest, "/")
		s.mu.Lock()
		b := s.bots[token]
		var data []byte
		if b != nil {
			data = b.files[path]
		}
		s.mu.Unlock()
		if data == nil {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, _ := strings.Cut(rest, "/")
	if !ok || method == "" {
		answerError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	params, files, err := parseParams(r)
	call := Call{Token: token, Method: method, Params: params, Files: files, At: time.Now()}
	status, result := s.call(r, token, method, params, files, err)
	call.Status = status
	s.mu.Lock()
	s.calls = append(s.calls, call)
	lost := status == http.StatusOK && s.lose[method] > 0
	if lost {
		s.lose[method]--
	}
	s.mu.Unlock()
	if lost {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if status != http.StatusOK {
		f := result.(Failure)
		answerError(w, f.Status, f.Description, f.RetryAfter)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func answerError(w http.ResponseWriter, status int, desc string, retryAfter int) {
	body := map[string]any{"ok": false, "error_code": status, "description": desc}
	if retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": retryAfter}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// parseParams reads a call's parameters the three ways the Bot API takes them.
func parseParams(r *http.Request) (map[string]string, map[string][]byte, error) {
	params, files := map[string]string{}, map[string][]byte{}
	ct, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil && err != io.EOF {
			return nil, nil, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				params[k] = s
			} else {
				b, _ := json.Marshal(v)
				params[k] = string(b)
			}
		}
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, mp["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) { // an empty body (a method without parameters) is no parameters
				break
			}
			if err != nil {
				return nil, nil, err
			}
			b, _ := io.ReadAll(part)
			if part.FileName() != "" {
				files[part.FormName()] = b
			} else {
				params[part.FormName()] = string(b)
			}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, nil, err
		}
		for k := range r.PostForm {
			params[k] = r.PostForm.Get(k)
		}
	}
	return params, files, nil
}

func badRequest(desc string) (int, any) {
	return http.StatusBadRequest, Failure{Status: 400, Description: "Bad Request: " + desc}
}

// call runs a method.
func (s *Server) call(r *http.Request, token, method string, p map[string]string, files map[string][]byte, perr error) (int, any) {
	s.mu.Lock()
	b := s.bots[token]
	if b == nil {
		s.mu.Unlock()
		return http.StatusUnauthorized, Failure{Status: 401, Description: "Unauthorized"}
	}
	if fs := s.failures[method]; len(fs) > 0 {
		s.failures[method] = fs[1:]
		s.mu.Unlock()
		return fs[0].Status, fs[0]
	}
	if perr != nil {
		s.mu.Unlock()
		return badRequest("can't parse request parameters: " + perr.Error())
	}
	if method == "getUpdates" {
		if b.webhook != "" {
			s.mu.Unlock()
			return http.StatusConflict, Failure{Status: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
		}
		return s.getUpdates(r, b, p)
	}
	defer s.mu.Unlock()
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	needChat := func() (int, any, bool) {
		switch {
		case p["chat_id"] == "":
			st, f := badRequest("chat_id is empty")
			return st, f, false
		case b.blocked[chat]:
			return http.StatusForbidden, Failure{Status: 403, Description: "Forbidden: bot was blocked by the user"}, false
		case !b.known[chat]:
			st, f := badRequest("chat not found")
			return st, f, false
		}
		return 0, nil, true
	}
	sent := func(extra map[string]any) (int, any) {
		s.nextMsg++
		m := map[string]any{"message_id": s.nextMsg, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"},
			"from": map[string]any{"id": b.id, "is_bot": true, "first_name": b.firstName, "username": b.username}}
		for k, v := range extra {
			m[k] = v
		}
		return http.StatusOK, m
	}
	switch method {
	case "getMe":
		return http.StatusOK, map[string]any{"id": b.id, "is_bot": true, "first_name": b.firstName, "username": b.username}
	case "setWebhook":
		if p["url"] == "" {
			return badRequest("bad webhook: URL is empty")
		}
		if sec := p["secret_token"]; len(sec) > 256 || strings.Trim(sec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			return badRequest("bad webhook: secret token contains unallowed characters")
		}
		b.webhook, b.secret = p["url"], p["secret_token"]
		return http.StatusOK, true
	case "deleteWebhook":
		b.webhook, b.secret = "", ""
		return http.StatusOK, true
	case "getWebhookInfo":
		return http.StatusOK, map[string]any{"url": b.webhook, "has_custom_certificate": false, "pending_update_count": len(b.updates)}
	case "sendMessage":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		if strings.TrimSpace(p["text"]) == "" {
			return badRequest("message text is empty")
		}
		if len([]rune(p["text"])) > 4096 {
			return badRequest("message is too long")
		}
		return sent(map[string]any{"text": p["text"]})
	case "sendPhoto", "sendDocument", "sendVideo", "sendAudio", "sendSticker":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		field := strings.ToLower(strings.TrimPrefix(method, "send"))
		if len(files[field]) == 0 && p[field] == "" {
			return badRequest("there is no " + field + " in the request")
		}
		return sent(map[string]any{"caption": p["caption"]})
	case "sendLocation", "sendVenue", "sendContact":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		if method == "sendContact" && (p["phone_number"] == "" || p["first_name"] == "") {
			return badRequest("phone_number and first_name are required")
		}
		return sent(nil)
	case "sendPoll":
		// The Bot API's limits: a question of 1 to 300 characters, 2 to 12 options of 1 to 100 each.
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		q := p["question"]
		if n := len([]rune(q)); n == 0 || n > 300 {
			return badRequest("poll question length must not exceed 300")
		}
		var opts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(p["options"]), &opts); err != nil {
			return badRequest("can't parse options JSON object")
		}
		if len(opts) < 2 {
			return badRequest("poll must have at least 2 option")
		}
		if len(opts) > 12 {
			return badRequest("poll can't have more than 12 options")
		}
		shown := make([]map[string]any, len(opts))
		for i, o := range opts {
			if n := len([]rune(o.Text)); n == 0 || n > 100 {
				return badRequest("poll options length must not exceed 100")
			}
			shown[i] = map[string]any{"text": o.Text, "voter_count": 0}
		}
		anonymous := p["is_anonymous"] != "false"
		id := strconv.FormatInt(5_000_000_000_000_000_000+int64(s.nextMsg+1), 10)
		if b.polls == nil {
			b.polls = map[string]poll{}
		}
		b.polls[id] = poll{options: len(opts), anonymous: anonymous, several: p["allows_multiple_answers"] == "true"}
		return sent(map[string]any{"poll": map[string]any{"id": id, "question": q, "options": shown,
			"total_voter_count": 0, "is_closed": false, "is_anonymous": anonymous, "type": "regular",
			"allows_multiple_answers": p["allows_multiple_answers"] == "true"}})
	case "sendChatAction":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		switch p["action"] {
		case "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice", "upload_document",
			"choose_sticker", "find_location", "record_video_note", "upload_video_note":
			return http.StatusOK, true
		}
		return badRequest("wrong parameter action in request")
	case "setMessageReaction", "deleteMessage":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		if id, _ := strconv.Atoi(p["message_id"]); id <= 0 || id > s.nextMsg {
			return badRequest("message to react not found")
		}
		return http.StatusOK, true
	case "editMessageText":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		id, _ := strconv.Atoi(p["message_id"])
		if id <= 0 || id > s.nextMsg {
			return badRequest("message to edit not found")
		}
		return http.StatusOK, map[string]any{"message_id": id, "date": time.Now().Unix(), "text": p["text"],
			"chat": map[string]any{"id": chat, "type": "private"}}
	case "getChat":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		out := map[string]any{"id": chat, "type": "supergroup", "title": b.titles[chat],
			"accent_color_id": 0, "max_reaction_count": 11, "permissions": json.RawMessage(`{"can_send_messages":true,` +
				`"can_send_audios":true,"can_send_documents":true,"can_send_photos":true,"can_send_videos":true,` +
				`"can_send_video_notes":true,"can_send_voice_notes":true,"can_send_polls":true,` +
				`"can_send_other_messages":true,"can_add_web_page_previews":true,"can_change_info":true,` +
				`"can_invite_users":true,"can_pin_messages":true}`)}
		if perms, ok := b.permissions[chat]; ok {
			out["permissions"] = perms
		}
		if id, ok := b.chatPhotos[chat]; ok {
			out["photo"] = map[string]any{"small_file_id": id, "small_file_unique_id": "u" + id,
				"big_file_id": id, "big_file_unique_id": "u" + id}
		}
		return http.StatusOK, out
	case "setChatPermissions":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		var perms map[string]any
		if json.Unmarshal([]byte(p["permissions"]), &perms) != nil {
			return badRequest("can't parse permissions JSON object")
		}
		b.permissions[chat] = json.RawMessage(p["permissions"])
		return http.StatusOK, true
	case "setChatPhoto":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		if len(files["photo"]) == 0 {
			return badRequest("there is no photo in the request")
		}
		s.nextMsg++
		id := fmt.Sprintf("chatphoto%d", s.nextMsg)
		b.files[id], b.chatPhotos[chat] = files["photo"], id
		return http.StatusOK, true
	case "deleteChatPhoto":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		if _, ok := b.chatPhotos[chat]; !ok {
			return badRequest("CHAT_NOT_MODIFIED")
		}
		delete(b.chatPhotos, chat)
		return http.StatusOK, true
	case "getMyName":
		return http.StatusOK, map[string]any{"name": b.name}
	case "setMyName":
		if len([]rune(p["name"])) > 64 {
			return badRequest("bot name is too long")
		}
		b.name = p["name"]
		return http.StatusOK, true
	case "getMyShortDescription":
		return http.StatusOK, map[string]any{"short_description": b.about}
	case "setMyShortDescription":
		if len([]rune(p["short_description"])) > 120 {
			return badRequest("bot short description is too long")
		}
		b.about = p["short_description"]
		return http.StatusOK, true
	case "getChatAdministrators":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		var out []any
		for i, a := range b.admins[chat] {
			status := "administrator"
			if i == 0 {
				status = "creator"
			}
			out = append(out, map[string]any{"status": status, "user": map[string]any{"id": a, "is_bot": false, "first_name": fmt.Sprint("admin", a)}})
		}
		return http.StatusOK, out
	case "setChatTitle":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		b.titles[chat] = p["title"]
		return http.StatusOK, true
	case "setChatDescription", "banChatMember", "unbanChatMember", "promoteChatMember", "answerCallbackQuery":
		if method != "answerCallbackQuery" {
			if st, f, ok := needChat(); !ok {
				return st, f
			}
		}
		return http.StatusOK, true
	case "exportChatInviteLink":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		b.invite++
		return http.StatusOK, fmt.Sprintf("https://t.me/+fakeInvite%d", b.invite)
	case "leaveChat":
		if st, f, ok := needChat(); !ok {
			return st, f
		}
		delete(b.known, chat)
		return http.StatusOK, true
	case "getUserProfilePhotos":
		user, _ := strconv.ParseInt(p["user_id"], 10, 64)
		fileID, ok := b.photos[user]
		if !ok {
			return http.StatusOK, map[string]any{"total_count": 0, "photos": []any{}}
		}
		size := func(side int) map[string]any {
			return map[string]any{"file_id": fileID, "file_unique_id": "u" + fileID, "width": side, "height": side,
				"file_size": len(b.files[fileID])}
		}
		return http.StatusOK, map[string]any{"total_count": 1, "photos": []any{[]any{size(160), size(640)}}}
	case "getFile":
		if b.files[p["file_id"]] == nil {
			return badRequest("invalid file_id")
		}
		return http.StatusOK, map[string]any{"file_id": p["file_id"], "file_unique_id": "u" + p["file_id"], "file_path": p["file_id"]}
	}
	return http.StatusNotFound, Failure{Status: 404, Description: "Not Found: method not found"}
}

// getUpdates answers the updates after offset (confirming those before it), waiting up to timeout seconds for one.
// Called with s.mu held; returns with it released.
func (s *Server) getUpdates(r *http.Request, b *botState, p map[string]string) (int, any) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for {
		var keep []json.RawMessage
		for _, u := range b.updates {
			var head struct {
				ID int64 `json:"update_id"`
			}
			_ = json.Unmarshal(u, &head)
			if head.ID >= offset {
				keep = append(keep, u)
			}
		}
		b.updates = keep
		if len(keep) > 0 || time.Now().After(deadline) {
			out := append([]json.RawMessage{}, keep...)
			s.mu.Unlock()
			if out == nil {
				out = []json.RawMessage{}
			}
			return http.StatusOK, out
		}
		s.mu.Unlock()
		select {
		case <-b.wake:
		case <-time.After(time.Until(deadline)):
		case <-r.Context().Done():
			s.mu.Lock()
			s.mu.Unlock()
			return http.StatusOK, []json.RawMessage{}
		}
		s.mu.Lock()
	}
}

// ChatPhoto is the photo the bot set on a group (nil: none).
func (s *Server) ChatPhoto(token string, chat int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[token]
	return b.files[b.chatPhotos[chat]]
}

// Permissions are a group's default member permissions as the bot last set them (nil: never set).
func (s *Server) Permissions(token string, chat int64) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.bots[token].permissions[chat]
	if !ok {
		return nil
	}
	var out map[string]bool
	_ = json.Unmarshal(raw, &out)
	return out
}

// Profile is the bot's name and short description.
func (s *Server) Profile(token string) (name, about string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[token]
	return b.name, b.about
}
