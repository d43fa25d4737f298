//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// sent sends m to the peer and returns what the peer's devices received.
func (r *rig) sent(m channels.Outbound) (channels.Sent, *waE2E.Message) {
	r.t.Helper()
	if m.MessageID == "" {
		m.MessageID = store.NewID("msg")
	}
	if m.Chat == "" {
		m.Chat = "+" + r.peer.phone
	}
	s, err := r.sess.Send(r.t.Context(), m)
	if err != nil {
		r.t.Fatalf("sending %s: %v", m.Type, err)
	}
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	for _, got := range r.peer.received {
		if got.id == s.ProviderID {
			return s, got.msg
		}
	}
	r.t.Fatalf("the peer did not receive %s", s.ProviderID)
	return s, nil
}

func attachment(kind, mime, name string, data string) *channels.Media {
	return &channels.Media{Kind: kind, MIMEType: mime, Filename: name, Caption: "cap", Size: int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(data)), nil }}
}

// Every message type the provider lists goes out as WhatsApp's message of that type.
func TestSendEveryType(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	text, msg := r.sent(channels.Outbound{Type: channels.TypeText, Text: "hello"})
	if msg.GetConversation() != "hello" || !strings.HasPrefix(text.ProviderID, "3EB0") || len(text.ProviderID) != 22 {
		t.Errorf("text: %v as %s", msg, text.ProviderID)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeText, Text: "yes", ReplyTo: text.ProviderID})
	ci := msg.GetExtendedTextMessage().GetContextInfo()
	if msg.GetExtendedTextMessage().GetText() != "yes" || ci.GetStanzaID() != text.ProviderID ||
		ci.GetParticipant() != "15550100001@s.whatsapp.net" {
		t.Errorf("reply: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeReaction, Target: text.ProviderID, Emoji: "👍"})
	if rm := msg.GetReactionMessage(); rm.GetText() != "👍" || rm.GetKey().GetID() != text.ProviderID || !rm.GetKey().GetFromMe() {
		t.Errorf("reaction to the account's own message: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeEdit, Target: text.ProviderID, Text: "hello!"})
	pm := msg.GetEditedMessage().GetMessage().GetProtocolMessage()
	if pm.GetType() != waE2E.ProtocolMessage_MESSAGE_EDIT || pm.GetKey().GetID() != text.ProviderID ||
		pm.GetEditedMessage().GetConversation() != "hello!" {
		t.Errorf("edit: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeDelete, Target: text.ProviderID})
	if pm := msg.GetProtocolMessage(); pm.GetType() != waE2E.ProtocolMessage_REVOKE || pm.GetKey().GetID() != text.ProviderID {
		t.Errorf("revoke: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeMedia, Media: attachment("image", "image/png", "", "PNG")})
	if im := msg.GetImageMessage(); im.GetMimetype() != "image/png" || im.GetCaption() != "cap" || im.GetFileLength() != 3 || im.GetDirectPath() == "" {
		t.Errorf("image: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeMedia, Media: attachment("audio", "audio/ogg; codecs=opus", "", "OGG")})
	if !msg.GetAudioMessage().GetPTT() {
		t.Errorf("an Ogg Opus audio goes as a voice note: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeMedia, Media: attachment("audio", "audio/mpeg", "", "MP3")})
	if msg.GetAudioMessage() == nil || msg.GetAudioMessage().GetPTT() {
		t.Errorf("an MP3 goes as audio: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeMedia, Media: attachment("document", "application/pdf", "a.pdf", "PDF")})
	if msg.GetDocumentMessage().GetFileName() != "a.pdf" {
		t.Errorf("document: %v", msg)
	}
	for kind, has := range map[string]func(*waE2E.Message) bool{
		"video":   func(m *waE2E.Message) bool { return m.GetVideoMessage() != nil },
		"sticker": func(m *waE2E.Message) bool { return m.GetStickerMessage() != nil },
	} {
		if _, msg = r.sent(channels.Outbound{Type: channels.TypeMedia, Media: attachment(kind, "x/y", "", "B")}); !has(msg) {
			t.Errorf("%s: %v", kind, msg)
		}
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeLocation, Location: &channels.Location{Latitude: 1.5, Longitude: 2.5, Name: "here"}})
	if lm := msg.GetLocationMessage(); lm.GetDegreesLatitude() != 1.5 || lm.GetName() != "here" {
		t.Errorf("location: %v", msg)
	}
	_, msg = r.sent(channels.Outbound{Type: channels.TypeContact, Contact: &channels.ContactCard{Name: "Ada, L", Phones: []string{"+1 555 010 0009"}}})
	cm := msg.GetContactMessage()
	if cm.GetDisplayName() != "Ada, L" || !strings.Contains(cm.GetVcard(), "FN:Ada\\, L\n") ||
		!strings.Contains(cm.GetVcard(), "TEL;type=CELL;waid=15550100009:+15550100009") {
		t.Errorf("contact: %v", msg)
	}
	if got := vcardPhones(cm.GetVcard()); len(got) != 1 || got[0] != "+15550100009" {
		t.Errorf("the vCard sent reads back as %v", got)
	}
}

// Every attempt of one message carries the same WhatsApp ID; a resend says it may repeat.
func TestResendKeepsTheMessageID(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	m := channels.Outbound{MessageID: store.NewID("msg"), Type: channels.TypeText, Text: "once"}
	first, _ := r.sent(m)
	m.Resend = true
	again, _ := r.sent(m)
	if first.ProviderID != again.ProviderID || first.PossibleRepeat || !again.PossibleRepeat {
		t.Errorf("first %+v, resend %+v", first, again)
	}
	if len(r.peer.received) != 1 {
		t.Errorf("the peer's devices hold %d copies", len(r.peer.received))
	}
}

// Refusals come back as failures with the API's codes.
func TestSendRefusals(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	for _, tc := range []struct {
		m    channels.Outbound
		code string
	}{
		{channels.Outbound{Type: channels.TypeText}, "invalid_message"},
		{channels.Outbound{Type: channels.TypeMedia}, "invalid_message"},
		{channels.Outbound{Type: channels.TypeReaction, Emoji: "x"}, "invalid_message"},
		{channels.Outbound{Type: channels.TypeTemplate}, "capability_not_supported"},
		{channels.Outbound{Type: channels.TypeText, Text: "x", Chat: "someone@example.com"}, "invalid_address"},
		{channels.Outbound{Type: channels.TypeMedia, Media: &channels.Media{Kind: "image",
			Open: func(context.Context) (io.ReadCloser, error) {
				return io.NopCloser(io.LimitReader(zeros{}, MaxMedia+1)), nil
			}}}, "media_rejected"},
	} {
		tc.m.MessageID = store.NewID("msg")
		if tc.m.Chat == "" {
			tc.m.Chat = "+" + r.peer.phone
		}
		_, err := r.sess.Send(t.Context(), tc.m)
		var f *channels.Failure
		if !errors.As(err, &f) || f.Code != tc.code {
			t.Errorf("sending %+v: %v, want %s", tc.m.Type, err, tc.code)
		}
	}
	r.emit(&events.Disconnected{})
	r.ended()
	_, err := r.sess.Send(t.Context(), channels.Outbound{MessageID: "m", Chat: "+" + r.peer.phone, Type: channels.TypeText, Text: "x"})
	var f *channels.Failure
	if !errors.As(err, &f) || f.Code != "not_connected" || !f.Retryable {
		t.Errorf("a send after the connection ended: %v, want a retryable not_connected", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Groups: create (a number without WhatsApp is rejected, the group made with the others), read, rename and
// describe, participant changes with a result each, invite links, join by invite, leave.
func TestGroups(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := t.Context()
	g, err := r.sess.CreateGroup(ctx, "Team", []string{"+" + r.peer.phone, "+15559999999"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(g.Address, "@g.us") || len(g.Participants) != 2 || g.Participants[0].Role != "owner" ||
		len(g.Rejected) != 1 || g.Rejected[0].Address != "+15559999999" || g.Rejected[0].Failure.Code != "recipient_not_on_network" {
		t.Fatalf("created %+v", g)
	}
	subject, desc := "Team 2", "the team"
	if g, err = r.sess.UpdateGroup(ctx, g.Address, &subject, &desc); err != nil || g.Subject != subject || g.Description != desc {
		t.Fatalf("updated %+v, %v", g, err)
	}
	other := r.n.add("4420790000001", "Other")
	res, err := r.sess.ChangeParticipants(ctx, g.Address, "add", []string{"+" + other.phone, "+" + r.peer.phone, "+15559999999"})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || res[1].Failure.Code != "already_participant" || res[2].Failure.Code != "recipient_not_on_network" {
		t.Errorf("add results %+v", res)
	}
	if res, err = r.sess.ChangeParticipants(ctx, g.Address, "promote", []string{"+" + other.phone}); err != nil || !res[0].OK {
		t.Errorf("promote: %+v, %v", res, err)
	}
	if g, _ = r.sess.GetGroup(ctx, g.Address); g.Participants[2].Role != "admin" || g.Participants[2].Address != "+"+other.phone {
		t.Errorf("after the promotion: %+v", g.Participants)
	}
	if _, err = r.sess.ChangeParticipants(ctx, g.Address, "ban", nil); failureCode(err) != "invalid_action" {
		t.Errorf("an unknown action: %v", err)
	}
	link, err := r.sess.InviteLink(ctx, g.Address, false)
	if err != nil || !strings.HasPrefix(link, invitePrefix) {
		t.Fatalf("invite %q, %v", link, err)
	}
	revoked, _ := r.sess.InviteLink(ctx, g.Address, true)
	if revoked == link {
		t.Error("revoking the invite kept the link")
	}
	if _, err = r.sess.JoinGroup(ctx, link); failureCode(err) != "invalid_invite" {
		t.Errorf("joining with the revoked link: %v", err)
	}
	if err = r.sess.LeaveGroup(ctx, g.Address); err != nil {
		t.Fatal(err)
	}
	if joined, err := r.sess.JoinGroup(ctx, revoked); err != nil || joined.Address != g.Address {
		t.Errorf("joining with the new link: %+v, %v", joined, err)
	}
	if _, err = r.sess.GetGroup(ctx, "120363000000000000@g.us"); failureCode(err) != "group_not_found" {
		t.Errorf("a group that does not exist: %v", err)
	}
	if _, err = r.sess.CreateGroup(ctx, strings.Repeat("x", MaxSubject+1), nil); failureCode(err) != "invalid_subject" {
		t.Errorf("a subject too long: %v", err)
	}
}

func failureCode(err error) string {
	var f *channels.Failure
	if errors.As(err, &f) {
		return f.Code
	}
	return ""
}

// Lookup says which numbers are on WhatsApp, with the LID of each as another ID; block and mark read reach
// WhatsApp; a pairing code is refused once paired and given before.
func TestContactsAndPairingCode(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := t.Context()
	res, err := r.sess.Lookup(ctx, []string{"+49 151 1234 5678", "+15559999999"})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OnNetwork || res[0].Normalized != "+4915112345678" || len(res[0].IDs) != 1 || res[0].IDs[0] != r.peer.lid+"@lid" || res[1].OnNetwork {
		t.Errorf("lookup %+v", res)
	}
	if _, err = r.sess.Lookup(ctx, make([]string, MaxLookup+1)); failureCode(err) != "invalid_argument" {
		t.Errorf("a lookup of too many: %v", err)
	}
	if err = r.sess.Block(ctx, "+"+r.peer.phone, true); err != nil {
		t.Error(err)
	}
	if err = r.sess.MarkRead(ctx, "+"+r.peer.phone, "3EB0X"); err != nil {
		t.Error(err)
	}
	if _, err = r.sess.PairingCode(ctx, "+15550100001"); failureCode(err) != "conflict" {
		t.Errorf("a pairing code for a paired instance: %v", err)
	}
	fresh := newRig(t, sqlite(t), false)
	fresh.await("the QR code", func(c call) bool { return c.kind == "qr" })
	code, err := fresh.sess.PairingCode(ctx, "+1 555 010 0001")
	if err != nil || code != "ABCD-0001" {
		t.Errorf("pairing code %q, %v", code, err)
	}
	if _, err = fresh.sess.PairingCode(ctx, "120363000000000000@g.us"); failureCode(err) != "invalid_address" {
		t.Errorf("a pairing code for a group: %v", err)
	}
}

// A person's profile picture as WhatsApp shows it: the bytes and WhatsApp's ID of it; none when hidden or unset.
func TestProfilePicture(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := t.Context()
	pic, err := r.sess.Picture(ctx, "+4915112345678")
	if err != nil || pic.Data != nil {
		t.Fatalf("a person without a picture: %+v, %v", pic, err)
	}
	r.n.mu.Lock()
	r.peer.picture, r.peer.pictureID = []byte("\xff\xd8\xff a jpeg"), "1700000000"
	r.n.mu.Unlock()
	pic, err = r.sess.Picture(ctx, "+4915112345678")
	if err != nil || string(pic.Data) != "\xff\xd8\xff a jpeg" || pic.ID != "1700000000" || pic.MIMEType != "image/jpeg" {
		t.Fatalf("the picture: %+v, %v", pic, err)
	}
	if _, err := r.sess.Picture(ctx, "not an address"); failureCode(err) != "invalid_address" {
		t.Errorf("a bad address: %v", err)
	}
}
