// Package sandbox is a simulated messaging network, the provider named "sandbox" (Stripe's test mode is the model):
// instances of the deployment pair with it like with a real network (a QR code to scan, a pairing code, or at once),
// get a number in the reserved +999 range, message each other and a well-known echo number, form groups, look
// addresses up and block them, and receive delivery and read receipts on a schedule. Test controls inject what a
// real network would do unprompted: an inbound message, a receipt, a dropped connection, a logout, failing sends.
//
// The network is shared by every instance of the deployment, across processes: its accounts, groups, blocks and
// the mail it holds for each account (messages, receipts, group changes) live in the database, so two serve
// processes on one PostgreSQL form one network. Mail is written first and the recipient's session is then woken
// through the runtime (the op "sandbox.deliver", wherever that session lives); a session that is offline
// finds its mail when it connects, as on a real network that queues on its servers.
package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// Name is the provider's name in the API.
const Name = "sandbox"

// The sandbox's own commands, carried by channels.Sessions.Do to the session of an instance.
const (
	// OpDeliver wakes a session to take the mail the network holds for it.
	OpDeliver = "sandbox.deliver"
	// OpControl runs a test control (its Args are a channels.Control).
	OpControl = "sandbox.control"
)

// Defaults of Options (Delivered and Read: the schedule serve uses; zero means at once).
const (
	DefaultQRRefresh = 20 * time.Second
	DefaultQRLimit   = 6
	DefaultDelivered = 500 * time.Millisecond
	DefaultRead      = 2 * time.Second
	DefaultPoll      = 30 * time.Second
	DefaultMaxMedia  = 16 << 20
)

// Options configure the network; zero values take the defaults.
type Options struct {
	// QRRefresh is how long a QR code is valid before the next one is shown (default DefaultQRRefresh).
	QRRefresh time.Duration
	// QRLimit is how many QR codes are shown before the session gives up waiting for a scan and reports the
	// instance disconnected (default DefaultQRLimit; negative: never give up).
	QRLimit int
	// Delivered and Read are how long after a message reaches the recipient's instance its sender is told it was
	// delivered and read: 0 at once, NoReceipt never (serve's defaults are DefaultDelivered and DefaultRead, a
	// pace a person can watch). A read receipt is also sent when the recipient's instance marks the chat read.
	Delivered, Read time.Duration
	// Shuffle reports the two receipts of a message in either order, at random (the read receipt may come before
	// the delivered one): for testing that a message's status never moves backwards.
	Shuffle bool
	// Poll is how often a connected session looks for mail it was not woken for (default DefaultPoll): mail is
	// never lost when a wake-up is (the recipient connected while it was being posted, a process in between died).
	// Wake-ups carry the mail's latency; the poll is a safety net, kept rare because every connected instance
	// pays one query per poll.
	Poll time.Duration
	// MaxMedia is the largest attachment the network carries, in bytes (default DefaultMaxMedia).
	MaxMedia int64
	// Logger receives what reaches no caller: failed wake-ups (debug), mail that cannot be read (default
	// slog.Default()).
	Logger *slog.Logger

	// now and coin replace the clock and the shuffle's coin in tests.
	now  func() time.Time
	coin func() bool
}

// NoReceipt as Options.Delivered or Options.Read turns that scheduled receipt off.
const NoReceipt time.Duration = -1

// Provider is the sandbox network. It is safe for concurrent use.
type Provider struct {
	net  Storage
	opts Options
}

// New returns the sandbox provider over the records of the network (the database's store.SandboxNetwork; nil for a
// provider that only normalizes addresses). Its sessions wake the online recipients of what they post through the
// runtime that opened them (channels.Instance.Runtime).
func New(net Storage, opts Options) *Provider {
	if opts.QRRefresh <= 0 {
		opts.QRRefresh = DefaultQRRefresh
	}
	if opts.QRLimit == 0 {
		opts.QRLimit = DefaultQRLimit
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.MaxMedia <= 0 {
		opts.MaxMedia = DefaultMaxMedia
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.now == nil {
		opts.now = func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
	}
	if opts.coin == nil {
		opts.coin = coinFlip
	}
	return &Provider{net: net, opts: opts}
}

var _ channels.Provider = (*Provider)(nil)

// Info describes the sandbox: every capability, every auth method.
func (p *Provider) Info() channels.Info {
	return channels.Info{
		Name:  Name,
		Title: "Sandbox",
		Description: "A simulated network inside Switchboard, for trying and testing everything without a real " +
			"account: instances get a +999 number when they pair (scan the QR code with " +
			"POST /api/v1/instances/{id}/sandbox/scan, use a pairing code, or set auto_pair), message each other " +
			"and the echo number " + EchoNumber + ", which answers every message, and receive delivery and read " +
			"receipts on a schedule. Test controls inject inbound messages, receipts, disconnects, logouts and " +
			"failing sends.",
		Capabilities: []channels.Capability{
			channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapContactCard,
			channels.CapReaction, channels.CapReply, channels.CapEdit, channels.CapDelete, channels.CapPoll,
			channels.CapDelivered, channels.CapRead, channels.CapMarkRead,
			channels.CapTyping, channels.CapPresenceSend, channels.CapPresenceRecv, channels.CapCallsReceive,
			channels.CapArchive, channels.CapPin, channels.CapMute, channels.CapLabels,
			channels.CapCallsReject,
			channels.CapGroupsCreate, channels.CapGroupsManage, channels.CapGroupsInvite,
			channels.CapContactsLookup, channels.CapContactsBlock, channels.CapContactsPicture,
			channels.CapGroupsSettings, channels.CapGroupsPicture, channels.CapProfileName, channels.CapProfileAbout,
			channels.CapProfilePicture,
			channels.CapAuthQR, channels.CapAuthPairing, channels.CapAuthToken,
		},
		AuthMethods:    []channels.AuthMethod{channels.AuthQR, channels.AuthPairingCode, channels.AuthToken},
		ConfigSchema:   configSchema(),
		AddressFormat:  "E.164 phone number in the reserved range +999 (groups: 18 digits followed by @g.sandbox)",
		AddressExample: "+9995550101",
	}
}

func configSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"display_name": map[string]any{
				"type": "string", "maxLength": maxDisplayName,
				"description": "The name others see next to this instance's number.",
			},
			"number": map[string]any{
				"type": "string", "examples": []string{"+9995550101"},
				"description": "The number to pair with, in the range +999 1… to +999 9… and not held by another " +
					"instance. Without it the network assigns one; either way the instance keeps it across reconnects.",
			},
			"auto_pair": map[string]any{
				"type": "boolean", "default": false,
				"description": "Pair at once, without a QR code or pairing code: the sandbox's stand-in for a token.",
			},
			"delivered_after_ms": map[string]any{
				"type": "integer", "minimum": -1, "maximum": maxReceiptDelay.Milliseconds(),
				"description": "How long after a message of this instance reaches its recipient the delivered " +
					"receipt comes, in milliseconds (-1: never; default: the server's setting).",
			},
			"read_after_ms": map[string]any{
				"type": "integer", "minimum": -1, "maximum": maxReceiptDelay.Milliseconds(),
				"description": "How long after a message of this instance reaches its recipient the read receipt " +
					"comes, in milliseconds (-1: never, only when the recipient marks the chat read; default: the " +
					"server's setting).",
			},
			"shuffle_receipts": map[string]any{
				"type": "boolean",
				"description": "Report the two receipts of each message in either order, at random (read may come " +
					"before delivered), to test that statuses never move backwards (default: the server's setting).",
			},
		},
	}
}

const maxDisplayName = 64

// maxReceiptDelay bounds an instance's receipt delays.
const maxReceiptDelay = time.Hour

// instanceConfig is what the sandbox reads from an instance's config.
type instanceConfig struct {
	DisplayName string
	Number      string // normalized; "" for one the network assigns
	AutoPair    bool
	// Delivered, Read and Shuffle override the network's receipt schedule for the instance's messages (nil: not).
	Delivered, Read *time.Duration
	Shuffle         *bool
}

// ValidateConfig checks the number and the display name.
func (p *Provider) ValidateConfig(config map[string]any) error {
	_, err := parseConfig(config)
	return err
}

func parseConfig(config map[string]any) (instanceConfig, error) {
	var c instanceConfig
	for key, v := range config {
		switch key {
		case "display_name":
			s, ok := v.(string)
			if !ok || len([]rune(s)) > maxDisplayName {
				return c, fmt.Errorf("display_name must be a text of at most %d characters", maxDisplayName)
			}
			c.DisplayName = s
		case "number":
			s, ok := v.(string)
			if !ok {
				return c, fmt.Errorf("number must be a text such as %q", "+9995550101")
			}
			n, err := requestableNumber(s)
			if err != nil {
				return c, err
			}
			c.Number = n
		case "auto_pair", "shuffle_receipts":
			b, ok := v.(bool)
			if !ok {
				return c, fmt.Errorf("%s must be true or false", key)
			}
			if key == "auto_pair" {
				c.AutoPair = b
			} else {
				c.Shuffle = &b
			}
		case "delivered_after_ms", "read_after_ms":
			d, err := receiptDelay(key, v)
			if err != nil {
				return c, err
			}
			if key == "delivered_after_ms" {
				c.Delivered = &d
			} else {
				c.Read = &d
			}
		default:
			return c, fmt.Errorf("%s is not a setting of the sandbox (display_name, number, auto_pair, "+
				"delivered_after_ms, read_after_ms, shuffle_receipts)", key)
		}
	}
	return c, nil
}

// receiptDelay reads a receipt delay in milliseconds (-1: NoReceipt) as JSON decodes it (float64, json.Number) or
// Go code writes it (int).
func receiptDelay(key string, v any) (time.Duration, error) {
	var ms float64
	switch n := v.(type) {
	case float64:
		ms = n
	case int:
		ms = float64(n)
	case int64:
		ms = float64(n)
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return 0, fmt.Errorf("%s must be a whole number of milliseconds", key)
		}
		ms = f
	default:
		return 0, fmt.Errorf("%s must be a whole number of milliseconds", key)
	}
	if ms != math.Trunc(ms) || ms < -1 || ms > float64(maxReceiptDelay.Milliseconds()) {
		return 0, fmt.Errorf("%s must be a whole number of milliseconds from 0 to %d, or -1 for never", key,
			maxReceiptDelay.Milliseconds())
	}
	if ms < 0 {
		return NoReceipt, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Open makes the session of an instance; it connects in Run.
func (p *Provider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	cfg, err := parseConfig(inst.Config)
	if err != nil {
		return nil, err
	}
	return newSession(p, inst, cfg, sink), nil
}
