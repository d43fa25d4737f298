//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/appstate"
	waAdv "go.mau.fi/whatsmeow/proto/waAdv"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	waHistorySync "go.mau.fi/whatsmeow/proto/waHistorySync"
	waWeb "go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"
)

// network is a fake of WhatsApp's servers for the provider's Client seam: accounts with phone numbers and LIDs,
// devices that pair by QR (the account's phone scans the next code shown), messages between accounts (a message
// to an offline device waits for it), receipts, and the devices' rows written through whatsmeow's real store.
type network struct {
	mu       sync.Mutex
	accounts map[string]*account // by phone digits
	byLID    map[string]*account
	groups   map[string]*fakeGroup // by the group JID's user part
	// scanning are accounts whose phones scan the next QR code an unpaired device shows, in order.
	scanning []*account
	next     int
	// offline makes Connect fail, as when WhatsApp cannot be reached.
	offline bool
	// waiting is the last unpaired device that showed a QR code no phone was due to scan.
	waiting *fakeClient
	// presences are the chat states, availabilities and presence subscriptions devices sent, in order, as
	// "<from> <what> <to>".
	presences []string
}

func newNetwork() *network {
	return &network{accounts: map[string]*account{}, byLID: map[string]*account{}, groups: map[string]*fakeGroup{}}
}

// account is a WhatsApp account: its linked devices (the device JIDs WhatsApp accepts), the client connected as
// one of them, what waits for it, and what it received.
type account struct {
	phone, lid, name string
	devices          map[string]bool
	client           *fakeClient
	queue            []any
	received         []received
	loseAnswer       bool
	// picture is the account's profile picture (none: nil), pictureID WhatsApp's ID of it.
	picture   []byte
	pictureID string
	// about is the account's about text.
	about string
}

type received struct {
	id   types.MessageID
	from string
	msg  *waE2E.Message
}

func (n *network) add(phone, name string) *account {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	a := &account{phone: phone, lid: fmt.Sprintf("%d", 200000000000000+n.next), name: name, devices: map[string]bool{}}
	n.accounts[phone] = a
	n.byLID[a.lid] = a
	return a
}

func (a *account) pn() types.JID  { return types.NewJID(a.phone, types.DefaultUserServer) }
func (a *account) jid() types.JID { return types.NewJID(a.lid, types.HiddenUserServer) }

// deliver hands an event to the account's connected device, or queues it until one connects.
func (n *network) deliver(a *account, evt any) {
	n.mu.Lock()
	c := a.client
	if c == nil {
		a.queue = append(a.queue, evt)
	}
	n.mu.Unlock()
	if c != nil {
		c.emit(evt)
	}
}

// NewClient is the fake's Client of a device.
func (n *network) NewClient(dev *store.Device) Client { return &fakeClient{n: n, dev: dev} }

type fakeClient struct {
	n   *network
	dev *store.Device

	mu        sync.Mutex
	handlers  []func(any)
	connected bool
	acct      *account
}

func (c *fakeClient) emit(evt any) {
	c.mu.Lock()
	hs := append([]func(any){}, c.handlers...)
	c.mu.Unlock()
	for _, h := range hs {
		h(evt)
	}
}

func (c *fakeClient) AddEventHandler(h func(any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers = append(c.handlers, h)
}

var errUnreachable = errors.New("dial tcp: lookup web.whatsapp.com: no such host")

func (c *fakeClient) Connect(ctx context.Context) error {
	n := c.n
	n.mu.Lock()
	if n.offline {
		n.mu.Unlock()
		return errUnreachable
	}
	if c.dev.ID == nil {
		var a *account
		if len(n.scanning) > 0 {
			a, n.scanning = n.scanning[0], n.scanning[1:]
		}
		n.next++
		code := fmt.Sprintf("2@fake-qr-%d", n.next)
		if a == nil {
			n.waiting = c
		}
		n.mu.Unlock()
		c.emit(&events.QR{Codes: []string{code, code + "-b"}})
		if a != nil {
			return c.pair(ctx, a)
		}
		return nil
	}
	a := n.accounts[c.dev.ID.User]
	if a == nil || !a.devices[c.dev.ID.String()] {
		n.mu.Unlock()
		c.emit(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
		return nil
	}
	n.mu.Unlock()
	c.online(a)
	return nil
}

// pair is the phone of a scanning the code: WhatsApp links the device, whatsmeow saves it, and it connects.
func (c *fakeClient) pair(ctx context.Context, a *account) error {
	n := c.n
	n.mu.Lock()
	n.next++
	jid := types.JID{User: a.phone, Server: types.DefaultUserServer, Device: uint16(n.next % 90)}
	a.devices[jid.String()] = true
	n.mu.Unlock()
	c.dev.ID, c.dev.LID, c.dev.PushName = &jid, a.jid(), a.name
	// What the phone signs for the device at pairing (whatsmeow keeps it with the device's keys).
	c.dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("details of " + jid.String()),
		AccountSignatureKey: make([]byte, 32), AccountSignature: make([]byte, 64), DeviceSignature: make([]byte, 64)}
	if err := c.dev.Save(ctx); err != nil {
		return err
	}
	c.emit(&events.PairSuccess{ID: jid, LID: a.jid(), Platform: "android"})
	c.online(a)
	return nil
}

func (c *fakeClient) online(a *account) {
	n := c.n
	n.mu.Lock()
	a.client = c
	queue := a.queue
	a.queue = nil
	n.mu.Unlock()
	c.mu.Lock()
	c.connected, c.acct = true, a
	c.mu.Unlock()
	c.emit(&events.Connected{})
	for _, evt := range queue {
		c.emit(evt)
	}
}

func (c *fakeClient) Disconnect() {
	c.mu.Lock()
	a := c.acct
	c.connected, c.acct = false, nil
	c.mu.Unlock()
	if a != nil {
		c.n.mu.Lock()
		if a.client == c {
			a.client = nil
		}
		c.n.mu.Unlock()
	}
}

func (c *fakeClient) Logout(ctx context.Context) error {
	c.mu.Lock()
	a := c.acct
	c.mu.Unlock()
	if a == nil {
		return whatsmeow.ErrNotConnected
	}
	c.n.mu.Lock()
	delete(a.devices, c.dev.ID.String())
	c.n.mu.Unlock()
	c.Disconnect()
	// whatsmeow deletes the device once WhatsApp confirmed the logout.
	return c.dev.Delete(ctx)
}

func (c *fakeClient) PairPhone(_ context.Context, phone, name string) (string, error) {
	if name != DefaultDeviceName && !deviceName.MatchString(name) {
		return "", fmt.Errorf("bad display name %q", name)
	}
	return "ABCD-" + phone[len(phone)-4:], nil
}

func (c *fakeClient) Own() (types.JID, types.JID, string) {
	return c.dev.GetJID(), c.dev.GetLID(), c.dev.PushName
}

func (c *fakeClient) PNForLID(_ context.Context, lid types.JID) (types.JID, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if a := c.n.byLID[lid.User]; a != nil {
		return a.pn(), nil
	}
	return types.EmptyJID, nil
}

func (c *fakeClient) account() (*account, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected {
		return nil, whatsmeow.ErrNotConnected
	}
	return c.acct, nil
}

// SendMessage delivers to the recipient's account; its devices keep one copy per message ID, as WhatsApp's apps
// do.
func (c *fakeClient) SendMessage(_ context.Context, to types.JID, msg *waE2E.Message, id types.MessageID) (whatsmeow.SendResponse, error) {
	from, err := c.account()
	if err != nil {
		return whatsmeow.SendResponse{}, err
	}
	n := c.n
	n.mu.Lock()
	r := n.accounts[to.User]
	if to.Server == types.HiddenUserServer {
		r = n.byLID[to.User]
	}
	lose := from.loseAnswer
	from.loseAnswer = false
	if r == nil {
		n.mu.Unlock()
		return whatsmeow.SendResponse{}, &whatsmeow.IQError{Code: 404, Text: "item-not-found"}
	}
	dup := false
	for _, m := range r.received {
		dup = dup || m.id == id
	}
	if !dup {
		r.received = append(r.received, received{id: id, from: from.phone, msg: msg})
	}
	n.mu.Unlock()
	if lose {
		return whatsmeow.SendResponse{}, whatsmeow.ErrMessageTimedOut
	}
	return whatsmeow.SendResponse{ID: id, Timestamp: time.Now()}, nil
}

func (c *fakeClient) MarkRead(context.Context, []types.MessageID, time.Time, types.JID, types.JID) error {
	_, err := c.account()
	return err
}

func (c *fakeClient) Upload(_ context.Context, data []byte, _ whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	return whatsmeow.UploadResponse{URL: "https://mmg.example/x", DirectPath: "/v/x", MediaKey: []byte("k"),
		FileLength: uint64(len(data))}, nil
}

// media are the bytes of attachments the fake's media servers hold, by direct path.
var media = struct {
	sync.Mutex
	byPath map[string][]byte
}{byPath: map[string][]byte{}}

func (c *fakeClient) Download(_ context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	media.Lock()
	defer media.Unlock()
	b, ok := media.byPath[msg.GetDirectPath()]
	if !ok {
		return nil, errors.New("download failed with status code 404")
	}
	return b, nil
}

// fakeGroup is a group of the fake: its info and its invite code.
type fakeGroup struct {
	info   types.GroupInfo
	invite string
	// picture is the group's picture (none: nil), pictureID WhatsApp's ID of it.
	picture   []byte
	pictureID string
}

func (n *network) group(j types.JID) (*fakeGroup, error) {
	g := n.groups[j.User]
	if g == nil {
		return nil, whatsmeow.ErrGroupNotFound
	}
	return g, nil
}

func participant(a *account) types.GroupParticipant {
	return types.GroupParticipant{JID: a.jid(), LID: a.jid(), PhoneNumber: a.pn()}
}

// history is what the fake's phones offer as history sync, by the notification's direct path.
var history = struct {
	sync.Mutex
	byPath map[string]*waHistorySync.HistorySync
}{byPath: map[string]*waHistorySync.HistorySync{}}

func (c *fakeClient) DownloadHistorySync(_ context.Context, notif *waE2E.HistorySyncNotification) (*waHistorySync.HistorySync, error) {
	history.Lock()
	defer history.Unlock()
	h, ok := history.byPath[notif.GetDirectPath()]
	if !ok {
		return nil, errors.New("download failed with status code 404")
	}
	return h, nil
}

// ParseWebMessage is whatsmeow's parse for the cases of a chat with a person and a group.
func (c *fakeClient) ParseWebMessage(chat types.JID, m *waWeb.WebMessageInfo) (*events.Message, error) {
	info := types.MessageInfo{ID: m.GetKey().GetID(), PushName: m.GetPushName(),
		Timestamp:     time.Unix(int64(m.GetMessageTimestamp()), 0),
		MessageSource: types.MessageSource{Chat: chat, IsFromMe: m.GetKey().GetFromMe(), IsGroup: chat.Server == types.GroupServer}}
	switch {
	case info.IsFromMe:
		info.Sender = c.dev.GetJID().ToNonAD()
	case info.IsGroup:
		p, err := types.ParseJID(m.GetParticipant())
		if err != nil {
			return nil, err
		}
		info.Sender = p
	default:
		info.Sender = chat
	}
	return &events.Message{Info: info, Message: m.GetMessage(), SourceWebMsg: m}, nil
}

func (c *fakeClient) CreateGroup(_ context.Context, name string, who []types.JID) (*types.GroupInfo, error) {
	me, err := c.account()
	if err != nil {
		return nil, err
	}
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	owner := participant(me)
	owner.IsAdmin, owner.IsSuperAdmin = true, true
	g := &fakeGroup{info: types.GroupInfo{JID: types.NewJID(fmt.Sprintf("1203630%011d", n.next), types.GroupServer),
		GroupName: types.GroupName{Name: name}, GroupCreated: time.Now(), Participants: []types.GroupParticipant{owner}},
		invite: fmt.Sprintf("INVITE%d", n.next)}
	// WhatsApp answers the creation with every participant asked for, those it could not add with an error
	// code; the group has the others.
	answer := g.info
	answer.Participants = slices.Clone(g.info.Participants)
	for _, j := range who {
		if a := n.accounts[j.User]; a != nil {
			g.info.Participants = append(g.info.Participants, participant(a))
			answer.Participants = append(answer.Participants, participant(a))
		} else {
			answer.Participants = append(answer.Participants, types.GroupParticipant{JID: j, PhoneNumber: j, Error: 404})
		}
	}
	n.groups[g.info.JID.User] = g
	return &answer, nil
}

func (c *fakeClient) GroupInfo(_ context.Context, j types.JID) (*types.GroupInfo, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err != nil {
		return nil, err
	}
	info := g.info
	info.Participants = slices.Clone(g.info.Participants)
	return &info, nil
}

func (c *fakeClient) SetGroupName(_ context.Context, j types.JID, name string) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err == nil {
		g.info.Name = name
	}
	return err
}

func (c *fakeClient) SetGroupDescription(_ context.Context, j types.JID, topic string) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err == nil {
		g.info.Topic = topic
	}
	return err
}

func (c *fakeClient) UpdateGroupParticipants(_ context.Context, j types.JID, who []types.JID, action whatsmeow.ParticipantChange) ([]types.GroupParticipant, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err != nil {
		return nil, err
	}
	var out []types.GroupParticipant
	for _, w := range who {
		i := slices.IndexFunc(g.info.Participants, func(p types.GroupParticipant) bool { return p.PhoneNumber.User == w.User })
		a := c.n.accounts[w.User]
		res := types.GroupParticipant{JID: w, PhoneNumber: w}
		switch {
		case a == nil:
			res.Error = 404
		case action == whatsmeow.ParticipantChangeAdd && i >= 0:
			res.Error = 409
		case action == whatsmeow.ParticipantChangeAdd:
			res = participant(a)
			g.info.Participants = append(g.info.Participants, res)
		case i < 0:
			res.Error = 404
		case action == whatsmeow.ParticipantChangeRemove:
			g.info.Participants = slices.Delete(g.info.Participants, i, i+1)
		default:
			g.info.Participants[i].IsAdmin = action == whatsmeow.ParticipantChangePromote
			res = g.info.Participants[i]
		}
		out = append(out, res)
	}
	return out, nil
}

func (c *fakeClient) GroupInviteLink(_ context.Context, j types.JID, reset bool) (string, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err != nil {
		return "", err
	}
	if reset {
		c.n.next++
		g.invite = fmt.Sprintf("INVITE%d", c.n.next)
	}
	return invitePrefix + g.invite, nil
}

func (c *fakeClient) JoinGroupWithLink(_ context.Context, code string) (types.JID, error) {
	me, err := c.account()
	if err != nil {
		return types.EmptyJID, err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	for _, g := range c.n.groups {
		if g.invite == code {
			g.info.Participants = append(g.info.Participants, participant(me))
			return g.info.JID, nil
		}
	}
	return types.EmptyJID, whatsmeow.ErrInviteLinkRevoked
}

func (c *fakeClient) LeaveGroup(_ context.Context, j types.JID) error {
	me, err := c.account()
	if err != nil {
		return err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.n.group(j)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(g.info.Participants, func(p types.GroupParticipant) bool { return p.PhoneNumber.User == me.phone })
	if i < 0 {
		return whatsmeow.ErrNotInGroup
	}
	g.info.Participants = slices.Delete(g.info.Participants, i, i+1)
	return nil
}

func (c *fakeClient) ProfilePicture(_ context.Context, who types.JID) (string, []byte, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	for _, a := range c.n.accounts {
		if a.jid().User == who.User || a.pn().User == who.User {
			return a.pictureID, a.picture, nil
		}
	}
	if g := c.n.groups[who.User]; g != nil && who.Server == types.GroupServer {
		return g.pictureID, g.picture, nil
	}
	return "", nil, nil
}

func (c *fakeClient) IsOnWhatsApp(_ context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	out := make([]types.IsOnWhatsAppResponse, len(phones))
	for i, p := range phones {
		out[i].Query = p
		if a := c.n.accounts[p[1:]]; a != nil {
			out[i].IsIn, out[i].JID, out[i].PhoneNumber = true, a.jid(), a.pn()
		}
	}
	return out, nil
}

func (c *fakeClient) UpdateBlocklist(context.Context, types.JID, events.BlocklistChangeAction) error {
	_, err := c.account()
	return err
}

func (c *fakeClient) SendChatPresence(_ context.Context, chat types.JID, state types.ChatPresence, m types.ChatPresenceMedia) error {
	return c.presence(fmt.Sprintf("%s/%s %s", state, m, chat))
}

func (c *fakeClient) SendPresence(_ context.Context, state types.Presence) error {
	return c.presence(string(state))
}

func (c *fakeClient) SubscribePresence(_ context.Context, who types.JID) error {
	return c.presence("subscribe " + who.String())
}

func (c *fakeClient) presence(what string) error {
	a, err := c.account()
	if err != nil {
		return err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	c.n.presences = append(c.n.presences, a.phone+" "+what)
	return nil
}

func (n *network) presenceLog() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.presences)
}

// BuildPollCreation builds the poll as whatsmeow does, with a fixed secret.
func (c *fakeClient) BuildPollCreation(question string, options []string, selectable int) *waE2E.Message {
	p := &waE2E.PollCreationMessage{Name: proto.String(question), SelectableOptionsCount: proto.Uint32(uint32(selectable))}
	for _, o := range options {
		p.Options = append(p.Options, &waE2E.PollCreationMessage_Option{OptionName: proto.String(o)})
	}
	return &waE2E.Message{PollCreationMessage: p, MessageContextInfo: &waE2E.MessageContextInfo{MessageSecret: []byte("secret")}}
}

// DecryptPollVote "decrypts" the fake's votes, whose payload is the vote in the clear; a vote with the IV "bad"
// cannot be decrypted, as one on a poll whose secret the device does not have.
func (c *fakeClient) DecryptPollVote(_ context.Context, vote *events.Message) (*waE2E.PollVoteMessage, error) {
	enc := vote.Message.GetPollUpdateMessage().GetVote()
	if string(enc.GetEncIV()) == "bad" {
		return nil, errors.New("failed to decrypt poll vote: no secret for the poll")
	}
	var v waE2E.PollVoteMessage
	if err := proto.Unmarshal(enc.GetEncPayload(), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (c *fakeClient) RejectCall(_ context.Context, from types.JID, callID string) error {
	return c.presence("reject " + callID + " " + from.String())
}

// GetJoinedGroups lists the groups whose participants include the account.
func (c *fakeClient) GetJoinedGroups(context.Context) ([]*types.GroupInfo, error) {
	a, err := c.account()
	if err != nil {
		return nil, err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	var out []*types.GroupInfo
	for _, g := range c.n.groups {
		if slices.ContainsFunc(g.info.Participants, func(p types.GroupParticipant) bool {
			return p.JID.User == a.lid || p.PhoneNumber.User == a.phone || p.JID.User == a.phone
		}) {
			info := g.info
			info.Participants = slices.Clone(g.info.Participants)
			out = append(out, &info)
		}
	}
	slices.SortFunc(out, func(x, y *types.GroupInfo) int { return strings.Compare(x.JID.User, y.JID.User) })
	return out, nil
}

// SendAppState records each mutation as "appstate <kind> <index …> <value>" (the index is the chat, a label, or a
// label and a chat). A label's change comes back to the device as whatsmeow's event of it, before SendAppState
// returns: whatsmeow hands a device the app state it sent itself, and this is the earliest it can.
func (c *fakeClient) SendAppState(_ context.Context, patch appstate.PatchInfo) error {
	var echoes []any
	for _, m := range patch.Mutations {
		v := m.Value
		var what string
		switch {
		case v.GetArchiveChatAction() != nil:
			what = fmt.Sprint(v.GetArchiveChatAction().GetArchived())
		case v.GetPinAction() != nil:
			what = fmt.Sprint(v.GetPinAction().GetPinned())
		case v.GetMuteAction() != nil:
			what = fmt.Sprint(v.GetMuteAction().GetMuted(), " ", v.GetMuteAction().GetMuteEndTimestamp())
		case v.GetLabelEditAction() != nil:
			a := v.GetLabelEditAction()
			what = fmt.Sprintf("%q %d %v", a.GetName(), a.GetColor(), a.GetDeleted())
			echoes = append(echoes, &events.LabelEdit{LabelID: m.Index[1], Action: a})
		case v.GetLabelAssociationAction() != nil:
			what = fmt.Sprint(v.GetLabelAssociationAction().GetLabeled())
			chat, _ := types.ParseJID(m.Index[2])
			echoes = append(echoes, &events.LabelAssociationChat{JID: chat, LabelID: m.Index[1],
				Action: v.GetLabelAssociationAction()})
		}
		if err := c.presence("appstate " + strings.Join(m.Index, " ") + " " + what); err != nil {
			return err
		}
	}
	for _, e := range echoes {
		c.emit(e)
	}
	return nil
}

// admin finds the group of j and checks that the client's account is one of its admins, as WhatsApp does before a
// change of its settings or picture (403 otherwise). The network's lock is held.
func (c *fakeClient) admin(j types.JID) (*fakeGroup, error) {
	c.mu.Lock()
	me := c.acct
	c.mu.Unlock()
	g, err := c.n.group(j)
	if err != nil {
		return nil, err
	}
	for _, p := range g.info.Participants {
		if me != nil && p.JID.User == me.lid && (p.IsAdmin || p.IsSuperAdmin) {
			return g, nil
		}
	}
	return nil, &whatsmeow.IQError{Code: 403, Text: "forbidden"}
}

func (c *fakeClient) SetGroupAnnounce(_ context.Context, j types.JID, announce bool) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.admin(j)
	if err == nil {
		g.info.IsAnnounce = announce
	}
	return err
}

func (c *fakeClient) SetGroupLocked(_ context.Context, j types.JID, locked bool) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	g, err := c.admin(j)
	if err == nil {
		g.info.IsLocked = locked
	}
	return err
}

// SetPicture keeps a group's or the account's picture; WhatsApp takes JPEG only, so anything else is refused
// (406, as its servers answer an unreadable image).
func (c *fakeClient) SetPicture(_ context.Context, who types.JID, data []byte) (string, error) {
	me, err := c.account()
	if err != nil {
		return "", err
	}
	if len(data) > 0 && (len(data) < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) {
		return "", &whatsmeow.IQError{Code: 406, Text: "not-acceptable"}
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	c.n.next++
	id := ""
	if len(data) > 0 {
		id = fmt.Sprint(c.n.next)
	}
	if who.IsEmpty() {
		me.picture, me.pictureID = slices.Clone(data), id
		return id, nil
	}
	g, err := c.n.group(who)
	if err != nil {
		return "", err
	}
	if g.info.IsLocked {
		if _, err := c.admin(who); err != nil {
			return "", err
		}
	}
	g.picture, g.pictureID = slices.Clone(data), id
	return id, nil
}

func (c *fakeClient) About(context.Context) (string, error) {
	me, err := c.account()
	if err != nil {
		return "", err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return me.about, nil
}

func (c *fakeClient) SetAbout(_ context.Context, text string) error {
	me, err := c.account()
	if err != nil {
		return err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	me.about = text
	return nil
}

func (c *fakeClient) SetPushName(_ context.Context, name string) error {
	me, err := c.account()
	if err != nil {
		return err
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	me.name = name
	c.dev.PushName = name // as whatsmeow's store takes the setting once the app state applies
	return nil
}
