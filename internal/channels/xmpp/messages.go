package xmpp

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/switchboard/switchboard/internal/channels"
)

// outMessage is a message this client sends. Each extension is set only when it applies.
type outMessage struct {
	XMLName  xml.Name `xml:"message"`
	ID       string   `xml:"id,attr"`
	To       string   `xml:"to,attr"`
	Type     string   `xml:"type,attr"`
	Body     string   `xml:"body,omitempty"`
	Subject  *string  `xml:"subject"`
	Request  *xmlNS   `xml:"request"`
	Received *xmlNSID `xml:"received"`
	Markable *xmlNS   `xml:"markable"`
	Marker   *xmlNSID `xml:"displayed"`
	// Composing and Paused are chat states (XEP-0085).
	Composing *xmlNS   `xml:"composing"`
	Paused    *xmlNS   `xml:"paused"`
	Replace   *xmlNSID `xml:"replace"`
	Retract   *xmlNSID `xml:"retract"`
	Reaction  *struct {
		XMLNS    string   `xml:"xmlns,attr"`
		ID       string   `xml:"id,attr"`
		Reaction []string `xml:"reaction"`
	} `xml:"reactions"`
	Reply *struct {
		XMLNS string `xml:"xmlns,attr"`
		ID    string `xml:"id,attr"`
		To    string `xml:"to,attr,omitempty"`
	} `xml:"reply"`
	Fallback *struct {
		XMLNS string `xml:"xmlns,attr"`
		For   string `xml:"for,attr"`
	} `xml:"fallback"`
	OOB *struct {
		XMLNS string `xml:"xmlns,attr"`
		URL   string `xml:"url"`
		Desc  string `xml:"desc,omitempty"`
	} `xml:"x"`
	Store *xmlNS `xml:"store"`
}

type xmlNS struct {
	XMLNS string `xml:"xmlns,attr"`
}

type xmlNSID struct {
	XMLNS string `xml:"xmlns,attr"`
	ID    string `xml:"id,attr"`
}

// Send implements channels.Sender. The stanza's id is the message's id, so a resend after an unknown outcome
// carries the same id (receipts and markers refer to it; clients that deduplicate by id show it once).
func (s *session) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	xs, err := s.conn()
	if err != nil {
		return channels.Sent{}, err
	}
	to, err := jid.Parse(m.Chat)
	if err != nil || to.Domainpart() == "" {
		return channels.Sent{}, refusal("invalid_address", "%q is not an XMPP address", m.Chat)
	}
	to = to.Bare()
	out := outMessage{ID: m.MessageID, To: to.String(), Type: "chat"}
	group := s.isRoom(to)
	if group {
		out.Type = "groupchat"
	}
	switch m.Type {
	case channels.TypeText, "":
		out.Body = m.Text
	case channels.TypeMedia:
		if m.Media == nil {
			return channels.Sent{}, refusal("media_rejected", "the message has no media")
		}
		url, err := s.upload(ctx, xs, m.Media)
		if err != nil {
			return channels.Sent{}, err
		}
		// The body is the URL alone, as XEP-0363 asks, so clients show the file inline; the caption travels in
		// the out-of-band data's description.
		out.Body = url
		out.OOB = &struct {
			XMLNS string `xml:"xmlns,attr"`
			URL   string `xml:"url"`
			Desc  string `xml:"desc,omitempty"`
		}{XMLNS: nsOOB, URL: url, Desc: m.Media.Caption}
	case channels.TypeLocation:
		if m.Location == nil {
			return channels.Sent{}, refusal("invalid_message", "the message has no location")
		}
		// A geo URI (RFC 5870), which XMPP clients show as a map link.
		out.Body = "geo:" + strconv.FormatFloat(m.Location.Latitude, 'f', -1, 64) + "," +
			strconv.FormatFloat(m.Location.Longitude, 'f', -1, 64)
	case channels.TypeReaction:
		out.Reaction = &struct {
			XMLNS    string   `xml:"xmlns,attr"`
			ID       string   `xml:"id,attr"`
			Reaction []string `xml:"reaction"`
		}{XMLNS: nsReactions, ID: m.Target}
		if m.Emoji != "" {
			out.Reaction.Reaction = []string{m.Emoji}
		}
		out.Store = &xmlNS{nsHints}
	case channels.TypeEdit:
		out.Body = m.Text
		out.Replace = &xmlNSID{nsCorrect, m.Target}
	case channels.TypeDelete:
		out.Retract = &xmlNSID{nsRetract, m.Target}
		out.Body = "This person attempted to retract a previous message, but it's unsupported by your client."
		out.Fallback = &struct {
			XMLNS string `xml:"xmlns,attr"`
			For   string `xml:"for,attr"`
		}{nsFallback, nsRetract}
		out.Store = &xmlNS{nsHints}
	default:
		return channels.Sent{}, refusal("capability_not_supported", "XMPP has no %s messages", m.Type)
	}
	if m.ReplyTo != "" {
		out.Reply = &struct {
			XMLNS string `xml:"xmlns,attr"`
			ID    string `xml:"id,attr"`
			To    string `xml:"to,attr,omitempty"`
		}{XMLNS: nsReply, ID: m.ReplyTo}
	}
	if out.Body != "" && m.Type != channels.TypeDelete {
		if !group {
			out.Request = &xmlNS{nsReceipts}
		}
		out.Markable = &xmlNS{nsMarkers}
	}
	if err := s.sendAcked(ctx, xs, tokens(out)); err != nil {
		return channels.Sent{}, &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	// Servers route a repeated stanza like any other; only clients that deduplicate by its id show it once.
	return channels.Sent{ProviderID: m.MessageID, At: time.Now().UTC(), PossibleRepeat: m.MayRepeat()}, nil
}

// sendAcked sends a stanza and, with stream management on, asks the server for an acknowledgement right behind it
// and waits for the answer: the server handles a stream in order, so its answer to that request means it took the
// stanza, and `sent` means the server has the message, not only the socket. Without stream management it returns
// once the stanza is written. A timeout is an error: the message is sent again, with the same id.
func (s *session) sendAcked(ctx context.Context, xs *xmpp.Session, stanza xml.TokenReader) error {
	s.sm.sendMu.Lock()
	if err := xs.Send(ctx, stanza); err != nil {
		s.sm.sendMu.Unlock()
		return err
	}
	if !s.sm.on.Load() {
		s.sm.sendMu.Unlock()
		return nil
	}
	acked := make(chan struct{})
	s.sm.mu.Lock()
	s.sm.waiting = append(s.sm.waiting, acked)
	s.sm.mu.Unlock()
	err := xs.Send(ctx, tokens(struct {
		XMLName xml.Name `xml:"urn:xmpp:sm:3 r"`
	}{}))
	s.sm.sendMu.Unlock()
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, s.p.opts.PingTimeout)
	defer cancel()
	select {
	case <-acked:
		return nil
	case <-wait.Done():
		return errors.New("the server did not acknowledge the message")
	}
}

// MarkRead implements channels.ReadMarker: a displayed chat marker (XEP-0333) for the newest message read.
func (s *session) MarkRead(ctx context.Context, chat, upTo string) error {
	xs, err := s.conn()
	if err != nil {
		return err
	}
	m, err := s.toChat(chat)
	if err != nil {
		return err
	}
	m.Marker = &xmlNSID{nsMarkers, upTo}
	return xs.Send(ctx, tokens(m))
}

// toChat is a message without content to a chat: to the person, or to the room as a groupchat message.
func (s *session) toChat(chat string) (outMessage, error) {
	to, err := jid.Parse(chat)
	if err != nil {
		return outMessage{}, refusal("invalid_address", "%q is not an XMPP address", chat)
	}
	m := outMessage{ID: newID(), To: to.Bare().String(), Type: "chat"}
	if s.isRoom(to.Bare()) {
		m.Type = "groupchat"
	}
	return m, nil
}

// upload puts the media on the server's HTTP File Upload service and returns the URL to fetch it from.
func (s *session) upload(ctx context.Context, xs interface {
	UnmarshalIQElement(context.Context, xml.TokenReader, stanza.IQ, any) error
}, media *channels.Media) (string, error) {
	s.mu.Lock()
	svc, max := s.features.upload, s.features.uploadMax
	s.mu.Unlock()
	if svc.Equal(jid.JID{}) {
		return "", refusal("capability_not_supported", "the server offers no HTTP File Upload service")
	}
	if media.URL != "" && media.Open == nil {
		return "", refusal("media_rejected", "XMPP media is uploaded to the server: the message needs the file, not only a URL")
	}
	if max > 0 && media.Size > max {
		return "", refusal("media_rejected", "the file is %d bytes; the server takes at most %d", media.Size, max)
	}
	name := media.Filename
	if name == "" {
		name = "file"
		if exts, _ := mime.ExtensionsByType(media.MIMEType); len(exts) > 0 {
			name += exts[0]
		}
	}
	var slot struct {
		Put struct {
			URL    string `xml:"url,attr"`
			Header []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:",chardata"`
			} `xml:"header"`
		} `xml:"put"`
		Get struct {
			URL string `xml:"url,attr"`
		} `xml:"get"`
	}
	req := struct {
		XMLName     xml.Name `xml:"urn:xmpp:http:upload:0 request"`
		Filename    string   `xml:"filename,attr"`
		Size        int64    `xml:"size,attr"`
		ContentType string   `xml:"content-type,attr,omitempty"`
	}{Filename: path.Base(name), Size: media.Size, ContentType: media.MIMEType}
	if err := xs.UnmarshalIQElement(ctx, tokens(req), stanza.IQ{Type: stanza.GetIQ, To: svc}, &slot); err != nil {
		var se stanza.Error
		if errors.As(err, &se) {
			return "", refusal("media_rejected", "the upload service refused the file: %s", se.Condition)
		}
		return "", &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	body, err := media.Open(ctx)
	if err != nil {
		return "", err
	}
	defer body.Close()
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, slot.Put.URL, body)
	if err != nil {
		return "", refusal("media_rejected", "the upload service gave an unusable URL")
	}
	put.ContentLength = media.Size
	if media.MIMEType != "" {
		put.Header.Set("Content-Type", media.MIMEType)
	}
	for _, h := range slot.Put.Header {
		// XEP-0363 allows these three only; anything else a server sends is dropped.
		switch http.CanonicalHeaderKey(h.Name) {
		case "Authorization", "Cookie", "Expires":
			put.Header.Set(h.Name, strings.TrimSpace(h.Value))
		}
	}
	resp, err := s.inst.Client(s.p.opts.HTTP).Do(put)
	if err != nil {
		return "", &channels.Failure{Code: "network_error", Detail: "uploading the file: " + err.Error(), Retryable: true}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", &channels.Failure{Code: "media_rejected", Detail: fmt.Sprintf("the upload service answered %d", resp.StatusCode), Retryable: resp.StatusCode >= 500}
	}
	return slot.Get.URL, nil
}

// onMessage handles an incoming message: receipts and markers of ours, group subjects and invitations, and messages
// for the sink. Receipts the sender asked for are sent only after the sink took the message, so a receipt always
// means "stored".
func (s *session) onMessage(ctx context.Context, t xmlstream.TokenReadEncoder, m inMessage) error {
	own := s.cfg.JID.Bare()
	from := own // mellium clears a from that is the account's own address
	if m.From != "" {
		f, err := jid.Parse(m.From)
		if err != nil {
			return nil
		}
		from = f
	}
	if m.Type == "error" {
		// A refusal of a message sent earlier (no such account, blocked, …). The seams have no way to report a sent
		// message failed after the fact, so it is logged; its status stays sent and never becomes delivered.
		cond := "undefined-condition"
		if m.Error != nil && len(m.Error.Cond) > 0 {
			cond = m.Error.Cond[0].XMLName.Local
		}
		s.logf("the network refused a sent message", "provider_message_id", m.ID, "condition", cond)
		return nil
	}
	bare := from.Bare()
	if (m.CarbonSent != nil || m.CarbonReceived != nil) && m.Body == nil {
		if !bare.Equal(own) {
			return nil // only the account's own server speaks for its other clients
		}
		return s.onCarbon(ctx, m)
	}
	var receipts []channels.Receipt
	if m.Received != nil && m.Received.ID != "" {
		receipts = append(receipts, channels.Receipt{ProviderID: m.Received.ID, Status: "delivered", At: m.at()})
	}
	if m.MarkerRcv != nil && m.MarkerRcv.ID != "" {
		receipts = append(receipts, channels.Receipt{ProviderID: m.MarkerRcv.ID, Status: "delivered", At: m.at()})
	}
	if m.Displayed != nil && m.Displayed.ID != "" && (m.Type != "groupchat" || !s.fromSelf(bare, from.Resourcepart())) {
		receipts = append(receipts, channels.Receipt{ProviderID: m.Displayed.ID, Status: "read", At: m.at()})
	}
	for _, r := range receipts {
		if err := s.sink.Receipt(ctx, r); err != nil {
			return err
		}
	}
	if m.MUCUser != nil && m.MUCUser.Invite != nil {
		s.onInvite(ctx, bare, m.MUCUser.Invite.From)
		return nil
	}
	if m.Conference != nil {
		s.onInvite(ctx, jid.MustParse(m.Conference.JID).Bare(), m.From)
		return nil
	}
	if m.Body == nil && (m.Composing != nil || m.Paused != nil) {
		return s.onChatState(ctx, m, from)
	}
	in, ok := s.inbound(m, from)
	if m.Type == "groupchat" && m.Subject != nil && m.Body == nil {
		s.onSubject(ctx, bare, *m.Subject)
		return nil
	}
	if !ok {
		return nil
	}
	if err := s.sink.Inbound(ctx, in); err != nil {
		return err // not acknowledged: the server delivers it again, and the sender gets no receipt meanwhile
	}
	if m.Type != "groupchat" && m.ID != "" {
		ack := outMessage{ID: newID(), To: from.String(), Type: m.Type}
		if m.Request != nil {
			ack.Received = &xmlNSID{nsReceipts, m.ID}
		}
		if ack.Received != nil {
			return t.Encode(ack)
		}
	}
	return nil
}

// onChatState reports a chat state (XEP-0085) a person shows the account: typing (composing) or stopped (paused);
// in a room, an occupant's, and never the account's own.
func (s *session) onChatState(ctx context.Context, m inMessage, from jid.JID) error {
	bare := from.Bare()
	p := channels.Presence{From: channels.Party{Address: bare.String(), DisplayName: s.displayName(bare.String())},
		Chat: bare.String(), State: channels.StateTyping}
	if m.Paused != nil {
		p.State = channels.StatePaused
	}
	if m.Type == "groupchat" {
		if from.Resourcepart() == "" || s.fromSelf(bare, from.Resourcepart()) {
			return nil
		}
		p.From = s.occupant(bare, from.Resourcepart())
	}
	if err := s.sink.Presence(ctx, p); err != nil {
		s.logf("chat state not stored", "error", err)
	}
	return nil
}

// SendChatState shows a chat that the account is composing or paused (XEP-0085). XMPP has no state for recording:
// a voice message is composed like text.
func (s *session) SendChatState(ctx context.Context, chat, state string) error {
	xs, err := s.conn()
	if err != nil {
		return err
	}
	m, err := s.toChat(chat)
	if err != nil {
		return err
	}
	if state == channels.StatePaused {
		m.Paused = &xmlNS{nsChatStates}
	} else {
		m.Composing = &xmlNS{nsChatStates}
	}
	return xs.Send(ctx, tokens(m))
}

// onCarbon reports what the account's other clients sent (FromMe) and received. Receipts and markers are theirs to
// send; receipts of the account's messages count whichever client they reach.
func (s *session) onCarbon(ctx context.Context, m inMessage) error {
	sent := m.CarbonSent != nil
	c := m.CarbonReceived
	if sent {
		c = m.CarbonSent
	}
	if c.Forwarded.Message == nil || c.Forwarded.Message.Type == "groupchat" {
		return nil // rooms send every occupant's copy themselves
	}
	fwd := *c.Forwarded.Message
	if fwd.Received != nil && fwd.Received.ID != "" && !sent {
		if err := s.sink.Receipt(ctx, channels.Receipt{ProviderID: fwd.Received.ID, Status: "delivered", At: fwd.at()}); err != nil {
			return err
		}
	}
	if fwd.Displayed != nil && fwd.Displayed.ID != "" && !sent {
		if err := s.sink.Receipt(ctx, channels.Receipt{ProviderID: fwd.Displayed.ID, Status: "read", At: fwd.at()}); err != nil {
			return err
		}
	}
	peerAddr := fwd.From
	if sent {
		peerAddr = fwd.To
	}
	peer, err := jid.Parse(peerAddr)
	if err != nil {
		return nil
	}
	from := peer
	if sent {
		from = s.cfg.JID.Bare()
	}
	in, ok := s.inbound(fwd, from)
	if !ok {
		return nil
	}
	if sent {
		in.FromMe = true
		in.Chat = peer.Bare().String()
	}
	return s.sink.Inbound(ctx, in)
}

// inbound maps a message onto the sink's shape; false for messages that carry nothing for it (our own echoes from a
// room, bare markers, chat states).
func (s *session) inbound(m inMessage, from jid.JID) (channels.Inbound, bool) {
	bare := from.Bare()
	in := channels.Inbound{ProviderID: m.ID, Chat: bare.String(), At: m.at(), Type: channels.TypeText,
		From: channels.Party{Address: bare.String()}}
	if m.Type == "groupchat" {
		if from.Resourcepart() == "" || s.fromSelf(bare, from.Resourcepart()) {
			return in, false
		}
		in.From = s.occupant(bare, from.Resourcepart())
		s.mu.Lock()
		if in.At.After(s.lastSeen[bare.String()]) {
			s.lastSeen[bare.String()] = in.At
		}
		s.mu.Unlock()
	} else if s.inRoom(bare) && from.Resourcepart() != "" {
		// A private message from an occupant: from the person when the room shows who they are (the chat is then
		// theirs, and a reply goes to their account), else from their address in the room.
		in.From = s.occupant(bare, from.Resourcepart())
		in.Chat = in.From.Address
	} else {
		in.From.DisplayName = s.displayName(bare.String())
	}
	if in.ProviderID == "" {
		in.ProviderID = newID()
	}
	switch {
	case m.Retract != nil:
		in.Type, in.Target = channels.TypeDelete, m.Retract.ID
	case m.Reactions != nil:
		in.Type, in.Target = channels.TypeReaction, m.Reactions.ID
		if len(m.Reactions.Reaction) > 0 {
			in.Emoji = m.Reactions.Reaction[len(m.Reactions.Reaction)-1]
		}
	case m.Body == nil:
		return in, false
	case m.Replace != nil:
		in.Type, in.Target, in.Text = channels.TypeEdit, m.Replace.ID, *m.Body
	case m.OOB != nil && m.OOB.URL != "":
		in.Type = channels.TypeMedia
		in.Media = mediaOf(m.OOB.URL, m.OOB.Desc)
	default:
		in.Text = *m.Body
		if lat, lon, ok := geoURI(in.Text); ok {
			in.Type, in.Text = channels.TypeLocation, ""
			in.Location = &channels.Location{Latitude: lat, Longitude: lon}
		}
	}
	if m.Reply != nil {
		in.ReplyTo = m.Reply.ID
	}
	return in, true
}

// mediaOf describes a file shared by URL, its type guessed from the name (the sink downloads it).
func mediaOf(url, caption string) *channels.Media {
	name := path.Base(strings.SplitN(url, "?", 2)[0])
	typ := mime.TypeByExtension(path.Ext(name))
	if i := strings.IndexByte(typ, ';'); i >= 0 {
		typ = typ[:i]
	}
	kind := "document"
	switch {
	case strings.HasPrefix(typ, "image/"):
		kind = "image"
	case strings.HasPrefix(typ, "video/"):
		kind = "video"
	case strings.HasPrefix(typ, "audio/"):
		kind = "audio"
	}
	return &channels.Media{Kind: kind, MIMEType: typ, Filename: name, URL: url, Caption: caption}
}

// geoURI reads "geo:lat,lon" (RFC 5870), the form a shared location takes in XMPP chats.
func geoURI(s string) (float64, float64, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "geo:")
	if !ok {
		return 0, 0, false
	}
	rest, _, _ = strings.Cut(rest, ";")
	a, b, ok := strings.Cut(rest, ",")
	if !ok {
		return 0, 0, false
	}
	b, _, _ = strings.Cut(b, ",") // an altitude
	lat, err1 := strconv.ParseFloat(a, 64)
	lon, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || !(lat >= -90 && lat <= 90) || !(lon >= -180 && lon <= 180) { // NaN too
		return 0, 0, false
	}
	return lat, lon, true
}
