package whatsappcloud

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// session is a phone number's connection: nothing stays open (Meta pushes to the hook URL, whichever process takes
// it); the session checks the token, reports the number, and sends.
type session struct {
	p    *Provider
	inst channels.Instance
	sink channels.Sink
	a    account
	g    *graph
}

// Run checks the access token by reading the phone number, reports it, and stays connected until ctx ends.
func (s *session) Run(ctx context.Context) error {
	var phone struct {
		ID                 string `json:"id"`
		DisplayPhoneNumber string `json:"display_phone_number"`
		VerifiedName       string `json:"verified_name"`
	}
	err := s.g.do(ctx, http.MethodGet, "/"+s.a.phoneID+"?fields=display_phone_number,verified_name", nil, "", &phone)
	if ge, ok := err.(*graphError); ok && (ge.Code == 190 || ge.Status == http.StatusUnauthorized || ge.Status == http.StatusForbidden ||
		ge.Code == 100 && ge.Subcode == 33) {
		// A token Meta refuses, or a phone number ID the token cannot see: no retry will make it work.
		return s.sink.State(ctx, channels.StatusFailed, "auth_failed: "+ge.Error())
	}
	if err != nil {
		return err
	}
	address, nerr := s.p.NormalizeAddress(phone.DisplayPhoneNumber)
	if nerr != nil {
		address = phone.DisplayPhoneNumber
	}
	if err := s.sink.Connected(ctx, channels.Party{Address: address, DisplayName: phone.VerifiedName,
		IDs: []string{phone.ID}}, nil); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// Logout has nothing to end: the token is the user's to revoke in Meta's business settings.
func (s *session) Logout(context.Context) error { return nil }

// message is the body of POST /{phone-number-id}/messages.
type message map[string]any

// Send sends one message.
func (s *session) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	body := message{"messaging_product": "whatsapp", "recipient_type": "individual", "to": strings.TrimPrefix(m.Chat, "+")}
	if m.ReplyTo != "" {
		body["context"] = map[string]any{"message_id": m.ReplyTo}
	}
	switch m.Type {
	case channels.TypeText:
		body["type"], body["text"] = "text", map[string]any{"body": m.Text, "preview_url": strings.Contains(m.Text, "https://")}
	case channels.TypeMedia:
		id, err := s.g.upload(ctx, m.Media)
		if err != nil {
			return channels.Sent{}, failureOf(err, m.Type)
		}
		kind := m.Media.Kind
		if kind == "" {
			kind = "document"
		}
		media := map[string]any{"id": id}
		if m.Media.Caption != "" && kind != "sticker" && kind != "audio" {
			media["caption"] = m.Media.Caption
		}
		if kind == "document" && m.Media.Filename != "" {
			media["filename"] = m.Media.Filename
		}
		body["type"], body[kind] = kind, media
	case channels.TypeLocation:
		loc := map[string]any{"latitude": m.Location.Latitude, "longitude": m.Location.Longitude}
		if m.Location.Name != "" {
			loc["name"] = m.Location.Name
		}
		if m.Location.Address != "" {
			loc["address"] = m.Location.Address
		}
		body["type"], body["location"] = "location", loc
	case channels.TypeContact:
		first, _, _ := strings.Cut(m.Contact.Name, " ")
		var phones []any
		for _, ph := range m.Contact.Phones {
			phones = append(phones, map[string]any{"phone": ph, "type": "CELL"})
		}
		body["type"], body["contacts"] = "contacts", []any{map[string]any{
			"name": map[string]any{"formatted_name": m.Contact.Name, "first_name": first}, "phones": phones}}
	case channels.TypeReaction:
		body["type"], body["reaction"] = "reaction", map[string]any{"message_id": m.Target, "emoji": m.Emoji}
	case channels.TypeTemplate:
		body["type"], body["template"] = "template", templateBody(m.Template)
	default:
		return channels.Sent{}, &channels.Failure{Code: "capability_not_supported",
			Detail: "the WhatsApp Cloud API cannot send " + string(m.Type) + " messages"}
	}
	var out struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if err := s.g.do(ctx, http.MethodPost, "/"+s.a.phoneID+"/messages", body, "", &out); err != nil {
		return channels.Sent{}, failureOf(err, m.Type)
	}
	if len(out.Messages) == 0 || out.Messages[0].ID == "" {
		return channels.Sent{}, &channels.Failure{Code: "network_error", Detail: "Meta accepted the message without a message ID", Retryable: true}
	}
	// The Cloud API takes no idempotency key: a resend is a second message.
	return channels.Sent{ProviderID: out.Messages[0].ID, At: time.Now(), PossibleRepeat: m.MayRepeat()}, nil
}

// templateBody is a template message's "template" object: the components given, plus a body component with the
// parameters.
func templateBody(t *channels.Template) map[string]any {
	var comps []any
	for _, c := range t.Components {
		comps = append(comps, c)
	}
	if len(t.Parameters) > 0 {
		params := make([]any, len(t.Parameters))
		for i, p := range t.Parameters {
			params[i] = map[string]any{"type": "text", "text": p}
		}
		comps = append(comps, map[string]any{"type": "body", "parameters": params})
	}
	out := map[string]any{"name": t.Name, "language": map[string]any{"code": t.Language}}
	if len(comps) > 0 {
		out["components"] = comps
	}
	return out
}

// MarkRead marks a person's message read (blue ticks for them, and for every earlier message of the chat).
func (s *session) MarkRead(ctx context.Context, _ string, upTo string) error {
	if upTo == "" {
		return nil
	}
	err := s.g.do(ctx, http.MethodPost, "/"+s.a.phoneID+"/messages",
		message{"messaging_product": "whatsapp", "status": "read", "message_id": upTo}, "", nil)
	if err != nil {
		return failureOf(err, "")
	}
	return nil
}

// Templates lists the account's templates, following Meta's pages.
func (s *session) Templates(ctx context.Context) ([]channels.TemplateInfo, error) {
	if s.a.wabaID == "" {
		return nil, &channels.Failure{Code: "invalid_argument",
			Detail: "set business_account_id in the instance's config to list its templates"}
	}
	var all []channels.TemplateInfo
	after := ""
	for range 50 {
		q := url.Values{"fields": {"name,language,status,category,components"}, "limit": {"100"}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Data   []channels.TemplateInfo `json:"data"`
			Paging struct {
				Cursors struct {
					After string `json:"after"`
				} `json:"cursors"`
				Next string `json:"next"`
			} `json:"paging"`
		}
		if err := s.g.do(ctx, http.MethodGet, "/"+s.a.wabaID+"/message_templates?"+q.Encode(), nil, "", &page); err != nil {
			return nil, failureOf(err, "")
		}
		all = append(all, page.Data...)
		if page.Paging.Next == "" || page.Paging.Cursors.After == "" {
			break
		}
		after = page.Paging.Cursors.After
	}
	return all, nil
}
