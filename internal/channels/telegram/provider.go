// Package telegram is the Telegram Bot API provider: an instance is a bot, connected with its token. Updates come in
// by webhook (Switchboard registers its own hook URL with setWebhook and a random secret token that every push must
// carry) or, when the server has no public https URL, by long polling getUpdates; either way an update is
// acknowledged to Telegram only once the sink stored it.
//
// Telegram gives bots no delivery or read receipts, no way to create groups or add people, and no lookup of
// phone numbers: the provider does not list those capabilities, so the API refuses such calls up front.
package telegram

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// DefaultAPIURL is Telegram's Bot API server.
const DefaultAPIURL = "https://api.telegram.org"

// Telegram's published limits for bots: about one message a second in a chat, 20 a minute in a group, 30 a second
// overall. The session spaces its sends by them; a 429 with retry_after still pauses the instance exactly as long as
// Telegram asks.
const (
	chatInterval  = time.Second
	groupInterval = 3 * time.Second
	botInterval   = time.Second / 30
)

// Options configure the provider.
type Options struct {
	// PublicURL is the server's public base URL; an instance's hook URL is PublicURL/hooks/channels/{id}. Telegram
	// only pushes to https URLs, so with an http PublicURL (or none) instances in inbound mode auto poll instead.
	PublicURL string
	// HTTP is the client for the Bot API server (the server's egress guard: the API URL is the user's to set).
	// Its timeout must exceed PollTimeout.
	HTTP *http.Client
	// PollTimeout is getUpdates' long-poll timeout (default 25 s).
	PollTimeout time.Duration
	// ChatInterval, GroupInterval and BotInterval override Telegram's send spacing (tests).
	ChatInterval, GroupInterval, BotInterval time.Duration
	// WebhookCheck is how often a session in webhook mode asks Telegram whether its webhook is still the one it set
	// (default a minute): another process's late deleteWebhook, or someone's setWebhook elsewhere, would otherwise
	// leave updates waiting at Telegram while the instance shows connected.
	WebhookCheck time.Duration
}

// Provider is the Telegram provider.
type Provider struct{ opts Options }

// New returns the Telegram provider.
func New(o Options) *Provider {
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: time.Minute}
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = 25 * time.Second
	}
	if o.ChatInterval == 0 {
		o.ChatInterval = chatInterval
	}
	if o.GroupInterval == 0 {
		o.GroupInterval = groupInterval
	}
	if o.BotInterval == 0 {
		o.BotInterval = botInterval
	}
	if o.WebhookCheck <= 0 {
		o.WebhookCheck = time.Minute
	}
	return &Provider{opts: o}
}

var capabilities = []channels.Capability{
	channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapContactCard, channels.CapReaction,
	channels.CapReply, channels.CapEdit, channels.CapDelete, channels.CapPoll, channels.CapGroupsManage, channels.CapGroupsInvite,
	channels.CapAuthToken, channels.CapTyping, channels.CapProxy, channels.CapContactsPicture,
	channels.CapGroupsSettings, channels.CapGroupsPicture, channels.CapProfileName, channels.CapProfileAbout,
}

// Info describes the provider.
func (p *Provider) Info() channels.Info {
	return channels.Info{
		Name:  "telegram",
		Title: "Telegram (Bot API)",
		Description: "A Telegram bot, connected with the token @BotFather gave you. Updates arrive by webhook when the " +
			"server has a public https URL, else by long polling. Telegram tells bots nothing of delivery or reading " +
			"(a message ends at sent), and bots cannot create groups, add people or look up phone numbers. Groups are " +
			"the chats the bot was added to; people are addressed by their numeric ID (their @username is kept as " +
			"another ID of the same contact). Sends are spaced by Telegram's limits: one a second per chat, 20 a " +
			"minute per group, 30 a second per bot.",
		Capabilities: capabilities,
		AuthMethods:  []channels.AuthMethod{channels.AuthToken},
		ConfigSchema: map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"bot_token"},
			"properties": map[string]any{
				"bot_token": map[string]any{"type": "string", "writeOnly": true, "pattern": `^[0-9]{3,20}:[A-Za-z0-9_-]{20,100}$`,
					"description": "The bot's token from @BotFather (secret: stored sealed, never shown again)."},
				"api_url": map[string]any{"type": "string", "format": "uri", "maxLength": 512, "default": DefaultAPIURL,
					"description": "The Bot API server: Telegram's, or your own telegram-bot-api server."},
				"inbound": map[string]any{"type": "string", "enum": []any{"auto", "webhook", "polling"}, "default": "auto",
					"description": "How updates arrive: webhook (Telegram pushes to this server's hook URL; needs a public https URL), polling (getUpdates), or auto (webhook when the server's URL is https)."},
				"parse_mode": map[string]any{"type": "string", "enum": []any{"none", "MarkdownV2", "HTML"}, "default": "none",
					"description": "How Telegram formats the text of messages sent."},
			},
		},
		AddressFormat:  "a numeric chat ID (people positive, groups negative), or @username of a public group or channel",
		AddressExample: "123456789",
	}
}

var (
	numericAddress  = regexp.MustCompile(`^-?[0-9]{1,20}$`)
	usernameAddress = regexp.MustCompile(`^@[A-Za-z][A-Za-z0-9_]{3,31}$`)
)

// NormalizeAddress accepts a numeric chat ID or an @username (lower-cased: Telegram usernames are case-insensitive).
func (p *Provider) NormalizeAddress(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	switch {
	case numericAddress.MatchString(s):
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n == 0 {
			return "", fmt.Errorf("%q is not a Telegram chat ID", raw)
		}
		return strconv.FormatInt(n, 10), nil
	case usernameAddress.MatchString(s):
		return strings.ToLower(s), nil
	}
	return "", fmt.Errorf("%q is neither a numeric Telegram chat ID nor an @username", raw)
}

// ValidateConfig checks the API URL beyond the schema.
func (p *Provider) ValidateConfig(config map[string]any) error {
	if raw, _ := config["api_url"].(string); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("api_url must be an http or https URL")
		}
	}
	if config["inbound"] == "webhook" && !strings.HasPrefix(p.opts.PublicURL, "https://") {
		return fmt.Errorf("inbound webhook needs the server's public URL to be https (it is %q): Telegram pushes only to https; use polling", p.opts.PublicURL)
	}
	return nil
}

// Open starts a session for a bot.
func (p *Provider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	token, _ := inst.Config["bot_token"].(string)
	if token == "" {
		return nil, errors.New("telegram: the instance has no bot_token")
	}
	api := DefaultAPIURL
	if s, _ := inst.Config["api_url"].(string); s != "" {
		api = strings.TrimRight(s, "/")
	}
	mode, _ := inst.Config["inbound"].(string)
	if mode == "" || mode == "auto" {
		mode = "polling"
		if strings.HasPrefix(p.opts.PublicURL, "https://") {
			mode = "webhook"
		}
	}
	parse, _ := inst.Config["parse_mode"].(string)
	if parse == "none" {
		parse = ""
	}
	return newSession(p, inst, sink, api, token, mode, parse), nil
}

// hookURL is an instance's hook URL.
func (p *Provider) hookURL(id string) string {
	return strings.TrimRight(p.opts.PublicURL, "/") + "/hooks/channels/" + id
}

var (
	_ channels.PushReceiver = (*Provider)(nil)
	_ channels.Sender       = (*session)(nil)
	_ channels.GroupManager = (*session)(nil)
)
