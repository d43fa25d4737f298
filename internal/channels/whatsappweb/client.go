//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/appstate"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	waHistorySync "go.mau.fi/whatsmeow/proto/waHistorySync"
	waWeb "go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/egress"
)

// Client is the part of whatsmeow's client the provider uses: the seam its tests drive with a fake that emits
// whatsmeow's own event types. Every call of the provider to WhatsApp goes through it.
type Client interface {
	// AddEventHandler registers the handler of every event (whatsmeow's types/events values). An unpaired device
	// gets its QR codes as events.QR, whose rotation the session runs itself.
	AddEventHandler(h func(evt any))
	Connect(ctx context.Context) error
	Disconnect()
	Logout(ctx context.Context) error
	// PairPhone asks for a pairing code for phone (digits with the country code) shown under displayName.
	PairPhone(ctx context.Context, phone, displayName string) (string, error)
	// Own is the paired account: its phone-number JID (device part included), its LID and push name.
	Own() (pn, lid types.JID, pushName string)
	// PNForLID is the phone-number JID WhatsApp mapped to a LID, empty when none is known.
	PNForLID(ctx context.Context, lid types.JID) (types.JID, error)

	SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message, id types.MessageID) (whatsmeow.SendResponse, error)
	MarkRead(ctx context.Context, ids []types.MessageID, at time.Time, chat, sender types.JID) error
	Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	// DownloadHistorySync fetches the chats' history the phone offers in notif; ParseWebMessage makes one of its
	// messages a message event.
	DownloadHistorySync(ctx context.Context, notif *waE2E.HistorySyncNotification) (*waHistorySync.HistorySync, error)
	ParseWebMessage(chat types.JID, msg *waWeb.WebMessageInfo) (*events.Message, error)

	CreateGroup(ctx context.Context, name string, participants []types.JID) (*types.GroupInfo, error)
	GroupInfo(ctx context.Context, group types.JID) (*types.GroupInfo, error)
	// GetJoinedGroups lists the groups and communities the account is in.
	GetJoinedGroups(ctx context.Context) ([]*types.GroupInfo, error)
	SetGroupName(ctx context.Context, group types.JID, name string) error
	SetGroupDescription(ctx context.Context, group types.JID, description string) error
	UpdateGroupParticipants(ctx context.Context, group types.JID, who []types.JID, action whatsmeow.ParticipantChange) ([]types.GroupParticipant, error)
	GroupInviteLink(ctx context.Context, group types.JID, reset bool) (string, error)
	JoinGroupWithLink(ctx context.Context, code string) (types.JID, error)
	LeaveGroup(ctx context.Context, group types.JID) error

	IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error)
	UpdateBlocklist(ctx context.Context, who types.JID, action events.BlocklistChangeAction) error

	// SendChatPresence shows a chat that the account is composing (typing, or recording when media is audio) or
	// paused; SendPresence the account's availability; SubscribePresence asks WhatsApp for a person's presence
	// updates, which it sends only after that.
	SendChatPresence(ctx context.Context, chat types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error
	SendPresence(ctx context.Context, state types.Presence) error
	SubscribePresence(ctx context.Context, who types.JID) error
	// BuildPollCreation is a poll message with a fresh message secret (the key its votes are encrypted with, kept
	// by the store when the poll is sent); DecryptPollVote a vote on one of the account's polls: the SHA-256 of the
	// text of each option chosen.
	BuildPollCreation(question string, options []string, selectable int) *waE2E.Message
	DecryptPollVote(ctx context.Context, vote *events.Message) (*waE2E.PollVoteMessage, error)
	// SendAppState sends a change of the account's app state (archive, pin, mute …), which its phone and other
	// devices apply.
	SendAppState(ctx context.Context, patch appstate.PatchInfo) error
	// RejectCall declines an incoming call (from is the calling device, as the offer names it).
	RejectCall(ctx context.Context, from types.JID, callID string) error
	// ProfilePicture is a person's or group's profile picture: WhatsApp's ID of it and its bytes (none: the person
	// has none or hides it from the account).
	ProfilePicture(ctx context.Context, who types.JID) (id string, data []byte, err error)

	// SetGroupAnnounce lets only the group's admins send (true) or everyone; SetGroupLocked lets only its admins
	// edit its subject, description and picture (true) or everyone.
	SetGroupAnnounce(ctx context.Context, group types.JID, announce bool) error
	SetGroupLocked(ctx context.Context, group types.JID, locked bool) error
	// SetPicture sets a JPEG as the picture of a group, or of the account itself (who empty), or removes it (no
	// data), and returns WhatsApp's ID of the new picture.
	SetPicture(ctx context.Context, who types.JID, jpeg []byte) (string, error)
	// About reads the account's about text; SetAbout changes it; SetPushName changes the name its contacts see
	// (an app-state setting every device of the account applies).
	About(ctx context.Context) (string, error)
	SetAbout(ctx context.Context, text string) error
	SetPushName(ctx context.Context, name string) error
}

// NewClient builds the client of a device; the provider's Options take another for tests.
type NewClient func(dev *store.Device) Client

// realClient is Client over whatsmeow's *Client.
type realClient struct {
	c   *whatsmeow.Client
	dev *store.Device
	// media fetches profile pictures from WhatsApp's media servers, as media go (the egress guard, the proxy).
	media *http.Client
}

// RealOptions configure whatsmeow's clients.
type RealOptions struct {
	// Media carries media uploads and downloads (the server's egress guard).
	Media *http.Client
	// Websocket dials WhatsApp's websocket, before and after pairing (default whatsmeow's own). It must set no
	// overall timeout: the connection is the response body of its request and lives for hours.
	Websocket *http.Client
}

// Real returns the NewClient of whatsmeow's client. Its own reconnect loop is off: a lost connection ends the
// session's Run, and the channel runtime's backoff opens it again, as for every other network.
func Real(o RealOptions) NewClient {
	return func(dev *store.Device) Client {
		// whatsmeow's logger is off: its debug output carries keys, QR payloads and message contents.
		c := whatsmeow.NewClient(dev, nil)
		c.EnableAutoReconnect = false
		c.InitialAutoReconnect = false
		// The phone's history sync is downloaded only by sessions whose instance opted in (history_sync).
		c.ManualHistorySyncDownload = true
		// A full sync of the app state (the first after pairing, a resync) is reported as its changes are: the
		// account's labels and how it keeps its chats are in it, and the sink records each once however often
		// WhatsApp replays it.
		c.EmitAppStateEventsOnFullSync = true
		media := http.DefaultClient
		if o.Media != nil {
			c.SetMediaHTTPClient(o.Media)
			media = o.Media
		}
		if o.Websocket != nil {
			c.SetWebsocketHTTPClient(o.Websocket)
			c.SetPreLoginHTTPClient(o.Websocket)
		}
		return &realClient{c: c, dev: dev, media: media}
	}
}

// proxied is a Client whose connections can go through an instance's forward proxy.
type proxied interface {
	UseProxy(v *egress.Proxied)
}

// mediaTimeout bounds a media upload or download through an instance's proxy.
const mediaTimeout = 5 * time.Minute

// UseProxy sends the websocket, before and after pairing, and media through the proxy.
func (r *realClient) UseProxy(v *egress.Proxied) {
	r.c.SetWebsocketHTTPClient(v.Client(0))
	r.c.SetPreLoginHTTPClient(v.Client(0))
	r.c.SetMediaHTTPClient(v.Client(mediaTimeout))
	r.media = v.Client(mediaTimeout)
}

// maxPicture bounds a profile picture read from WhatsApp's media servers (they are 640×640 JPEGs).
const maxPicture = 5 << 20

func (r *realClient) ProfilePicture(ctx context.Context, who types.JID) (string, []byte, error) {
	info, err := r.c.GetProfilePictureInfo(ctx, who, nil)
	if errors.Is(err, whatsmeow.ErrProfilePictureNotSet) || errors.Is(err, whatsmeow.ErrProfilePictureUnauthorized) || (err == nil && info == nil) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.URL, nil)
	if err != nil {
		return "", nil, err
	}
	res, err := r.media.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("whatsapp_web: profile picture: HTTP %d", res.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxPicture+1))
	if err == nil && len(data) > maxPicture {
		err = errors.New("whatsapp_web: the profile picture is larger than 5 MiB")
	}
	return info.ID, data, err
}

func (r *realClient) AddEventHandler(h func(evt any)) { r.c.AddEventHandler(h) }

func (r *realClient) Connect(ctx context.Context) error { return r.c.ConnectContext(ctx) }
func (r *realClient) Disconnect()                       { r.c.Disconnect() }
func (r *realClient) Logout(ctx context.Context) error  { return r.c.Logout(ctx) }

func (r *realClient) PairPhone(ctx context.Context, phone, displayName string) (string, error) {
	return r.c.PairPhone(ctx, phone, true, whatsmeow.PairClientChrome, displayName)
}

func (r *realClient) Own() (types.JID, types.JID, string) {
	return r.dev.GetJID(), r.dev.GetLID(), r.dev.PushName
}

func (r *realClient) PNForLID(ctx context.Context, lid types.JID) (types.JID, error) {
	if r.dev.LIDs == nil {
		return types.EmptyJID, nil
	}
	return r.dev.LIDs.GetPNForLID(ctx, lid)
}

func (r *realClient) SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message, id types.MessageID) (whatsmeow.SendResponse, error) {
	return r.c.SendMessage(ctx, to, msg, whatsmeow.SendRequestExtra{ID: id})
}

func (r *realClient) MarkRead(ctx context.Context, ids []types.MessageID, at time.Time, chat, sender types.JID) error {
	return r.c.MarkRead(ctx, ids, at, chat, sender)
}

func (r *realClient) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	return r.c.Upload(ctx, data, kind)
}

func (r *realClient) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	return r.c.Download(ctx, msg)
}

func (r *realClient) DownloadHistorySync(ctx context.Context, notif *waE2E.HistorySyncNotification) (*waHistorySync.HistorySync, error) {
	return r.c.DownloadHistorySync(ctx, notif, true)
}

func (r *realClient) ParseWebMessage(chat types.JID, msg *waWeb.WebMessageInfo) (*events.Message, error) {
	return r.c.ParseWebMessage(chat, msg)
}

func (r *realClient) CreateGroup(ctx context.Context, name string, participants []types.JID) (*types.GroupInfo, error) {
	return r.c.CreateGroup(ctx, whatsmeow.ReqCreateGroup{Name: name, Participants: participants})
}

func (r *realClient) GroupInfo(ctx context.Context, group types.JID) (*types.GroupInfo, error) {
	return r.c.GetGroupInfo(ctx, group)
}

func (r *realClient) SetGroupName(ctx context.Context, group types.JID, name string) error {
	return r.c.SetGroupName(ctx, group, name)
}

func (r *realClient) SetGroupDescription(ctx context.Context, group types.JID, description string) error {
	return r.c.SetGroupDescription(ctx, group, description)
}

func (r *realClient) UpdateGroupParticipants(ctx context.Context, group types.JID, who []types.JID, action whatsmeow.ParticipantChange) ([]types.GroupParticipant, error) {
	return r.c.UpdateGroupParticipants(ctx, group, who, action)
}

func (r *realClient) GroupInviteLink(ctx context.Context, group types.JID, reset bool) (string, error) {
	return r.c.GetGroupInviteLink(ctx, group, reset)
}

func (r *realClient) JoinGroupWithLink(ctx context.Context, code string) (types.JID, error) {
	return r.c.JoinGroupWithLink(ctx, code)
}

func (r *realClient) LeaveGroup(ctx context.Context, group types.JID) error {
	return r.c.LeaveGroup(ctx, group)
}

func (r *realClient) IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error) {
	return r.c.IsOnWhatsApp(ctx, phones)
}

func (r *realClient) UpdateBlocklist(ctx context.Context, who types.JID, action events.BlocklistChangeAction) error {
	_, err := r.c.UpdateBlocklist(ctx, who, action)
	return err
}

func (r *realClient) SendChatPresence(ctx context.Context, chat types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error {
	return r.c.SendChatPresence(ctx, chat, state, media)
}

func (r *realClient) SendPresence(ctx context.Context, state types.Presence) error {
	return r.c.SendPresence(ctx, state)
}

func (r *realClient) SubscribePresence(ctx context.Context, who types.JID) error {
	return r.c.SubscribePresence(ctx, who)
}

func (r *realClient) BuildPollCreation(question string, options []string, selectable int) *waE2E.Message {
	return r.c.BuildPollCreation(question, options, selectable)
}

func (r *realClient) DecryptPollVote(ctx context.Context, vote *events.Message) (*waE2E.PollVoteMessage, error) {
	return r.c.DecryptPollVote(ctx, vote)
}

func (r *realClient) RejectCall(ctx context.Context, from types.JID, callID string) error {
	return r.c.RejectCall(ctx, from, callID)
}

func (r *realClient) GetJoinedGroups(ctx context.Context) ([]*types.GroupInfo, error) {
	return r.c.GetJoinedGroups(ctx)
}

func (r *realClient) SendAppState(ctx context.Context, patch appstate.PatchInfo) error {
	return r.c.SendAppState(ctx, patch)
}

func (r *realClient) SetGroupAnnounce(ctx context.Context, group types.JID, announce bool) error {
	return r.c.SetGroupAnnounce(ctx, group, announce)
}

func (r *realClient) SetGroupLocked(ctx context.Context, group types.JID, locked bool) error {
	return r.c.SetGroupLocked(ctx, group, locked)
}

// SetPicture is whatsmeow's SetGroupPhoto, which sets the account's own picture when no group is named.
func (r *realClient) SetPicture(ctx context.Context, who types.JID, jpeg []byte) (string, error) {
	return r.c.SetGroupPhoto(ctx, who, jpeg)
}

// About is the status text WhatsApp keeps for the account's own number.
func (r *realClient) About(ctx context.Context) (string, error) {
	own := r.c.Store.GetJID().ToNonAD()
	infos, err := r.c.GetUserInfo(ctx, []types.JID{own})
	if err != nil {
		return "", err
	}
	return infos[own].Status, nil
}

// SetAbout sets the account's text status with no expiry: WhatsApp's about.
func (r *realClient) SetAbout(ctx context.Context, text string) error {
	return r.c.SetStatusMessage(ctx, types.SetStatusInput{Text: &text})
}

func (r *realClient) SetPushName(ctx context.Context, name string) error {
	return r.c.SendAppState(ctx, appstate.BuildSettingPushName(name))
}
