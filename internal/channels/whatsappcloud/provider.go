// Package whatsappcloud is the WhatsApp Business Cloud API provider: an instance is a business phone number on
// Meta's Graph API, reached over plain HTTPS with a system-user access token. Messages go out with POST
// /{phone-number-id}/messages; everything that comes back — people's messages and the statuses of sent ones — is
// pushed by Meta to the instance's hook URL, where each push is verified with the app secret (X-Hub-Signature-256)
// before anything of it is applied.
//
// The Cloud API has a 24-hour customer-service window: free-form messages reach a person only within a day of
// their last message; outside it only approved templates do. The provider declares the window, so the API refuses
// such a send up front (conversation_window_closed) instead of letting it fail a day later.
package whatsappcloud

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// Defaults of the Graph API.
const (
	DefaultBaseURL    = "https://graph.facebook.com"
	DefaultAPIVersion = "v21.0"
	// Window is the customer-service window after a person's last message.
	Window = 24 * time.Hour
)

// Options configure the provider.
type Options struct {
	// HTTP is the client for the Graph API (the server's egress guard: the base URL is the user's to set).
	HTTP *http.Client
}

// Provider is the WhatsApp Cloud provider.
type Provider struct{ opts Options }

// New returns the provider.
func New(o Options) *Provider {
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: time.Minute}
	}
	return &Provider{opts: o}
}

var capabilities = []channels.Capability{
	channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapContactCard, channels.CapReaction,
	channels.CapReply, channels.CapTemplate, channels.CapDelivered, channels.CapRead, channels.CapMarkRead,
	channels.CapAuthToken, channels.CapProxy,
}

// Info describes the provider.
func (p *Provider) Info() channels.Info {
	return channels.Info{
		Name:  "whatsapp_cloud",
		Title: "WhatsApp Business (Cloud API)",
		Description: "A business phone number on Meta's WhatsApp Cloud API. Enter the instance's hook URL " +
			"(/hooks/channels/{instance_id}) and verify token as the callback in your Meta app (or as the phone " +
			"number's override callback) and subscribe to the messages field. Free-form messages reach a person " +
			"only within 24 hours of their last message; outside that window send an approved template. The Cloud " +
			"API has no groups, no lookup of numbers, and no edit or delete of sent messages.",
		Capabilities: capabilities,
		AuthMethods:  []channels.AuthMethod{channels.AuthToken},
		ConfigSchema: map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"phone_number_id", "access_token", "app_secret", "verify_token"},
			"properties": map[string]any{
				"phone_number_id": map[string]any{"type": "string", "pattern": `^[0-9]{5,30}$`,
					"description": "The phone number's ID in Meta's app dashboard (not the number itself)."},
				"business_account_id": map[string]any{"type": "string", "pattern": `^[0-9]{5,30}$`,
					"description": "The WhatsApp Business Account ID: needed to list message templates."},
				"access_token": map[string]any{"type": "string", "writeOnly": true, "minLength": 20, "maxLength": 1024,
					"description": "A system-user access token with whatsapp_business_messaging (secret: stored sealed)."},
				"app_secret": map[string]any{"type": "string", "writeOnly": true, "minLength": 16, "maxLength": 256,
					"description": "The Meta app's secret: pushes are accepted only with its X-Hub-Signature-256."},
				"verify_token": map[string]any{"type": "string", "writeOnly": true, "minLength": 8, "maxLength": 256,
					"description": "The token you enter beside the callback URL in Meta's dashboard; it answers Meta's URL check."},
				"api_version": map[string]any{"type": "string", "pattern": `^v[0-9]{1,3}\.[0-9]{1,2}$`, "default": DefaultAPIVersion,
					"description": "The Graph API version."},
				"base_url": map[string]any{"type": "string", "format": "uri", "maxLength": 512, "default": DefaultBaseURL,
					"description": "The Graph API's base URL."},
			},
		},
		AddressFormat:  "E.164 phone number",
		AddressExample: "+15550100002",
	}
}

// ConversationWindow is WhatsApp's customer-service window.
func (p *Provider) ConversationWindow() time.Duration { return Window }

var digits = regexp.MustCompile(`^[0-9]{7,15}$`)

// NormalizeAddress returns an E.164 number: "+" and digits (spaces, dashes, dots and brackets dropped).
func (p *Provider) NormalizeAddress(raw string) (string, error) {
	s := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '.', '(', ')':
			return -1
		}
		return r
	}, strings.TrimSpace(raw))
	s = strings.TrimPrefix(s, "+")
	if !digits.MatchString(s) || s[0] == '0' {
		return "", fmt.Errorf("%q is not an E.164 phone number (+ and 7 to 15 digits, the country code first)", raw)
	}
	return "+" + s, nil
}

// ValidateConfig checks the base URL beyond the schema.
func (p *Provider) ValidateConfig(config map[string]any) error {
	if raw, _ := config["base_url"].(string); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("base_url must be an http or https URL")
		}
	}
	return nil
}

// account is an instance's Graph API coordinates.
type account struct {
	phoneID, wabaID, token, appSecret, verifyToken, base string
}

func accountOf(inst channels.Instance) account {
	s := func(k string) string { v, _ := inst.Config[k].(string); return v }
	a := account{phoneID: s("phone_number_id"), wabaID: s("business_account_id"), token: s("access_token"),
		appSecret: s("app_secret"), verifyToken: s("verify_token")}
	base, version := strings.TrimRight(s("base_url"), "/"), s("api_version")
	if base == "" {
		base = DefaultBaseURL
	}
	if version == "" {
		version = DefaultAPIVersion
	}
	a.base = base + "/" + version
	return a
}

// Open starts a session for a phone number.
func (p *Provider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	a := accountOf(inst)
	if a.token == "" || a.phoneID == "" {
		return nil, errors.New("whatsapp_cloud: the instance has no access_token or phone_number_id")
	}
	return &session{p: p, inst: inst, sink: sink, a: a, g: &graph{http: inst.Client(p.opts.HTTP), a: a}}, nil
}

var (
	_ channels.PushReceiver = (*Provider)(nil)
	_ channels.Windowed     = (*Provider)(nil)
	_ channels.Sender       = (*session)(nil)
	_ channels.ReadMarker   = (*session)(nil)
	_ channels.Templater    = (*session)(nil)
)
