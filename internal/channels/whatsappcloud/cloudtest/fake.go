// Package cloudtest is a fake WhatsApp Business Cloud API (Meta's Graph API) for tests, following the published
// contract: Bearer tokens (401 with error code 190 otherwise), GET /{version}/{phone-number-id}, POST …/messages
// with the documented bodies per type (400 with code 100 for a malformed one, 131026 for a number not on
// WhatsApp, 132001 for an unknown template), "status":"read" marks, POST …/media (multipart) and media download
// by ID, GET /{version}/{waba-id}/message_templates with cursor paging, scripted errors (Meta's rate-limit codes
// 130429/131056, 5xx), and webhook pushes signed with the app secret (X-Hub-Signature-256) in Meta's notification
// shape. What it does not model: real throughput tiers, quality ratings, and Meta's delivery timing.
package cloudtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sent is a message the fake accepted.
type Sent struct {
	ID   string
	Body map[string]any
	At   time.Time
}

// Failure is a scripted Graph error.
type Failure struct {
	Status  int
	Code    int
	Message string
}

// Template is a template the account has.
type Template struct {
	Name, Language, Status, Category string
	Placeholders                     int
}

// Server is the fake. Its one account has PhoneID, WABAID and Token; NotOnWhatsApp lists numbers without an account.
type Server struct {
	*httptest.Server
	t                      testing.TB
	PhoneID, WABAID, Token string
	Number, Name           string
	AppSecret              string
	// Callback is where pushes go (the instance's hook URL).
	Callback string

	mu        sync.Mutex
	sent      []Sent
	reads     []string
	failures  []Failure
	lose      int // message sends to accept without answering
	media     map[string][]byte
	templates []Template
	notOnWA   map[string]bool
	next      int
}

// Start starts a fake with one account.
func Start(t testing.TB) *Server {
	s := &Server{t: t, PhoneID: "106540352242922", WABAID: "102290129340398", Token: "EAAJfake-system-user-token-0123456789",
		Number: "+1 555-000-1111", Name: "Acme Support", AppSecret: "fake-app-secret-0123456789",
		media: map[string][]byte{}, notOnWA: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// AddTemplate gives the account a template.
func (s *Server) AddTemplate(t Template) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates = append(s.templates, t)
}

// NotOnWhatsApp makes a number (digits only) have no WhatsApp account.
func (s *Server) NotOnWhatsApp(number string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notOnWA[number] = true
}

// Fail makes the next n message sends answer f.
func (s *Server) Fail(n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, f)
	}
}

// LoseAnswer makes the next message send that is accepted go unanswered: the fake keeps the message, then drops
// the connection, as when an answer is lost on its way.
func (s *Server) LoseAnswer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose++
}

// Sent returns the messages accepted so far.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent{}, s.sent...)
}

// Reads returns the message IDs marked read.
func (s *Server) Reads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.reads...)
}

// Media returns the bytes of an uploaded media ID.
func (s *Server) Media(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media[id]
}

func (s *Server) graphError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "OAuthException",
		"code": code, "error_data": map[string]any{"messaging_product": "whatsapp", "details": msg}, "fbtrace_id": "AbCdEf"}})
}

func (s *Server) ok(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		s.graphError(w, http.StatusUnauthorized, 190, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/download/"); ok {
		s.mu.Lock()
		b := s.media[id]
		s.mu.Unlock()
		_, _ = w.Write(b)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "v") {
		s.graphError(w, http.StatusBadRequest, 100, "Unknown path components")
		return
	}
	switch {
	case len(parts) == 2 && parts[1] == s.PhoneID && r.Method == http.MethodGet:
		s.ok(w, map[string]any{"id": s.PhoneID, "display_phone_number": s.Number, "verified_name": s.Name})
	case len(parts) == 2 && r.Method == http.MethodGet:
		s.mu.Lock()
		_, ok := s.media[parts[1]]
		s.mu.Unlock()
		if !ok {
			s.graphError(w, http.StatusBadRequest, 100, "Unsupported get request. Object with ID '"+parts[1]+"' does not exist")
			return
		}
		s.ok(w, map[string]any{"url": s.URL + "/download/" + parts[1], "mime_type": "image/jpeg", "id": parts[1]})
	case len(parts) == 3 && parts[1] == s.PhoneID && parts[2] == "messages" && r.Method == http.MethodPost:
		s.messages(w, r)
	case len(parts) == 3 && parts[1] == s.PhoneID && parts[2] == "media" && r.Method == http.MethodPost:
		if err := r.ParseMultipartForm(32 << 20); err != nil || r.FormValue("messaging_product") != "whatsapp" || r.FormValue("type") == "" {
			s.graphError(w, http.StatusBadRequest, 100, "(#100) The parameter messaging_product, type and file are required.")
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			s.graphError(w, http.StatusBadRequest, 100, "(#100) The parameter file is required.")
			return
		}
		b, _ := io.ReadAll(f)
		s.mu.Lock()
		s.next++
		id := fmt.Sprint("media", s.next)
		s.media[id] = b
		s.mu.Unlock()
		s.ok(w, map[string]any{"id": id})
	case len(parts) == 3 && parts[1] == s.WABAID && parts[2] == "message_templates" && r.Method == http.MethodGet:
		s.listTemplates(w, r)
	default:
		s.graphError(w, http.StatusBadRequest, 100, "Unsupported "+r.Method+" request")
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body["messaging_product"] != "whatsapp" {
		s.graphError(w, http.StatusBadRequest, 100, "(#100) The parameter messaging_product is required.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if body["status"] == "read" {
		id, _ := body["message_id"].(string)
		if !strings.HasPrefix(id, "wamid.") {
			s.graphError(w, http.StatusBadRequest, 100, "(#100) Invalid parameter message_id")
			return
		}
		s.reads = append(s.reads, id)
		s.ok(w, map[string]any{"success": true})
		return
	}
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		s.graphError(w, f.Status, f.Code, f.Message)
		return
	}
	to, _ := body["to"].(string)
	typ, _ := body["type"].(string)
	content, _ := body[typ].(map[string]any)
	switch {
	case to == "" || strings.Trim(to, "+0123456789") != "":
		s.graphError(w, http.StatusBadRequest, 100, "(#100) Invalid parameter to")
		return
	case s.notOnWA[strings.TrimPrefix(to, "+")]:
		s.graphError(w, http.StatusBadRequest, 131026, "Message Undeliverable")
		return
	case typ == "contacts":
		if cs, _ := body["contacts"].([]any); len(cs) == 0 {
			s.graphError(w, http.StatusBadRequest, 100, "(#100) contacts is required for type contacts")
			return
		}
	case content == nil:
		s.graphError(w, http.StatusBadRequest, 100, fmt.Sprintf("(#100) The parameter %s is required.", typ))
		return
	case typ == "text" && content["body"] == "":
		s.graphError(w, http.StatusBadRequest, 100, "(#100) text.body is required")
		return
	case typ == "image" || typ == "document" || typ == "video" || typ == "audio" || typ == "sticker":
		id, _ := content["id"].(string)
		if _, ok := s.media[id]; !ok && content["link"] == nil {
			s.graphError(w, http.StatusBadRequest, 131053, "Media upload error")
			return
		}
	case typ == "template":
		name, _ := content["name"].(string)
		lang, _ := content["language"].(map[string]any)
		var found *Template
		for i, t := range s.templates {
			if t.Name == name && lang != nil && t.Language == lang["code"] {
				found = &s.templates[i]
			}
		}
		if found == nil {
			s.graphError(w, http.StatusNotFound, 132001, "Template name does not exist in the translation")
			return
		}
		if n := bodyParams(content); n != found.Placeholders {
			s.graphError(w, http.StatusBadRequest, 132000, fmt.Sprintf("Number of parameters does not match the expected number of params (%d, want %d)", n, found.Placeholders))
			return
		}
	}
	s.next++
	id := fmt.Sprintf("wamid.HBgL%s%06d", strings.TrimPrefix(to, "+"), s.next)
	s.sent = append(s.sent, Sent{ID: id, Body: body, At: time.Now()})
	if s.lose > 0 {
		s.lose--
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	s.ok(w, map[string]any{"messaging_product": "whatsapp", "contacts": []any{map[string]any{"input": to, "wa_id": strings.TrimPrefix(to, "+")}},
		"messages": []any{map[string]any{"id": id}}})
}

// bodyParams counts the parameters of a template message's body component.
func bodyParams(t map[string]any) int {
	comps, _ := t["components"].([]any)
	for _, c := range comps {
		if m, _ := c.(map[string]any); m != nil && strings.EqualFold(fmt.Sprint(m["type"]), "body") {
			ps, _ := m["parameters"].([]any)
			return len(ps)
		}
	}
	return 0
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 2 {
		limit = 2 // small pages, so that clients must follow the cursors
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("after"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var data []any
	end := min(start+limit, len(s.templates))
	for _, t := range s.templates[min(start, end):end] {
		text := "Hello"
		for i := range t.Placeholders {
			text += fmt.Sprintf(" {{%d}}", i+1)
		}
		data = append(data, map[string]any{"name": t.Name, "language": t.Language, "status": t.Status, "category": t.Category,
			"components": []any{map[string]any{"type": "BODY", "text": text}}, "id": fmt.Sprint(1000 + start)})
	}
	page := map[string]any{"data": data, "paging": map[string]any{"cursors": map[string]any{"before": strconv.Itoa(start), "after": strconv.Itoa(end)}}}
	if end < len(s.templates) {
		page["paging"].(map[string]any)["next"] = s.URL + r.URL.Path + "?after=" + strconv.Itoa(end)
	}
	s.ok(w, page)
}

// Push delivers a notification's value (messages or statuses of the account's number) to the callback, signed with
// secret (the app secret unless given), and returns the HTTP status.
func (s *Server) Push(value map[string]any, secret ...string) int {
	value["messaging_product"] = "whatsapp"
	value["metadata"] = map[string]any{"display_phone_number": strings.Map(keepDigits, s.Number), "phone_number_id": s.PhoneID}
	return s.PushRaw(s.Notification(value), secret...)
}

// Notification wraps a change value in Meta's envelope.
func (s *Server) Notification(value map[string]any) []byte {
	raw, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": s.WABAID, "changes": []any{map[string]any{"field": "messages", "value": value}}}}})
	return raw
}

// Sign is the X-Hub-Signature-256 of a body with a secret.
func Sign(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// PushRaw posts a body to the callback, signed.
func (s *Server) PushRaw(body []byte, secret ...string) int {
	sec := s.AppSecret
	if len(secret) > 0 {
		sec = secret[0]
	}
	req, _ := http.NewRequest(http.MethodPost, s.Callback, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", Sign(body, sec))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Errorf("cloudtest: push: %v", err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func keepDigits(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

// Text is the value of a person's text message.
func Text(from, name, id, text string) map[string]any {
	return map[string]any{"contacts": []any{map[string]any{"profile": map[string]any{"name": name}, "wa_id": from}},
		"messages": []any{map[string]any{"from": from, "id": id, "timestamp": strconv.FormatInt(time.Now().Unix(), 10),
			"type": "text", "text": map[string]any{"body": text}}}}
}

// Status is the value of a status of a sent message; a failed one carries Meta's error code.
func Status(id, status, recipient string, code int) map[string]any {
	st := map[string]any{"id": id, "status": status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10), "recipient_id": recipient}
	if code != 0 {
		st["errors"] = []any{map[string]any{"code": code, "title": "Message undeliverable", "message": "Message undeliverable",
			"error_data": map[string]any{"details": "Message Undeliverable."}}}
	}
	return map[string]any{"statuses": []any{st}}
}
