//go:build whatsapp_web

package whatsappweb

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"go.mau.fi/whatsmeow/types"

	"github.com/switchboard/switchboard/internal/channels"
	sbstore "github.com/switchboard/switchboard/store"
)

// Name is the provider's name in the API.
const Name = "whatsapp_web"

// DefaultDeviceName is the name the phone shows for the linked device when a pairing code is asked for. WhatsApp
// takes it only as "Browser (OS)".
const DefaultDeviceName = "Chrome (Linux)"

// Options configure the provider.
type Options struct {
	// NewClient builds a device's client (default: whatsmeow's, Real(RealOptions{})).
	NewClient NewClient
}

// Provider is the WhatsApp Web provider. Its sessions keep their devices in Devices.
type Provider struct {
	devices   *Devices
	newClient NewClient
	// keys remembers who sent recent messages, by ID: a reaction, and a reply in a group, must name the sender of
	// the message they are about, and the API names the message only by its ID.
	keys *senders
}

// New returns the provider over the product's database.
func New(db *sbstore.DB, o Options) *Provider {
	if o.NewClient == nil {
		o.NewClient = Real(RealOptions{})
	}
	return &Provider{devices: NewDevices(db), newClient: o.NewClient, keys: newSenders(10000)}
}

// Devices is the provider's device store.
func (p *Provider) Devices() *Devices { return p.devices }

var capabilities = []channels.Capability{
	channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapContactCard, channels.CapReaction,
	channels.CapReply, channels.CapEdit, channels.CapDelete, channels.CapDelivered, channels.CapRead,
	channels.CapMarkRead, channels.CapGroupsCreate, channels.CapGroupsManage, channels.CapGroupsInvite,
	channels.CapContactsLookup, channels.CapContactsBlock, channels.CapContactsPicture, channels.CapAuthQR, channels.CapAuthPairing,
	channels.CapTyping, channels.CapPresenceSend, channels.CapPresenceRecv, channels.CapPoll,
	channels.CapCallsReceive, channels.CapCallsReject, channels.CapProxy, channels.CapArchive, channels.CapPin, channels.CapMute,
	channels.CapGroupsSettings, channels.CapGroupsPicture, channels.CapProfileName, channels.CapProfileAbout,
	channels.CapProfilePicture,
	channels.CapLabels,
}

// DefaultPacing is the pacing of instances without their own: six messages a minute on average, one at a time,
// each wait ±30 % jitter. WhatsApp restricts and bans accounts, newly linked devices above all, that send in bursts,
// so this holds even where the server's default is faster or off; an instance's own pacing still wins.
func (p *Provider) DefaultPacing() channels.Pacing { return channels.Pacing{Rate: 6, Burst: 1} }

// Info describes the provider.
func (p *Provider) Info() channels.Info {
	return channels.Info{
		Name:  Name,
		Title: "WhatsApp (linked device)",
		Description: "A WhatsApp account linked as a device, as WhatsApp Web is: scan the instance's QR code with " +
			"the phone (Settings, Linked devices) or ask for a pairing code for the phone number and type it into " +
			"the phone. The phone stays the account's main device; removing the linked device on it logs the " +
			"instance out. WhatsApp restricts accounts that send in bursts, above all from new devices: keep the " +
			"instance's pacing conservative. Built only into binaries made with the whatsapp_web build tag, which " +
			"are distributed under GPL-3.0.",
		Capabilities: capabilities,
		AuthMethods:  []channels.AuthMethod{channels.AuthQR, channels.AuthPairingCode},
		ConfigSchema: map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"properties": map[string]any{
				"device_name": map[string]any{"type": "string", "maxLength": 64, "default": DefaultDeviceName,
					"pattern":     deviceName.String(),
					"description": `The linked device's name on the phone when pairing by code, as "Browser (OS)".`},
				"history_sync": map[string]any{"type": "boolean", "default": false,
					"description": "Receive the chats' recent history the phone offers after pairing, as received " +
						"messages (off: the instance starts with the messages after pairing)."},
			},
		},
		AddressFormat:  "E.164 phone number of a person, or a group's ID (…@g.us)",
		AddressExample: "+15550100002",
	}
}

var (
	deviceName = regexp.MustCompile(`^[^()]{1,30} \([^()]{1,30}\)$`)
	phone      = regexp.MustCompile(`^[0-9]{7,15}$`)
	groupUser  = regexp.MustCompile(`^[0-9]{5,25}(-[0-9]{5,15})?$`)
	lidUser    = regexp.MustCompile(`^[0-9]{5,25}$`)
)

// NormalizeAddress returns "+" and the digits of a person's phone number, "<id>@g.us" for a group, and
// "<id>@lid" for a person WhatsApp names only by their LID (their number hidden). A phone-number JID
// (15550100002@s.whatsapp.net, with or without a device) is that person's number.
func (p *Provider) NormalizeAddress(raw string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	if user, server, ok := strings.Cut(s, "@"); ok {
		if i := strings.IndexAny(user, ":."); i >= 0 && server != types.GroupServer {
			user = user[:i] // a device of the person: the person
		}
		switch {
		case server == types.GroupServer && groupUser.MatchString(user):
			return user + "@" + types.GroupServer, nil
		case server == types.HiddenUserServer && lidUser.MatchString(user):
			return user + "@" + types.HiddenUserServer, nil
		case server == types.DefaultUserServer:
			s = user
		default:
			return "", fmt.Errorf("%q is not a WhatsApp address: a phone number, a group (…@g.us) or a LID (…@lid)", raw)
		}
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '.', '(', ')':
			return -1
		}
		return r
	}, s)
	s = strings.TrimPrefix(s, "+")
	if !phone.MatchString(s) || s[0] == '0' {
		return "", fmt.Errorf("%q is not an E.164 phone number (+ and 7 to 15 digits, the country code first)", raw)
	}
	return "+" + s, nil
}

// ValidateConfig checks the device name's form.
func (p *Provider) ValidateConfig(config map[string]any) error {
	if v, ok := config["device_name"]; ok {
		s, _ := v.(string)
		if !deviceName.MatchString(s) {
			return errors.New(`device_name must read "Browser (OS)", as "Chrome (Linux)"`)
		}
	}
	return nil
}

// credentials is what an instance keeps of its pairing: the device's JID. The device's keys stay in the device
// store; the JID names its rows.
type credentials struct {
	JID string `json:"jid"`
}

// Open starts a session for an instance. The device is read when Run starts.
func (p *Provider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	var jid types.JID
	if len(inst.Credentials) > 0 {
		var c credentials
		if err := json.Unmarshal(inst.Credentials, &c); err != nil {
			return nil, errors.New("whatsapp_web: the instance's credentials are not a device's")
		}
		parsed, err := types.ParseJID(c.JID)
		if err != nil {
			return nil, errors.New("whatsapp_web: the instance's credentials name no device")
		}
		jid = parsed
	}
	name, _ := inst.Config["device_name"].(string)
	if name == "" {
		name = DefaultDeviceName
	}
	history, _ := inst.Config["history_sync"].(bool)
	return &session{p: p, inst: inst, sink: sink, jid: jid, deviceName: name, history: history}, nil
}

// senders remembers, for recent message IDs, the chat and sender of the message, up to a bound (the oldest go).
type senders struct {
	mu    sync.Mutex
	max   int
	order []string
	byID  map[string]sender
}

type sender struct {
	chat, from types.JID
	fromMe     bool
}

func newSenders(max int) *senders { return &senders{max: max, byID: map[string]sender{}} }

func (s *senders) put(id string, v sender) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; !ok {
		s.order = append(s.order, id)
		if len(s.order) > s.max {
			delete(s.byID, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.byID[id] = v
}

func (s *senders) get(id string) (sender, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	return v, ok
}

var (
	_ channels.Sender           = (*session)(nil)
	_ channels.ReadMarker       = (*session)(nil)
	_ channels.GroupManager     = (*session)(nil)
	_ channels.ContactDirectory = (*session)(nil)
	_ channels.Pairer           = (*session)(nil)
	_ channels.GroupConfigurer  = (*session)(nil)
	_ channels.PictureWriter    = (*session)(nil)
	_ channels.ProfileEditor    = (*session)(nil)
	_ channels.Labeler          = (*session)(nil)
)

// The provider's network punishes bursts: its default pacing holds where an instance has none of its own.
var _ channels.Paced = (*Provider)(nil)
