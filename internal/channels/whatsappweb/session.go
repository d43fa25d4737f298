//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
)

// How long WhatsApp's QR codes are shown: the first for a minute, each of the next for 20 seconds (the rotation
// WhatsApp Web uses; the server sends the codes in one batch and closes the pairing when the last expires).
// Variables only so that tests rotate faster.
var (
	firstQRTimeout = 60 * time.Second
	nextQRTimeout  = 20 * time.Second
)

// session is one connection of a linked device.
type session struct {
	p          *Provider
	inst       channels.Instance
	sink       channels.Sink
	jid        types.JID // the device the instance paired, empty before the first pairing
	deviceName string
	history    bool // the instance opted in to the phone's history sync

	mu  sync.Mutex
	dev *store.Device
	c   Client
	// run is Run's context: reports are made under it, and none once it ended (the runtime let go).
	run context.Context
	// end carries why the connection ended: nil for an end for good (reported through the sink), an error for a
	// loss the runtime retries.
	end chan error
	// qr is the rotation of the QR codes of the current batch; shown says codes were shown.
	qr    *time.Timer
	shown bool
	// watched are the people whose presence this connection asked WhatsApp for (by JID without device).
	watched map[string]bool
}

// Run connects the device and keeps the connection until ctx ends or WhatsApp ends it.
func (s *session) Run(ctx context.Context) error {
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each session start deletes the devices of instances deleted while their sessions were not live.
	if _, err := s.p.devices.Sweep(run); err != nil {
		return err
	}
	dev, err := s.p.devices.Device(run, s.jid)
	if err != nil {
		return err
	}
	c := s.p.newClient(dev)
	if pc, ok := c.(proxied); ok && s.inst.Via != nil {
		pc.UseProxy(s.inst.Via)
	}
	s.mu.Lock()
	s.dev, s.c, s.run, s.end = dev, c, run, make(chan error, 1)
	s.mu.Unlock()
	c.AddEventHandler(s.handle)
	defer func() {
		s.mu.Lock()
		if s.qr != nil {
			s.qr.Stop()
		}
		s.mu.Unlock()
		c.Disconnect()
	}()
	if dev.ID == nil {
		if err := s.sink.State(run, channels.StatusConnecting, "connecting to WhatsApp to pair a new linked device"); err != nil {
			return err
		}
	}
	if err := c.Connect(run); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &channels.Failure{Code: "server_unreachable", Detail: "connecting to WhatsApp: " + err.Error(), Retryable: true}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.end:
		return err
	}
}

// finish ends Run: nil for good (the sink was told why), an error for a loss the runtime retries.
func (s *session) finish(err error) {
	select {
	case s.end <- err:
	default:
	}
}

// live is the context of reports, or nil once Run ended.
func (s *session) live() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.Err() != nil {
		return nil
	}
	return s.run
}

// report runs a sink call under Run's context; a sink that fails ends the connection (the runtime opens it again,
// and WhatsApp hands over again what was not acknowledged).
func (s *session) report(call func(ctx context.Context) error) {
	ctx := s.live()
	if ctx == nil {
		return
	}
	if err := call(ctx); err != nil && ctx.Err() == nil {
		s.finish(fmt.Errorf("recording what WhatsApp reported: %w", err))
	}
}

// handle maps whatsmeow's events to the sink.
func (s *session) handle(evt any) {
	if s.live() == nil {
		return
	}
	switch e := evt.(type) {
	case *events.QR:
		s.showQR(e.Codes, 0)
	case *events.PairSuccess:
		s.stopQR()
		s.report(func(ctx context.Context) error {
			return s.sink.State(ctx, channels.StatusConnecting, "paired; connecting as the linked device")
		})
	case *events.PairError:
		s.stopQR()
		s.endForGood(channels.StatusFailed, "auth_failed: pairing failed: "+e.Error.Error())
	case *events.Connected:
		s.connected()
	case *events.LoggedOut:
		s.loggedOut(e)
	case *events.StreamReplaced:
		s.endForGood(channels.StatusFailed, "conflict: another client connected with this linked device's session; "+
			"connect the instance again to take it back")
	case *events.TemporaryBan:
		reason := "WhatsApp temporarily banned the account (" + e.Code.String() + ")"
		if e.Expire > 0 {
			// The runtime shows the instance restricted and connects again when the ban ends: trying earlier
			// would only prolong it.
			s.finish(&channels.Restriction{Until: time.Now().Add(e.Expire), Reason: reason})
			return
		}
		s.endForGood(channels.StatusFailed, "restricted: "+reason+"; it gave no end, so connect the instance again later")
	case *events.ClientOutdated:
		s.endForGood(channels.StatusFailed, "client_outdated: WhatsApp refuses this client version; the server's "+
			"whatsmeow must be updated")
	case *events.ConnectFailure:
		if e.Reason.IsLoggedOut() {
			s.loggedOut(&events.LoggedOut{OnConnect: true, Reason: e.Reason})
			return
		}
		s.finish(&channels.Failure{Code: "stream_error", Detail: "WhatsApp refused the connection: " + e.Reason.String(),
			Retryable: true})
	case *events.StreamError:
		s.finish(&channels.Failure{Code: "stream_error", Detail: "WhatsApp ended the stream with code " + e.Code,
			Retryable: true})
	case *events.Disconnected:
		if s.pairing() {
			// WhatsApp closes the connection of a device nobody paired once its last QR code expired: a new batch
			// waits for the user to connect again, rather than codes rotating for nobody.
			s.stopQR()
			s.endForGood(channels.StatusDisconnected, "the QR code was not scanned in time; connect the instance again for a new one")
			return
		}
		s.finish(&channels.Failure{Code: "server_unreachable", Detail: "the connection to WhatsApp was lost",
			Retryable: true})
	case *events.KeepAliveTimeout:
		s.finish(&channels.Failure{Code: "server_unreachable", Detail: fmt.Sprintf(
			"WhatsApp stopped answering keep-alive pings (%d missed)", e.ErrorCount), Retryable: true})
	case *events.Message:
		s.message(e)
	case *events.Receipt:
		s.receipt(e)
	case *events.CallOffer:
		// A one-to-one call: its offer says video when the caller's camera is on.
		var video bool
		if e.Data != nil {
			_, video = e.Data.GetOptionalChildByTag("video")
		}
		s.call(e.BasicCallMeta, video, false)
	case *events.CallOfferNotice:
		s.call(e.BasicCallMeta, e.Media == "video", e.Type == "group")
	case *events.Archive:
		archived := e.Action.GetArchived()
		s.organized(e.JID, channels.ChatOrganization{Archived: &archived})
	case *events.Pin:
		pinned := e.Action.GetPinned()
		s.organized(e.JID, channels.ChatOrganization{Pinned: &pinned})
	case *events.Mute:
		muted := e.Action.GetMuted()
		o := channels.ChatOrganization{Muted: &muted}
		if end := e.Action.GetMuteEndTimestamp(); muted && end > 0 {
			o.MutedUntil = time.UnixMilli(end)
		}
		s.organized(e.JID, o)
	case *events.LabelEdit:
		s.labelEdit(e)
	case *events.LabelAssociationChat:
		s.labelAssociation(e)
	case *events.Presence:
		s.presence(e)
	case *events.ChatPresence:
		s.chatPresence(e)
	case *events.GroupInfo:
		s.groupInfo(e)
	case *events.JoinedGroup:
		s.joinedGroup(e)
	case *events.PushName:
		s.report(func(ctx context.Context) error {
			return s.sink.ContactChanged(ctx, s.party(ctx, e.JID, e.JIDAlt, e.NewPushName))
		})
	case *events.IdentityChange:
		// The person's security code changed (a new phone, a reinstall): their contact is refreshed, so that a
		// webhook consumer hears of it; the message history stays theirs.
		s.report(func(ctx context.Context) error {
			return s.sink.ContactChanged(ctx, s.party(ctx, e.JID, types.EmptyJID, ""))
		})
	}
}

// endForGood reports a state the session ends in for good and ends Run.
func (s *session) endForGood(st channels.Status, reason string) {
	s.report(func(ctx context.Context) error { return s.sink.State(ctx, st, reason) })
	s.finish(nil)
}

// showQR shows codes[i] and rotates to the next when it expires; after the last, pairing has timed out.
func (s *session) showQR(codes []string, i int) {
	s.mu.Lock()
	if s.qr != nil {
		s.qr.Stop()
		s.qr = nil
	}
	s.mu.Unlock()
	if i >= len(codes) {
		s.endForGood(channels.StatusDisconnected, "the QR code was not scanned in time; connect the instance again for a new one")
		return
	}
	timeout := nextQRTimeout
	if i == 0 {
		timeout = firstQRTimeout
	}
	s.report(func(ctx context.Context) error { return s.sink.QR(ctx, codes[i], time.Now().Add(timeout)) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shown = true
	if s.run != nil && s.run.Err() == nil {
		s.qr = time.AfterFunc(timeout, func() { s.showQR(codes, i+1) })
	}
}

// pairing reports whether the device is unpaired and QR codes were shown.
func (s *session) pairing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shown && s.dev != nil && s.dev.ID == nil
}

func (s *session) stopQR() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.qr != nil {
		s.qr.Stop()
		s.qr = nil
	}
}

// connected reports the account: its phone number, with its LID as another ID of it, and the device to restore.
func (s *session) connected() {
	pn, lid, name := s.c.Own()
	if pn.IsEmpty() {
		s.finish(errors.New("WhatsApp reported a connection of a device without an ID"))
		return
	}
	creds, err := json.Marshal(credentials{JID: pn.String()})
	if err != nil {
		s.finish(err)
		return
	}
	if ctx := s.live(); ctx != nil {
		if err := s.p.devices.Bind(ctx, s.inst.ID, pn); err != nil {
			s.finish(err)
			return
		}
	}
	account := channels.Party{Address: "+" + pn.User, DisplayName: name}
	if !lid.IsEmpty() {
		account.IDs = []string{lid.User + "@" + types.HiddenUserServer}
	}
	s.report(func(ctx context.Context) error { return s.sink.Connected(ctx, account, creds) })
	if c, err := s.client(); err == nil {
		if ctx := s.live(); ctx != nil {
			go s.syncGroups(ctx, c)
		}
	}
}

// loggedOut wipes the device and reports the instance logged out with WhatsApp's reason.
func (s *session) loggedOut(e *events.LoggedOut) {
	reason := "the phone removed this linked device"
	if e.OnConnect {
		reason = "WhatsApp refused the linked device: " + e.Reason.String()
	}
	if ctx := s.live(); ctx != nil {
		if err := s.p.devices.Wipe(ctx, s.dev); err != nil {
			s.finish(err)
			return
		}
	}
	s.endForGood(channels.StatusLoggedOut, reason)
}

// Logout unlinks the device on WhatsApp (best effort offline) and deletes its rows.
func (s *session) Logout(ctx context.Context) error {
	s.mu.Lock()
	c, dev := s.c, s.dev
	s.mu.Unlock()
	if dev == nil {
		var err error
		if dev, err = s.p.devices.Device(ctx, s.jid); err != nil {
			return err
		}
	}
	var lerr error
	if c != nil && dev.ID != nil {
		lerr = c.Logout(ctx)
	}
	// whatsmeow deletes the device after WhatsApp confirmed; offline it stays, and goes here.
	if err := s.p.devices.Wipe(ctx, dev); err != nil {
		return err
	}
	if lerr != nil {
		return &channels.Failure{Code: "network_error", Detail: "WhatsApp was not told of the logout: " + lerr.Error(),
			Retryable: true}
	}
	return nil
}

// client is the connected client, or a not_connected failure.
func (s *session) client() (Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil || s.dev == nil || s.dev.ID == nil {
		return nil, &channels.Failure{Code: "not_connected", Detail: "the linked device is not connected", Retryable: true}
	}
	return s.c, nil
}

// target is the connected client and the JID of a chat's address: the opening of every call on a chat.
func (s *session) target(chat string) (Client, types.JID, error) {
	c, err := s.client()
	if err != nil {
		return nil, types.EmptyJID, err
	}
	j, err := jidOf(chat)
	if err != nil {
		return nil, types.EmptyJID, err
	}
	return c, j, nil
}

// party is a person as the instance shows them: their phone number when WhatsApp shares it (from alt, or its
// mapping of the LID), with their LID as another ID, so that both addresses are one contact.
func (s *session) party(ctx context.Context, jid, alt types.JID, name string) channels.Party {
	pn, lid := split(jid, alt)
	if pn.IsEmpty() && !lid.IsEmpty() && s.c != nil {
		if found, err := s.c.PNForLID(ctx, lid); err == nil {
			pn = found
		}
	}
	p := channels.Party{DisplayName: name}
	switch {
	case !pn.IsEmpty():
		p.Address = "+" + pn.User
		if !lid.IsEmpty() {
			p.IDs = []string{lid.User + "@" + types.HiddenUserServer}
		}
	case !lid.IsEmpty():
		p.Address = lid.User + "@" + types.HiddenUserServer
	default:
		p.Address = jid.ToNonAD().String()
	}
	return p
}

// split sorts a JID and its alternative into the phone-number JID and the LID (either may be empty).
func split(jid, alt types.JID) (pn, lid types.JID) {
	for _, j := range []types.JID{jid, alt} {
		switch j.Server {
		case types.DefaultUserServer:
			if pn.IsEmpty() {
				pn = j.ToNonAD()
			}
		case types.HiddenUserServer:
			if lid.IsEmpty() {
				lid = j.ToNonAD()
			}
		}
	}
	return pn, lid
}

// PairingCode asks WhatsApp for a code to type into the phone of number phone, as an alternative to the QR code.
func (s *session) PairingCode(ctx context.Context, number string) (string, error) {
	s.mu.Lock()
	c, dev := s.c, s.dev
	s.mu.Unlock()
	if c == nil {
		return "", &channels.Failure{Code: "not_connected", Detail: "the session is still connecting to WhatsApp", Retryable: true}
	}
	if dev.ID != nil {
		return "", &channels.Failure{Code: "conflict", Detail: "the instance is paired already"}
	}
	norm, err := s.p.NormalizeAddress(number)
	if err != nil || norm[0] != '+' {
		return "", &channels.Failure{Code: "invalid_address", Detail: fmt.Sprintf("%q is not a phone number", number)}
	}
	code, err := c.PairPhone(ctx, norm[1:], s.deviceName)
	if err != nil {
		return "", failureOf(err)
	}
	return code, nil
}
