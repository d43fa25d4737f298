// Package xmpp is the messaging provider for XMPP (RFC 6120/6121) servers: an instance is one account (a JID and its
// password) on any standards-compliant server. It speaks to the server with mellium.im/xmpp and maps the network onto
// the channels seams: chat messages with delivery receipts (XEP-0184) and chat markers (XEP-0333), corrections
// (XEP-0308), retractions (XEP-0424), reactions (XEP-0444), replies (XEP-0461), media through HTTP File Upload
// (XEP-0363), groups as multi-user chat rooms (XEP-0045), contacts as the roster with presence, lookups by service
// discovery and blocking (XEP-0191). What a server offers is discovered per instance (Session.Capabilities).
package xmpp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/switchboard/switchboard/internal/channels"
)

// Name is the provider's name in the API.
const Name = "xmpp"

// TLS modes of an instance's config.
const (
	TLSStartTLS = "starttls" // plain TCP upgraded with STARTTLS (port 5222), the default
	TLSDirect   = "direct"   // TLS from the first byte (XEP-0368, port 5223)
)

// Defaults of Options.
const (
	DefaultPingInterval   = 30 * time.Second
	DefaultPingTimeout    = 15 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	DefaultUploadTimeout  = 2 * time.Minute
)

// Options are the operator's settings of the provider.
type Options struct {
	// Dial opens the TCP connection to a server. Servers are named by instance configs, that is by customers, so
	// serve passes the egress guard's DialContext; nil dials without a guard (tests).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// HTTP uploads media to the slots a server's HTTP File Upload service hands out (customer-controlled URLs too:
	// serve passes the egress guard's client); nil uses a plain client with DefaultUploadTimeout.
	HTTP *http.Client
	// PingInterval is how often a quiet connection is checked with an XMPP ping (XEP-0199); a ping unanswered
	// within PingTimeout ends the session with server_unreachable so that the runtime reconnects.
	PingInterval, PingTimeout time.Duration
	// ConnectTimeout bounds dialling and stream negotiation.
	ConnectTimeout time.Duration
}

// Provider is the XMPP provider. It is safe for concurrent use.
type Provider struct {
	opts Options

	mu        sync.Mutex
	handovers map[string]handover // by instance id
}

// handover is what one session of an instance leaves to the next in this process: the runtime opens a new session
// for every reconnect, and resuming the stream (XEP-0198), the rooms joined and the room history already seen must
// outlive the session object.
type handover struct {
	smID      string
	smHandled uint32
	bound     jid.JID
	rooms     []string
	lastSeen  map[string]time.Time
}

func (p *Provider) leave(id string, h handover) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handovers[id] = h
}

func (p *Provider) take(id string) (handover, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.handovers[id]
	delete(p.handovers, id)
	return h, ok
}

// New returns the provider with opts (zero values take the defaults).
func New(opts Options) *Provider {
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: DefaultUploadTimeout}
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.PingTimeout <= 0 {
		opts.PingTimeout = DefaultPingTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	return &Provider{opts: opts, handovers: map[string]handover{}}
}

// capabilities is everything an XMPP session can do; a connected session narrows it to what its server offers.
var capabilities = []channels.Capability{
	channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapReaction, channels.CapReply,
	channels.CapEdit, channels.CapDelete, channels.CapDelivered, channels.CapRead, channels.CapMarkRead,
	channels.CapGroupsCreate, channels.CapGroupsManage, channels.CapGroupsInvite,
	channels.CapContactsLookup, channels.CapContactsBlock, channels.CapAuthToken, channels.CapTyping, channels.CapProxy,
	channels.CapPresenceRecv, channels.CapContactsPicture, channels.CapProfileName, channels.CapProfileAbout,
	channels.CapProfilePicture,
}

// Info implements channels.Provider.
func (p *Provider) Info() channels.Info {
	return channels.Info{
		Name:  Name,
		Title: "XMPP",
		Description: "An account on any standards-compliant XMPP server (Prosody, ejabberd, Openfire, …). Media, " +
			"groups and blocking are used where the server offers them: an instance's capabilities come from the " +
			"server's service discovery.",
		Capabilities:   append([]channels.Capability(nil), capabilities...),
		AuthMethods:    []channels.AuthMethod{channels.AuthToken},
		ConfigSchema:   configSchema(),
		AddressFormat:  "XMPP address (JID) of an account, user@domain",
		AddressExample: "alice@example.org",
	}
}

func configSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"jid", "password"},
		"properties": map[string]any{
			"jid": map[string]any{
				"type": "string", "minLength": 3, "maxLength": 1023,
				"description": "The account's address, user@domain.", "examples": []any{"support@example.org"},
			},
			"password": map[string]any{
				"type": "string", "minLength": 1, "maxLength": 1024, "writeOnly": true,
				"description": "The account's password (authenticated with SCRAM; stored sealed, never returned).",
			},
			"server": map[string]any{
				"type": "string", "maxLength": 300,
				"description": "host:port to connect to; by default the domain's DNS SRV records, then the domain on " +
					"port 5222 (5223 with direct TLS).",
			},
			"tls": map[string]any{
				"type": "string", "enum": []any{TLSStartTLS, TLSDirect}, "default": TLSStartTLS,
				"description": "starttls: plain TCP upgraded with STARTTLS; direct: TLS from the first byte.",
			},
			"ca_certificate": map[string]any{
				"type": "string", "maxLength": 65536,
				"description": "PEM certificate(s) of a private certificate authority the server's certificate is " +
					"checked against, instead of the system's.",
			},
			"insecure_skip_verify": map[string]any{
				"type": "boolean", "default": false,
				"description": "Accept any server certificate. Anyone on the path can then read and change the " +
					"traffic; for test servers only. Shown in the instance when set.",
			},
			"muc_service": map[string]any{
				"type": "string", "maxLength": 1023,
				"description": "The multi-user chat service groups are created on (conference.example.org); " +
					"discovered from the server when absent.",
			},
			"resource": map[string]any{
				"type": "string", "maxLength": 64,
				"description": "The resource this connection binds; by default one derived from the instance.",
			},
			"auto_accept_subscriptions": map[string]any{
				"type": "boolean", "default": true,
				"description": "Approve presence subscription requests and subscribe back, so people who add the " +
					"account become contacts with presence.",
			},
		},
	}
}

// config is an instance's config, read from the JSON object the API stored.
type config struct {
	JID                jid.JID
	Password           string
	Server             string
	TLS                string
	CA                 *x509.CertPool
	InsecureSkipVerify bool
	MUCService         jid.JID
	Resource           string
	AutoAccept         bool
}

func parseConfig(raw map[string]any) (config, error) {
	c := config{TLS: TLSStartTLS, AutoAccept: true}
	str := func(key string) (string, error) {
		v, ok := raw[key]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string", key)
		}
		return strings.TrimSpace(s), nil
	}
	boolean := func(key string, def bool) (bool, error) {
		v, ok := raw[key]
		if !ok || v == nil {
			return def, nil
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s must be true or false", key)
		}
		return b, nil
	}
	s, err := str("jid")
	if err != nil {
		return c, err
	}
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" || j.Domainpart() == "" || j.Resourcepart() != "" {
		return c, errors.New("jid must be an account address, user@domain")
	}
	c.JID = j
	if v, ok := raw["password"].(string); ok {
		c.Password = v
	}
	if c.Password == "" {
		return c, errors.New("password is required")
	}
	if c.Server, err = str("server"); err != nil {
		return c, err
	}
	if c.Server != "" {
		host, port, err := net.SplitHostPort(c.Server)
		if err != nil || host == "" || port == "" {
			return c, errors.New("server must be host:port")
		}
	}
	if s, err = str("tls"); err != nil {
		return c, err
	}
	switch s {
	case "":
	case TLSStartTLS, TLSDirect:
		c.TLS = s
	default:
		return c, errors.New("tls must be starttls or direct")
	}
	if s, err = str("ca_certificate"); err != nil {
		return c, err
	}
	if s != "" {
		c.CA = x509.NewCertPool()
		if !c.CA.AppendCertsFromPEM([]byte(s)) {
			return c, errors.New("ca_certificate holds no PEM certificate")
		}
	}
	if c.InsecureSkipVerify, err = boolean("insecure_skip_verify", false); err != nil {
		return c, err
	}
	if c.AutoAccept, err = boolean("auto_accept_subscriptions", true); err != nil {
		return c, err
	}
	if s, err = str("muc_service"); err != nil {
		return c, err
	}
	if s != "" {
		m, err := jid.Parse(s)
		if err != nil || m.Localpart() != "" || m.Resourcepart() != "" {
			return c, errors.New("muc_service must be a service address, conference.example.org")
		}
		c.MUCService = m
	}
	if c.Resource, err = str("resource"); err != nil {
		return c, err
	}
	if c.Resource != "" {
		if _, err := jid.New(c.JID.Localpart(), c.JID.Domainpart(), c.Resource); err != nil {
			return c, errors.New("resource is not a valid XMPP resource")
		}
	}
	return c, nil
}

func (c config) tlsConfig() *tls.Config {
	return &tls.Config{
		ServerName:         c.JID.Domainpart(),
		RootCAs:            c.CA, // nil: the system's roots
		InsecureSkipVerify: c.InsecureSkipVerify,
		MinVersion:         tls.VersionTLS12,
	}
}

// ValidateConfig implements channels.Provider.
func (p *Provider) ValidateConfig(raw map[string]any) error {
	_, err := parseConfig(raw)
	return err
}

// NormalizeAddress implements channels.Provider: the bare JID in its canonical (PRECIS) form. An address with a
// resource is taken as the account it belongs to.
func (p *Provider) NormalizeAddress(raw string) (string, error) {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(raw), "xmpp:"))
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	j, err := jid.Parse(s)
	if err != nil || j.Domainpart() == "" {
		return "", errors.New("not an XMPP address (user@domain)")
	}
	if j.Localpart() == "" {
		return "", errors.New("an XMPP address names an account: user@domain")
	}
	out := j.Bare().String()
	// The parser drops one trailing dot of the domain, so "a@.." became "a@.", which is no address at all: a
	// normalized address must parse back to itself (the fuzz target found this).
	if d := j.Domainpart(); strings.Trim(d, ".") == "" || strings.Contains(d, "..") {
		return "", errors.New("not an XMPP address (user@domain): the domain has an empty label")
	}
	if again, err := jid.Parse(out); err != nil || again.Bare().String() != out {
		return "", errors.New("not an XMPP address (user@domain)")
	}
	return out, nil
}

// Open implements channels.Provider.
func (p *Provider) Open(inst channels.Instance, sink channels.Sink) (channels.Session, error) {
	cfg, err := parseConfig(inst.Config)
	if err != nil {
		return nil, err
	}
	if cfg.Resource == "" {
		// Stable per instance: a second process connecting the same instance takes the resource over, and the
		// first one is told (stream error conflict) instead of both receiving every message.
		cfg.Resource = "switchboard-" + strings.ToLower(strings.TrimPrefix(inst.ID, "ins_"))
	}
	return newSession(p, inst, cfg, sink), nil
}
