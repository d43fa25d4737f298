//go:build whatsapp_web

package whatsappweb

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	waCommon "go.mau.fi/whatsmeow/proto/waCommon"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	waHistorySync "go.mau.fi/whatsmeow/proto/waHistorySync"
	waWeb "go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/channels"
)

// The QR codes of a batch are shown in turn, each as instance.qr_updated; after the last the pairing has timed out
// and the session ends for good, disconnected, with the reason.
func TestQRCodesRotateThenPairingTimesOut(t *testing.T) {
	first, next := firstQRTimeout, nextQRTimeout
	firstQRTimeout, nextQRTimeout = time.Millisecond, time.Millisecond
	t.Cleanup(func() { firstQRTimeout, nextQRTimeout = first, next })
	r := newRig(t, sqlite(t), false)
	if err := r.ended(); err != nil {
		t.Fatalf("Run after the QR codes expired: %v, want nil (ended for good)", err)
	}
	var codes []string
	var last call
	for _, c := range r.sink.all() {
		if c.kind == "qr" {
			codes = append(codes, c.code)
		}
		last = c
	}
	if len(codes) != 2 || !strings.HasSuffix(codes[1], "-b") || codes[0] == codes[1] {
		t.Errorf("QR codes shown: %q, want the batch's two in order", codes)
	}
	if last.kind != "state" || last.status != channels.StatusDisconnected || !strings.Contains(last.reason, "not scanned") {
		t.Errorf("the last report is %s, want disconnected because the code was not scanned", last)
	}
}

// WhatsApp closes the connection of an unpaired device once its codes expired: the instance waits, disconnected,
// for a client to connect it again, instead of new codes rotating for nobody.
func TestDisconnectWhileWaitingForAScanEndsThePairing(t *testing.T) {
	r := newRig(t, sqlite(t), false)
	r.await("the QR code", func(c call) bool { return c.kind == "qr" })
	r.emit(&events.Disconnected{})
	if err := r.ended(); err != nil {
		t.Fatalf("Run returned %v, want nil (ended for good)", err)
	}
	all := r.sink.all()
	if last := all[len(all)-1]; last.status != channels.StatusDisconnected || !strings.Contains(last.reason, "not scanned") {
		t.Errorf("the last report is %s", last)
	}
}

// Scanning the code pairs the device: connecting after PairSuccess, then connected with the phone number, the LID
// as another ID of the same account, and credentials that name the device saved in the store.
func TestPairSuccessThenConnectedReportsTheAccount(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	kinds := []string{}
	for _, c := range r.sink.all() {
		kinds = append(kinds, c.kind+":"+string(c.status))
	}
	want := []string{"state:connecting", "qr:", "state:connecting", "connected:"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("reports %v, want %v", kinds, want)
	}
	c := r.await("connected", func(c call) bool { return c.kind == "connected" })
	if c.party.Address != "+15550100001" || c.party.DisplayName != "Me" || len(c.party.IDs) != 1 ||
		c.party.IDs[0] != r.me.lid+"@lid" {
		t.Errorf("account %+v, want +15550100001 (Me) with its LID %s@lid", c.party, r.me.lid)
	}
	var creds credentials
	if err := json.Unmarshal(c.creds, &creds); err != nil {
		t.Fatal(err)
	}
	jid, _ := types.ParseJID(creds.JID)
	if ok, err := r.p.devices.Paired(t.Context(), jid); err != nil || !ok {
		t.Errorf("the credentials name %s, which is not in the device store (%v)", creds.JID, err)
	}
}

// A restart with the credentials restores the device without a QR code.
func TestReconnectWithCredentialsRestoresTheDevice(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	c := r.await("connected", func(c call) bool { return c.kind == "connected" })
	r.emit(&events.Disconnected{})
	if err := r.ended(); err == nil {
		t.Fatal("Run after a disconnect returned nil; want an error for the runtime's backoff")
	}
	mark := len(r.sink.all())
	r.open(c.creds)
	r.await("the restored session to connect", func(x call) bool { return x.kind == "connected" })
	for _, x := range r.since(mark) {
		if x.kind == "qr" {
			t.Errorf("the restored session showed a QR code")
		}
	}
}

// How each event that ends a connection ends the session: for good (reported, Run returns nil) or for the
// runtime's backoff (Run returns a retryable failure, nothing reported as the instance's state).
func TestConnectionEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		evt    any
		status channels.Status // "" when the runtime retries
		reason string
		code   string // the failure's code when the runtime retries
	}{
		{"the phone removed the device", &events.LoggedOut{}, channels.StatusLoggedOut, "removed this linked device", ""},
		{"WhatsApp refused the device on connect", &events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureMainDeviceGone},
			channels.StatusLoggedOut, "403", ""},
		{"a connect failure that is a logout", &events.ConnectFailure{Reason: events.ConnectFailureLoggedOut},
			channels.StatusLoggedOut, "401", ""},
		{"another client took the session", &events.StreamReplaced{}, channels.StatusFailed, "conflict", ""},
		{"a temporary ban without an end", &events.TemporaryBan{Code: events.TempBanSentToTooManyPeople},
			channels.StatusFailed, "restricted: WhatsApp temporarily banned the account (101: you sent too many messages", ""},
		{"an outdated client", &events.ClientOutdated{}, channels.StatusFailed, "client_outdated", ""},
		{"a lost connection", &events.Disconnected{}, "", "", "server_unreachable"},
		{"keep-alive timeouts", &events.KeepAliveTimeout{ErrorCount: 3, LastSuccess: time.Now()}, "", "", "server_unreachable"},
		{"a stream error", &events.StreamError{Code: "503"}, "", "", "stream_error"},
		{"a server-side connect failure", &events.ConnectFailure{Reason: events.ConnectFailureServiceUnavailable}, "", "", "stream_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, sqlite(t), true)
			mark := len(r.sink.all())
			r.emit(tc.evt)
			err := r.ended()
			after := r.since(mark)
			if tc.status == "" {
				var f *channels.Failure
				if !errors.As(err, &f) || f.Code != tc.code || !f.Retryable {
					t.Errorf("Run returned %v, want a retryable %s failure", err, tc.code)
				}
				if len(after) != 0 {
					t.Errorf("reported %v; the runtime reports the backoff", after)
				}
				return
			}
			if err != nil {
				t.Errorf("Run returned %v, want nil (ended for good)", err)
			}
			if len(after) != 1 || after[0].status != tc.status || !strings.Contains(after[0].reason, tc.reason) {
				t.Fatalf("reported %v, want %s with a reason containing %q", after, tc.status, tc.reason)
			}
		})
	}
}

// A temporary ban with an end ends Run with a Restriction until then, with WhatsApp's reason, and reports no
// state itself: the runtime shows the instance restricted and opens the session again when the ban ends.
func TestTemporaryBanIsARestrictionUntilItsEnd(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	before := time.Now()
	mark := len(r.sink.all())
	r.emit(&events.TemporaryBan{Code: events.TempBanBlockedByUsers, Expire: 2 * time.Hour})
	err := r.ended()
	var x *channels.Restriction
	if !errors.As(err, &x) {
		t.Fatalf("Run returned %v, want a Restriction", err)
	}
	if x.Until.Before(before.Add(2*time.Hour)) || x.Until.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("restricted until %v, want two hours after the ban", x.Until)
	}
	if !strings.Contains(x.Reason, "temporarily banned") || !strings.Contains(x.Reason, "102") {
		t.Errorf("reason %q, want WhatsApp's ban and its code", x.Reason)
	}
	if after := r.since(mark); len(after) != 0 {
		t.Errorf("reported %v; the runtime records the restriction", after)
	}
}

// When the phone removes the device, its rows are gone from the store before the instance shows logged_out.
func TestLoggedOutWipesTheDevice(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	jid := *r.client.Load().dev.ID
	r.emit(&events.LoggedOut{})
	r.await("logged out", func(c call) bool { return c.status == channels.StatusLoggedOut })
	if ok, err := r.p.devices.Paired(t.Context(), jid); err != nil || ok {
		t.Errorf("the device is still in the store after the phone removed it (%v)", err)
	}
}

// Logout unlinks the device on WhatsApp and deletes its rows; a session with the dropped credentials is refused.
func TestLogoutWipesTheDevice(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	c := r.await("connected", func(c call) bool { return c.kind == "connected" })
	jid := *r.client.Load().dev.ID
	if err := r.sess.Logout(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.p.devices.Paired(t.Context(), jid); err != nil || ok {
		t.Errorf("the device is still in the store after logout (%v)", err)
	}
	if r.me.devices[jid.String()] {
		t.Error("WhatsApp still lists the device after logout")
	}
	mark := len(r.sink.all())
	r.open(c.creds)
	r.await("the session with dropped credentials to ask for a new pairing", func(c call) bool { return c.kind == "qr" })
	for _, x := range r.since(mark) {
		if x.kind == "connected" {
			t.Error("a session with the dropped credentials connected")
		}
	}
}

// message is an inbound message from the peer in a chat with them, addressed as WhatsApp does now: by LID, with
// the phone number beside it.
func (r *rig) message(id string, m *waE2E.Message) *events.Message {
	return &events.Message{Info: types.MessageInfo{ID: id, PushName: "Peer", Timestamp: time.Unix(1700000000, 0),
		MessageSource: types.MessageSource{Chat: r.peer.jid(), Sender: r.peer.jid(), SenderAlt: r.peer.pn(),
			AddressingMode: types.AddressingModeLID}}, Message: m}
}

func (r *rig) inbound(id string) channels.Inbound {
	r.t.Helper()
	return r.await("message "+id, func(c call) bool { return c.kind == "inbound" && c.in.ProviderID == id }).in
}

// Every content type reaches the sink as the API's message: the chat and sender by phone number with the LID as
// another ID of the same person.
func TestInboundMessagesOfEveryType(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	media.Lock()
	media.byPath["/v/photo"] = []byte("JPEG bytes")
	media.Unlock()
	quote := &waE2E.ContextInfo{StanzaID: proto.String("3EB0QUOTED")}
	key := &waCommon.MessageKey{ID: proto.String("3EB0TARGET"), FromMe: proto.Bool(true)}
	msgs := map[string]*waE2E.Message{
		"text":     {Conversation: proto.String("hello")},
		"reply":    {ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("yes"), ContextInfo: quote}},
		"image":    {ImageMessage: &waE2E.ImageMessage{DirectPath: proto.String("/v/photo"), Mimetype: proto.String("image/jpeg"), Caption: proto.String("look"), FileLength: proto.Uint64(10)}},
		"video":    {VideoMessage: &waE2E.VideoMessage{DirectPath: proto.String("/v/video"), Mimetype: proto.String("video/mp4")}},
		"voice":    {AudioMessage: &waE2E.AudioMessage{DirectPath: proto.String("/v/voice"), Mimetype: proto.String("audio/ogg; codecs=opus"), PTT: proto.Bool(true)}},
		"document": {DocumentMessage: &waE2E.DocumentMessage{DirectPath: proto.String("/v/doc"), Mimetype: proto.String("application/pdf"), FileName: proto.String("a.pdf")}},
		"sticker":  {StickerMessage: &waE2E.StickerMessage{DirectPath: proto.String("/v/sticker"), Mimetype: proto.String("image/webp")}},
		"location": {LocationMessage: &waE2E.LocationMessage{DegreesLatitude: proto.Float64(52.52), DegreesLongitude: proto.Float64(13.405), Name: proto.String("Berlin")}},
		"contact": {ContactMessage: &waE2E.ContactMessage{DisplayName: proto.String("Ada"),
			Vcard: proto.String("BEGIN:VCARD\nVERSION:3.0\nFN:Ada\nTEL;type=CELL;waid=15550100009:+1 555 010 0009\nEND:VCARD")}},
		"reaction": {ReactionMessage: &waE2E.ReactionMessage{Key: key, Text: proto.String("👍")}},
		"revoke":   {ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(), Key: key}},
		"edit": {ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), Key: key,
			EditedMessage: &waE2E.Message{Conversation: proto.String("fixed")}}},
	}
	for id, m := range msgs {
		r.emit(r.message(id, m))
	}
	for id := range msgs {
		in := r.inbound(id)
		if in.Chat != "+4915112345678" || in.From.Address != "+4915112345678" || in.From.DisplayName != "Peer" ||
			len(in.From.IDs) != 1 || in.From.IDs[0] != r.peer.lid+"@lid" || in.FromMe {
			t.Errorf("%s: chat %q from %+v, want the peer by number with their LID", id, in.Chat, in.From)
		}
	}
	check := func(id string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", id, got)
		}
	}
	in := r.inbound("text")
	check("text", in.Type == channels.TypeText && in.Text == "hello", in)
	in = r.inbound("reply")
	check("reply", in.Type == channels.TypeText && in.Text == "yes" && in.ReplyTo == "3EB0QUOTED", in)
	in = r.inbound("image")
	check("image", in.Type == channels.TypeMedia && in.Media.Kind == "image" && in.Media.Caption == "look" &&
		in.Media.MIMEType == "image/jpeg" && in.Media.Size == 10, in.Media)
	rc, err := in.Media.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, _ := rc.Read(b)
	check("image bytes", string(b[:n]) == "JPEG bytes", string(b[:n]))
	for id, kind := range map[string]string{"video": "video", "voice": "audio", "document": "document", "sticker": "sticker"} {
		in = r.inbound(id)
		check(id, in.Type == channels.TypeMedia && in.Media.Kind == kind, in.Media)
	}
	check("document name", r.inbound("document").Media.Filename == "a.pdf", r.inbound("document").Media)
	if _, err := r.inbound("video").Media.Open(t.Context()); err == nil {
		t.Error("an attachment the media servers do not have opened without an error")
	}
	in = r.inbound("location")
	check("location", in.Type == channels.TypeLocation && in.Location.Latitude == 52.52 && in.Location.Name == "Berlin", in.Location)
	in = r.inbound("contact")
	check("contact", in.Type == channels.TypeContact && in.Contact.Name == "Ada" && len(in.Contact.Phones) == 1 &&
		in.Contact.Phones[0] == "+1 555 010 0009", in.Contact)
	in = r.inbound("reaction")
	check("reaction", in.Type == channels.TypeReaction && in.Target == "3EB0TARGET" && in.Emoji == "👍", in)
	in = r.inbound("revoke")
	check("revoke", in.Type == channels.TypeDelete && in.Target == "3EB0TARGET", in)
	in = r.inbound("edit")
	check("edit", in.Type == channels.TypeEdit && in.Target == "3EB0TARGET" && in.Text == "fixed", in)
}

// Content the API has no type for, and status broadcasts, are not reported.
func TestInboundSkipsWhatTheAPIHasNoTypeFor(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	r.emit(r.message("event", &waE2E.Message{EventMessage: &waE2E.EventMessage{Name: proto.String("party")}}))
	// A poll the API could not show (fewer than two options).
	r.emit(r.message("poll", &waE2E.Message{PollCreationMessage: &waE2E.PollCreationMessage{Name: proto.String("?")}}))
	status := r.message("status", &waE2E.Message{Conversation: proto.String("my status")})
	status.Info.Chat = types.StatusBroadcastJID
	r.emit(status)
	r.emit(r.message("after", &waE2E.Message{Conversation: proto.String("after")}))
	r.inbound("after")
	for _, c := range r.sink.all() {
		if c.kind == "inbound" && c.in.ProviderID != "after" {
			t.Errorf("reported %s, which the API has no type for", c.in.ProviderID)
		}
	}
}

// A person seen only by LID is the contact of their phone number once WhatsApp mapped it, and by the LID alone
// before; a group message names the group as the chat and the participant as the sender.
func TestLIDAndPhoneNumberAreOnePerson(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	onlyLID := r.message("mapped", &waE2E.Message{Conversation: proto.String("hi")})
	onlyLID.Info.SenderAlt = types.EmptyJID
	r.emit(onlyLID)
	in := r.inbound("mapped")
	if in.From.Address != "+4915112345678" || in.Chat != "+4915112345678" || len(in.From.IDs) != 1 {
		t.Errorf("a message by LID alone: chat %q from %+v, want the number WhatsApp mapped the LID to", in.Chat, in.From)
	}
	stranger := types.NewJID("987654321098765", types.HiddenUserServer)
	unknown := r.message("unmapped", &waE2E.Message{Conversation: proto.String("hi")})
	unknown.Info.Chat, unknown.Info.Sender, unknown.Info.SenderAlt = stranger, stranger, types.EmptyJID
	r.emit(unknown)
	in = r.inbound("unmapped")
	if in.From.Address != "987654321098765@lid" || in.Chat != "987654321098765@lid" {
		t.Errorf("a LID without a number: chat %q from %+v, want the LID as the address", in.Chat, in.From)
	}
	if norm, err := r.p.NormalizeAddress(in.From.Address); err != nil || norm != in.From.Address {
		t.Errorf("the LID address does not normalize to itself: %q, %v", norm, err)
	}
	group := types.NewJID("120363025246125486", types.GroupServer)
	inGroup := r.message("group", &waE2E.Message{Conversation: proto.String("hi all")})
	inGroup.Info.Chat, inGroup.Info.IsGroup = group, true
	r.emit(inGroup)
	in = r.inbound("group")
	if in.Chat != "120363025246125486@g.us" || in.From.Address != "+4915112345678" {
		t.Errorf("a group message: chat %q from %+v", in.Chat, in.From)
	}
	mine := r.message("mine", &waE2E.Message{Conversation: proto.String("from my phone")})
	mine.Info.IsFromMe, mine.Info.Sender, mine.Info.SenderAlt = true, r.me.jid(), r.me.pn()
	mine.Info.Chat, mine.Info.RecipientAlt = r.peer.jid(), r.peer.pn()
	r.emit(mine)
	in = r.inbound("mine")
	if !in.FromMe || in.Chat != "+4915112345678" || in.From.Address != "+15550100001" {
		t.Errorf("a message from the account's phone: chat %q from %+v fromMe %v", in.Chat, in.From, in.FromMe)
	}
}

// Delivered, read and played receipts of the account's messages reach the sink, one per message ID; the account's
// own reads on other devices and protocol receipts do not.
func TestReceipts(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	src := types.MessageSource{Chat: r.peer.pn(), Sender: r.peer.pn()}
	r.emit(&events.Receipt{MessageSource: src, MessageIDs: []string{"a", "b"}, Type: types.ReceiptTypeDelivered})
	r.emit(&events.Receipt{MessageSource: src, MessageIDs: []string{"a"}, Type: types.ReceiptTypeRetry})
	r.emit(&events.Receipt{MessageSource: types.MessageSource{Chat: r.peer.pn(), Sender: r.me.pn(), IsFromMe: true},
		MessageIDs: []string{"c"}, Type: types.ReceiptTypeReadSelf})
	r.emit(&events.Receipt{MessageSource: src, MessageIDs: []string{"a"}, Type: types.ReceiptTypeRead})
	r.emit(&events.Receipt{MessageSource: src, MessageIDs: []string{"b"}, Type: types.ReceiptTypePlayed})
	r.await("the played receipt", func(c call) bool {
		return c.kind == "receipt" && c.receipt.ProviderID == "b" && c.receipt.Status == "read"
	})
	var got []string
	for _, c := range r.sink.all() {
		if c.kind == "receipt" {
			got = append(got, c.receipt.ProviderID+":"+c.receipt.Status)
		}
	}
	if strings.Join(got, " ") != "a:delivered b:delivered a:read b:read" {
		t.Errorf("receipts %v", got)
	}
}

// Group events: joining reports the group with its participants and roles; a change reports it updated or its
// participants changed; being removed reports it left. Identity and push-name changes refresh the contact.
func TestGroupAndContactEvents(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	group := types.NewJID("120363025246125486", types.GroupServer)
	r.emit(&events.JoinedGroup{Type: "new", GroupInfo: types.GroupInfo{JID: group,
		GroupName: types.GroupName{Name: "Team"}, GroupTopic: types.GroupTopic{Topic: "work"},
		Participants: []types.GroupParticipant{
			{JID: r.peer.jid(), LID: r.peer.jid(), PhoneNumber: r.peer.pn(), IsSuperAdmin: true, IsAdmin: true},
			{JID: r.me.jid(), LID: r.me.jid(), PhoneNumber: r.me.pn()},
		}}})
	c := r.await("the joined group", func(c call) bool { return c.kind == "group" && c.change == channels.GroupCreated })
	g := c.group
	if g.Address != "120363025246125486@g.us" || g.Subject != "Team" || g.Description != "work" || len(g.Participants) != 2 ||
		g.Participants[0].Address != "+4915112345678" || g.Participants[0].Role != "owner" ||
		g.Participants[1].Address != "+15550100001" || g.Participants[1].Role != "member" {
		t.Errorf("joined group %+v", g)
	}
	r.emit(&events.GroupInfo{JID: group, Name: &types.GroupName{Name: "Team 2"}})
	c = r.await("the renamed group", func(c call) bool { return c.kind == "group" && c.change == channels.GroupUpdated })
	if c.group.Subject != "Team 2" {
		t.Errorf("renamed group %+v", c.group)
	}
	r.emit(&events.GroupInfo{JID: group, Join: []types.JID{types.NewJID("15550100007", types.DefaultUserServer)}})
	r.await("the participants change", func(c call) bool { return c.kind == "group" && c.change == channels.GroupParticipantsChanged })
	r.emit(&events.GroupInfo{JID: group, Leave: []types.JID{r.me.jid()}})
	c = r.await("the group left", func(c call) bool { return c.kind == "group" && c.change == channels.GroupLeft })
	if c.group.Address != "120363025246125486@g.us" {
		t.Errorf("left group %+v", c.group)
	}
	r.emit(&events.IdentityChange{JID: r.peer.jid(), Timestamp: time.Now()})
	c = r.await("the identity change", func(c call) bool { return c.kind == "contact" })
	if c.party.Address != "+4915112345678" || len(c.party.IDs) != 1 {
		t.Errorf("identity change reported %+v, want the peer by number with their LID", c.party)
	}
	r.emit(&events.PushName{JID: r.peer.jid(), JIDAlt: r.peer.pn(), NewPushName: "Peer Two"})
	r.await("the new push name", func(c call) bool { return c.kind == "contact" && c.party.DisplayName == "Peer Two" })
}

// The phone's history sync is reported only for an instance that opted in, as one run of received messages, each
// in its chat with its sender; without the opt-in nothing of it is.
func TestHistorySyncIsOptIn(t *testing.T) {
	group := types.NewJID("120363025246125486", types.GroupServer)
	history.Lock()
	history.byPath["/v/history"] = &waHistorySync.HistorySync{Conversations: []*waHistorySync.Conversation{
		{ID: proto.String("4915112345678@s.whatsapp.net"), Messages: []*waHistorySync.HistorySyncMsg{
			{Message: &waWeb.WebMessageInfo{Key: &waCommon.MessageKey{ID: proto.String("3AOLD1")}, MessageTimestamp: proto.Uint64(1600000000),
				Message: &waE2E.Message{Conversation: proto.String("an old message")}}},
			{Message: &waWeb.WebMessageInfo{Key: &waCommon.MessageKey{ID: proto.String("3AOLD2"), FromMe: proto.Bool(true)},
				MessageTimestamp: proto.Uint64(1600000100), Message: &waE2E.Message{Conversation: proto.String("my old answer")}}},
		}},
		{ID: proto.String(group.String()), Messages: []*waHistorySync.HistorySyncMsg{
			{Message: &waWeb.WebMessageInfo{Key: &waCommon.MessageKey{ID: proto.String("3AOLD3")}, Participant: proto.String("4915112345678@s.whatsapp.net"),
				MessageTimestamp: proto.Uint64(1600000200), Message: &waE2E.Message{Conversation: proto.String("old group talk")}}},
		}},
	}}
	history.Unlock()
	notification := func(r *rig) *events.Message {
		m := r.message("3AHISTORY", &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
			Type:                    waE2E.ProtocolMessage_HISTORY_SYNC_NOTIFICATION.Enum(),
			HistorySyncNotification: &waE2E.HistorySyncNotification{DirectPath: proto.String("/v/history")}}})
		m.Info.IsFromMe, m.Info.Chat, m.Info.Sender = true, r.me.pn(), r.me.pn()
		return m
	}

	off := newRig(t, sqlite(t), true)
	off.emit(notification(off))
	off.emit(off.message("after", &waE2E.Message{Conversation: proto.String("after")}))
	off.inbound("after")
	for _, c := range off.sink.all() {
		if c.kind == "inbound" && c.in.ProviderID != "after" {
			t.Errorf("without the opt-in, %s of the history was reported", c.in.ProviderID)
		}
	}

	on := newRigConfig(t, sqlite(t), true, map[string]any{"history_sync": true})
	on.emit(notification(on))
	old := on.inbound("3AOLD1")
	if old.Text != "an old message" || old.Chat != "+4915112345678" || old.From.Address != "+4915112345678" ||
		!old.At.Equal(time.Unix(1600000000, 0)) {
		t.Errorf("an old message: %+v", old)
	}
	if mine := on.inbound("3AOLD2"); !mine.FromMe || mine.From.Address != "+15550100001" {
		t.Errorf("the account's old message: %+v", mine)
	}
	if g := on.inbound("3AOLD3"); g.Chat != group.String() || g.From.Address != "+4915112345678" {
		t.Errorf("an old group message: %+v", g)
	}
	for _, c := range on.sink.all() {
		if c.kind == "inbound" && c.in.ProviderID == "3AHISTORY" {
			t.Error("the history sync notification itself was reported as a message")
		}
	}
}
