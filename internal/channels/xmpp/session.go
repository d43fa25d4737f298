package xmpp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/ping"
	"mellium.im/xmpp/stanza"
	"mellium.im/xmpp/stream"

	"github.com/switchboard/switchboard/internal/channels"
)

// State reasons: the stable first word of a failure's reason, as the instance shows it.
const (
	ReasonAuthFailed        = "auth_failed"
	ReasonServerUnreachable = "server_unreachable"
	ReasonTLSError          = "tls_error"
	ReasonStreamError       = "stream_error"
	// ReasonSinkError ends a connection whose delivery could not be stored; the server delivers it again.
	ReasonSinkError = "storage_error"
)

// session is one instance's connection. Run connects and serves; between two runs (a reconnect) it keeps what must
// outlive a connection: the rooms joined.
type session struct {
	p    *Provider
	inst channels.Instance
	cfg  config
	sink channels.Sink

	mu          sync.Mutex
	xs          *xmpp.Session // nil while not connected
	features    serverFeatures
	rooms       map[string]*room             // joined rooms by bare address
	joinWaiters map[string]chan joinResult   // joins waiting for the room's answer, by bare room address
	roster      map[string]string            // display names of contacts by bare address
	presence    map[string]map[string]string // resources online (and their show) by bare address
	lastSeen    map[string]time.Time         // time of the last message seen in each room

	sm streamManagement // touched by Run and the stanza handler only
}

// serverFeatures is what the server offered when the session connected.
type serverFeatures struct {
	blocking   bool
	upload     jid.JID // HTTP File Upload service (zero: none)
	uploadMax  int64   // its largest file, 0 when it does not say
	muc        jid.JID // multi-user chat service (zero: none)
	privateXML bool
	carbons    bool // message carbons (XEP-0280): the account's other clients' messages are copied here
	vcard      bool // vcard-temp (XEP-0054): accounts' cards, with their names, descriptions and photos
}

func newSession(p *Provider, inst channels.Instance, cfg config, sink channels.Sink) *session {
	return &session{
		p: p, inst: inst, cfg: cfg, sink: sink,
		rooms: map[string]*room{}, joinWaiters: map[string]chan joinResult{},
		roster: map[string]string{}, presence: map[string]map[string]string{}, lastSeen: map[string]time.Time{},
		sm: streamManagement{enabled: make(chan bool, 1)},
	}
}

// Capabilities reports what this instance can do on its server (channels.Discoverer): everything the provider lists,
// less media without an HTTP File Upload service, groups without a multi-user chat service and blocking without
// XEP-0191. Before the first connection it answers the provider's list.
func (s *session) Capabilities() []channels.Capability {
	s.mu.Lock()
	f, connected := s.features, s.xs != nil
	s.mu.Unlock()
	if !connected {
		return append([]channels.Capability(nil), capabilities...)
	}
	var out []channels.Capability
	for _, c := range capabilities {
		switch c {
		case channels.CapMedia:
			if f.upload.Equal(jid.JID{}) {
				continue
			}
		case channels.CapGroupsCreate, channels.CapGroupsManage, channels.CapGroupsInvite:
			if f.muc.Equal(jid.JID{}) {
				continue
			}
		case channels.CapContactsBlock:
			if !f.blocking {
				continue
			}
		case channels.CapContactsPicture, channels.CapProfileName, channels.CapProfileAbout, channels.CapProfilePicture:
			if !f.vcard {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// conn returns the live XMPP session or the not_connected failure.
func (s *session) conn() (*xmpp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.xs == nil {
		return nil, &channels.Failure{Code: "not_connected", Detail: "the XMPP connection is down", Retryable: true}
	}
	return s.xs, nil
}

// Run implements channels.Session.
func (s *session) Run(ctx context.Context) error {
	s.restore()
	defer s.handOver()
	connectCtx, cancel := context.WithTimeout(ctx, s.p.opts.ConnectTimeout)
	xs, err := s.dial(connectCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return s.fail(ctx, err)
	}
	served := make(chan error, 1)
	s.sm.reset()
	go func() { served <- xs.Serve(xmpp.HandlerFunc(s.handle)) }()
	stop := func() {
		s.mu.Lock()
		s.xs = nil
		s.mu.Unlock()
		_ = xs.Close()
		_ = xs.Conn().Close()
	}

	if err := s.setUp(ctx, xs); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil
		}
		select {
		case serr := <-served:
			if serr != nil {
				return s.fail(ctx, serr)
			}
		default:
		}
		return s.fail(ctx, err)
	}

	tick := time.NewTicker(s.p.opts.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// A clean goodbye: unavailable presence, then the end of the stream.
			byeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = xs.Send(byeCtx, stanza.Presence{Type: stanza.UnavailablePresence}.Wrap(nil))
			cancel()
			s.forgetSM()
			stop()
			<-served
			return nil
		case err := <-served:
			stop()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = io.EOF
			}
			return s.fail(ctx, err)
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, s.p.opts.PingTimeout)
			err := ping.Send(pctx, xs, jid.JID{})
			cancel()
			var se stanza.Error
			if err == nil || errors.As(err, &se) {
				s.sm.handled.Add(1)
			} else if ctx.Err() == nil {
				// An error answer is an answer; only silence means the connection is gone.
				stop()
				<-served
				return &channels.Failure{Code: ReasonServerUnreachable, Detail: "the server did not answer a ping", Retryable: true}
			}
		}
	}
}

// restore takes what the instance's previous session in this process left (see handover).
func (s *session) restore() {
	h, ok := s.p.take(s.inst.ID)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sm.id, s.sm.bound = h.smID, h.bound
	s.sm.handled.Store(h.smHandled)
	for room, at := range h.lastSeen {
		s.lastSeen[room] = at
	}
	for _, addr := range h.rooms {
		if j, err := jid.Parse(addr); err == nil {
			if _, ok := s.rooms[addr]; !ok {
				s.rooms[addr] = &room{addr: j, occupants: map[string]occupant{}}
			}
		}
	}
}

// handOver leaves the session's lasting state to the instance's next session.
func (s *session) handOver() {
	s.mu.Lock()
	h := handover{smID: s.sm.id, smHandled: s.sm.handled.Load(), bound: s.sm.bound, lastSeen: map[string]time.Time{}}
	for addr := range s.rooms {
		h.rooms = append(h.rooms, addr)
	}
	for room, at := range s.lastSeen {
		h.lastSeen[room] = at
	}
	s.mu.Unlock()
	s.p.leave(s.inst.ID, h)
}

// dial connects, secures, authenticates and binds.
func (s *session) dial(ctx context.Context) (*xmpp.Session, error) {
	origin, err := jid.New(s.cfg.JID.Localpart(), s.cfg.JID.Domainpart(), s.cfg.Resource)
	if err != nil {
		return nil, err
	}
	addrs := s.addresses(ctx)
	var conn net.Conn
	for _, a := range addrs {
		if conn, err = s.inst.Dialer(s.p.opts.Dial)(ctx, "tcp", a); err == nil {
			break
		}
	}
	if conn == nil {
		return nil, &channels.Failure{Code: ReasonServerUnreachable, Detail: "cannot connect to " + strings.Join(addrs, ", ") + ": " + dialDetail(err), Retryable: true}
	}
	mechanisms := []sasl.Mechanism{sasl.ScramSha256Plus, sasl.ScramSha1Plus, sasl.ScramSha256, sasl.ScramSha1}
	features := []xmpp.StreamFeature{xmpp.SASL("", s.cfg.Password, mechanisms...), bindResource(origin, s.resume)}
	var state xmpp.SessionState
	var rw net.Conn = conn
	if s.cfg.TLS == TLSDirect {
		tc := tls.Client(conn, s.cfg.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, &channels.Failure{Code: ReasonTLSError, Detail: err.Error(), Retryable: true}
		}
		rw, state = tc, xmpp.Secure
	} else {
		features = append([]xmpp.StreamFeature{xmpp.StartTLS(s.cfg.tlsConfig())}, features...)
	}
	xs, err := xmpp.NewSession(ctx, origin.Domain(), origin, rw, state, xmpp.NewNegotiator(func(*xmpp.Session, *xmpp.StreamConfig) xmpp.StreamConfig {
		return xmpp.StreamConfig{Features: features}
	}))
	if err != nil {
		conn.Close()
		return nil, err
	}
	return xs, nil
}

// bindResource binds origin's resource (RFC 6120 §7). mellium's BindResource sends an empty resource element when
// asked for a resource (v0.23.0), so the server would pick a random one and two holders of one instance would never
// be told of each other.
//
// resume, when not nil, is tried first: a resumed stream management session (XEP-0198) needs no binding.
func bindResource(origin jid.JID, resume func(*xmpp.Session) (bool, error)) xmpp.StreamFeature {
	f := xmpp.BindResource()
	f.Negotiate = func(ctx context.Context, session *xmpp.Session, _ any) (xmpp.SessionState, io.ReadWriter, error) {
		if resume != nil {
			if ok, err := resume(session); err != nil || ok {
				return xmpp.Ready, nil, err
			}
		}
		r := session.TokenReader()
		defer r.Close()
		w := session.TokenWriter()
		defer w.Close()
		id := newID()
		req := struct {
			XMLName xml.Name `xml:"iq"`
			ID      string   `xml:"id,attr"`
			Type    string   `xml:"type,attr"`
			Bind    struct {
				XMLName  xml.Name `xml:"urn:ietf:params:xml:ns:xmpp-bind bind"`
				Resource string   `xml:"resource"`
			}
		}{ID: id, Type: "set"}
		req.Bind.Resource = origin.Resourcepart()
		if _, err := xmlstream.Copy(w, rawTokens(req)); err != nil {
			return 0, nil, err
		}
		if err := w.Flush(); err != nil {
			return 0, nil, err
		}
		d := xml.NewTokenDecoder(r)
		var resp struct {
			ID    string `xml:"id,attr"`
			Type  string `xml:"type,attr"`
			Bound string `xml:"urn:ietf:params:xml:ns:xmpp-bind bind>jid"`
			Error *struct {
				Cond []struct {
					XMLName xml.Name
				} `xml:",any"`
			} `xml:"error"`
		}
		if err := d.Decode(&resp); err != nil {
			return 0, nil, err
		}
		switch {
		case resp.ID != id:
			return 0, nil, stream.UndefinedCondition
		case resp.Type == "error":
			cond := "undefined-condition"
			if resp.Error != nil && len(resp.Error.Cond) > 0 {
				cond = resp.Error.Cond[0].XMLName.Local
			}
			if cond == "conflict" {
				return 0, nil, stream.Conflict
			}
			return 0, nil, stanza.Error{Condition: stanza.Condition(cond)}
		}
		bound, err := jid.Parse(resp.Bound)
		if err != nil {
			return 0, nil, err
		}
		session.UpdateAddr(bound)
		return xmpp.Ready, nil, nil
	}
	return f
}

// resume asks the server to resume the previous connection's session (XEP-0198 §5), in place of binding. It
// reports false, without error, when there is nothing to resume or the server cannot.
func (s *session) resume(session *xmpp.Session) (bool, error) {
	s.mu.Lock()
	id, bound := s.sm.id, s.sm.bound
	s.mu.Unlock()
	if id == "" {
		s.sm.handled.Store(0) // a fresh session counts from its own <enabled/>
		return false, nil
	}
	r := session.TokenReader()
	defer r.Close()
	w := session.TokenWriter()
	defer w.Close()
	req := struct {
		XMLName xml.Name `xml:"urn:xmpp:sm:3 resume"`
		H       uint32   `xml:"h,attr"`
		PrevID  string   `xml:"previd,attr"`
	}{H: s.sm.handled.Load(), PrevID: id}
	if _, err := xmlstream.Copy(w, rawTokens(req)); err != nil {
		return false, err
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	var resp struct {
		XMLName xml.Name
	}
	if err := xml.NewTokenDecoder(r).Decode(&resp); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.sm.id = ""
	s.mu.Unlock()
	if resp.XMLName.Local != "resumed" {
		s.sm.handled.Store(0)
		return false, nil
	}
	s.mu.Lock()
	s.sm.id = id
	s.mu.Unlock()
	session.UpdateAddr(bound)
	s.sm.resumed.Store(true)
	s.sm.resumes.Add(1)
	return true, nil
}

// addresses are where the server is: the configured host:port, else the domain's SRV records, else the domain on the
// standard port.
func (s *session) addresses(ctx context.Context) []string {
	if s.cfg.Server != "" {
		return []string{s.cfg.Server}
	}
	domain := s.cfg.JID.Domainpart()
	service, port := "xmpp-client", "5222"
	if s.cfg.TLS == TLSDirect {
		service, port = "xmpps-client", "5223"
	}
	var out []string
	if _, srvs, err := net.DefaultResolver.LookupSRV(ctx, service, "tcp", domain); err == nil {
		for _, r := range srvs {
			if r.Target != "." {
				out = append(out, net.JoinHostPort(strings.TrimSuffix(r.Target, "."), strconv.Itoa(int(r.Port))))
			}
		}
	}
	return append(out, net.JoinHostPort(domain, port))
}

// dialDetail is a dial error without the local address the operating system names in it.
func dialDetail(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	if err == nil {
		return "no address"
	}
	return err.Error()
}

// fail classifies a connection's end. Bad credentials and a resource taken by another client end the session for
// good (reported as failed: retrying would lock the account or fight the other client); everything else is a
// *channels.Failure the runtime retries with backoff, its Code the state reason.
func (s *session) fail(ctx context.Context, err error) error {
	f := classify(err)
	if f.Retryable {
		return f
	}
	reason := f.Code
	if f.Code == ReasonStreamError {
		reason = f.Code + ": " + f.Detail
	}
	if serr := s.sink.State(ctx, channels.StatusFailed, reason); serr != nil {
		return serr
	}
	return nil
}

func classify(err error) *channels.Failure {
	var f *channels.Failure
	if errors.As(err, &f) {
		return f
	}
	var se stream.Error
	if errors.As(err, &se) {
		switch se.Err {
		case "conflict":
			return &channels.Failure{Code: ReasonStreamError, Detail: "conflict"}
		case "not-authorized":
			return &channels.Failure{Code: ReasonAuthFailed, Detail: "the server refused the account"}
		}
		return &channels.Failure{Code: ReasonStreamError, Detail: se.Err, Retryable: true}
	}
	var (
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) {
		return &channels.Failure{Code: ReasonTLSError, Detail: err.Error(), Retryable: true}
	}
	if cond, ok := saslCondition(err); ok {
		return &channels.Failure{Code: ReasonAuthFailed, Detail: cond}
	}
	msg := err.Error()
	if strings.Contains(msg, "no matching mechanisms") || strings.Contains(msg, "sasl:") {
		return &channels.Failure{Code: ReasonAuthFailed, Detail: msg}
	}
	if strings.Contains(msg, "starttls") || strings.Contains(msg, "tls:") {
		return &channels.Failure{Code: ReasonTLSError, Detail: msg, Retryable: true}
	}
	return &channels.Failure{Code: ReasonServerUnreachable, Detail: msg, Retryable: true}
}

// saslCondition finds a SASL failure (RFC 6120 §6.5) in err's chain. mellium reports it with a type of an internal
// package, whose message is the server's text when there is one; its Condition field names the condition.
func saslCondition(err error) (string, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct || !strings.HasSuffix(v.Type().PkgPath(), "/saslerr") {
			continue
		}
		if c := v.FieldByName("Condition"); c.IsValid() {
			if st, ok := c.Interface().(fmt.Stringer); ok {
				return st.String(), true
			}
		}
		return e.Error(), true
	}
	return "", false
}

// setUp runs once per connection, with Serve running: presence, what the server offers, the roster, the rooms to
// rejoin, and then the connected state.
func (s *session) setUp(ctx context.Context, xs *xmpp.Session) error {
	sctx, cancel := context.WithTimeout(ctx, s.p.opts.ConnectTimeout)
	defer cancel()
	s.mu.Lock()
	s.sm.bound = xs.LocalAddr()
	s.mu.Unlock()
	s.enableSM(sctx, xs)
	features := s.discover(sctx, xs)
	if features.carbons {
		err := s.query(sctx, xs, stanza.SetIQ, jid.JID{}, struct {
			XMLName xml.Name `xml:"urn:xmpp:carbons:2 enable"`
		}{}, nil)
		var se stanza.Error
		if err != nil && !errors.As(err, &se) {
			return err
		}
	}
	s.mu.Lock()
	s.xs, s.features = xs, features
	s.mu.Unlock()
	if err := s.loadRoster(sctx, xs); err != nil {
		return err
	}
	if err := xs.Send(sctx, stanza.Presence{}.Wrap(nil)); err != nil {
		return err
	}
	s.rejoinRooms(sctx, xs)
	account := channels.Party{Address: s.cfg.JID.Bare().String(), IDs: []string{xs.LocalAddr().String()}}
	creds, _ := json.Marshal(map[string]string{"jid": xs.LocalAddr().String()})
	return s.sink.Connected(ctx, account, creds)
}

// discover asks the server what it offers (disco#info of the domain, disco#items for its services).
func (s *session) discover(ctx context.Context, xs *xmpp.Session) serverFeatures {
	var f serverFeatures
	domain := s.cfg.JID.Domain()
	if info, err := s.discoInfo(ctx, xs, domain); err == nil {
		f.blocking = info.has(nsBlocking)
		f.carbons = info.has(nsCarbons)
		f.vcard = info.has(nsVCard)
		f.privateXML = true // jabber:iq:private is not always advertised; an error answer is handled where used
		if info.has(nsUpload) {
			f.upload, f.uploadMax = domain, info.uploadMax()
		}
	}
	items, _ := s.discoItems(ctx, xs, domain)
	for _, it := range items {
		j, err := jid.Parse(it.JID)
		if err != nil || it.Node != "" {
			continue
		}
		info, err := s.discoInfo(ctx, xs, j)
		if err != nil {
			continue
		}
		if f.upload.Equal(jid.JID{}) && info.has(nsUpload) {
			f.upload, f.uploadMax = j, info.uploadMax()
		}
		if f.muc.Equal(jid.JID{}) && info.has(nsMUC) && info.hasIdentity("conference", "text") {
			f.muc = j
		}
	}
	if !s.cfg.MUCService.Equal(jid.JID{}) {
		f.muc = s.cfg.MUCService
	}
	return f
}

// Logout implements channels.Session. An XMPP account has no session token to invalidate: the password stays valid,
// so logging out is ending the connection (what Run does when its context ends).
func (s *session) Logout(ctx context.Context) error {
	xs, err := s.conn()
	if err != nil {
		return nil
	}
	_ = xs.Send(ctx, stanza.Presence{Type: stanza.UnavailablePresence}.Wrap(nil))
	s.forgetSM()
	s.p.take(s.inst.ID)
	return xs.Close()
}

// handle is the Serve handler: every top-level element the server sends.
//
// With stream management on, a stanza counts as handled (and is acknowledged to the server) only once its handling
// returned without error: a sink that could not store a message ends the connection unacknowledged, and the server
// delivers the message again (to offline storage, then to the next session).
func (s *session) handle(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	if start.Name.Space == nsSM {
		return s.onSM(t, start)
	}
	d := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), t))
	ctx := context.Background()
	var err error
	switch start.Name.Local {
	case "message":
		var m inMessage
		if d.Decode(&m) == nil { // a malformed stanza is dropped by every client; it must not end the session
			err = s.onMessage(ctx, t, m)
		}
	case "presence":
		var p inPresence
		if d.Decode(&p) == nil {
			err = s.onPresence(ctx, t, p)
		}
	case "iq":
		var iq inIQ
		if d.Decode(&iq) == nil {
			err = s.onIQ(ctx, t, iq)
		}
	default:
		return nil
	}
	if err != nil {
		return &channels.Failure{Code: ReasonSinkError, Detail: err.Error(), Retryable: true}
	}
	s.sm.handled.Add(1)
	return nil
}

// streamManagement is the session's side of XEP-0198: how many stanzas from the server it handled, which it tells
// the server when asked. Stanzas are counted from the server's <enabled/>, which setUp waits for before sending
// anything that is answered; IQ answers (which mellium hands to the waiting call, not to the handler) are counted
// when the call returns with one.
type streamManagement struct {
	handled atomic.Uint32 // h, modulo 2^32 as the XEP counts
	enabled chan bool     // the server's answer to <enable/>
	on      atomic.Bool   // the server enabled it on this connection
	resumed atomic.Bool   // this connection resumed the previous one's session

	// What resuming takes: the server's id of the session (empty: not resumable) and the address it was bound to.
	// Written by the stanza handler and the negotiation, which never run at once.
	id    string
	bound jid.JID
	// resumes counts resumed connections.
	resumes atomic.Int32

	// Acknowledgement requests (<r/>) sent by sendAcked, oldest first; each <a/> answers the oldest. sendMu keeps a
	// stanza and its request together and the requests in the order of waiting.
	sendMu  sync.Mutex
	mu      sync.Mutex
	waiting []chan struct{}
}

// reset forgets a connection's state before the next one (the count and the session id stay, for resuming);
// requests still waiting fail by their timeout.
func (sm *streamManagement) reset() {
	sm.on.Store(false)
	sm.resumed.Store(false)
	select {
	case <-sm.enabled:
	default:
	}
	sm.mu.Lock()
	sm.waiting = nil
	sm.mu.Unlock()
}

// forgetSM drops the resumable session: the stream is being closed on purpose, so the server ends it.
func (s *session) forgetSM() {
	s.mu.Lock()
	s.sm.id = ""
	s.mu.Unlock()
}

func (s *session) onSM(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	switch start.Name.Local {
	case "enabled", "failed":
		s.sm.on.Store(start.Name.Local == "enabled")
		if start.Name.Local == "enabled" {
			var id, resume string
			for _, a := range start.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "resume":
					resume = a.Value
				}
			}
			if resume == "true" || resume == "1" {
				s.mu.Lock()
				s.sm.id = id
				s.mu.Unlock()
			}
		}
		select {
		case s.sm.enabled <- start.Name.Local == "enabled":
		default:
		}
	case "a":
		s.sm.mu.Lock()
		if len(s.sm.waiting) > 0 {
			close(s.sm.waiting[0])
			s.sm.waiting = s.sm.waiting[1:]
		}
		s.sm.mu.Unlock()
	case "r":
		return t.Encode(struct {
			XMLName xml.Name `xml:"urn:xmpp:sm:3 a"`
			H       uint32   `xml:"h,attr"`
		}{H: s.sm.handled.Load()})
	}
	return nil
}

// enableSM turns stream management on, resumable, when the server offers it. A connection lost without a goodbye is
// resumed by the next one (resume, from the binding); when it cannot be (the server forgot it, another process took
// the instance over), the new connection binds the same resource and the server hands what the old one left
// unacknowledged to offline storage and then to it.
func (s *session) enableSM(ctx context.Context, xs *xmpp.Session) {
	if s.sm.resumed.Load() {
		s.sm.on.Store(true)
		return
	}
	if _, offered := xs.Feature(nsSM); !offered {
		return
	}
	if err := xs.Send(ctx, tokens(struct {
		XMLName xml.Name `xml:"urn:xmpp:sm:3 enable"`
		Resume  bool     `xml:"resume,attr"`
	}{Resume: true})); err != nil {
		return
	}
	select {
	case <-s.sm.enabled:
	case <-ctx.Done():
	}
}

// inIQ is a request from the server or another entity.
type inIQ struct {
	XMLName xml.Name  `xml:"iq"`
	ID      string    `xml:"id,attr"`
	From    string    `xml:"from,attr"`
	Type    string    `xml:"type,attr"`
	Ping    *struct{} `xml:"urn:xmpp:ping ping"`
	Disco   *struct {
		Node string `xml:"node,attr"`
	} `xml:"http://jabber.org/protocol/disco#info query"`
	Roster  *rosterQuery `xml:"jabber:iq:roster query"`
	Block   *blockList   `xml:"urn:xmpp:blocking block"`
	Unblock *blockList   `xml:"urn:xmpp:blocking unblock"`
}

// The features this client announces when asked (disco#info).
var clientFeatures = []string{
	"http://jabber.org/protocol/disco#info", nsPing, nsReceipts, nsMarkers, nsCorrect, nsRetract, nsReactions,
	nsReply, nsOOB, nsMUC, "jabber:x:conference",
}

func (s *session) onIQ(ctx context.Context, t xmlstream.TokenReadEncoder, iq inIQ) error {
	if iq.Type != "get" && iq.Type != "set" {
		return nil
	}
	from := iq.From
	// Pushes (roster, blocklist) are only believed from our own account (the server speaks for it).
	ownPush := from == "" || from == s.cfg.JID.Bare().String()
	reply := func(payload any) error {
		return t.Encode(struct {
			XMLName xml.Name `xml:"iq"`
			ID      string   `xml:"id,attr"`
			To      string   `xml:"to,attr,omitempty"`
			Type    string   `xml:"type,attr"`
			Payload any
		}{ID: iq.ID, To: from, Type: "result", Payload: payload})
	}
	switch {
	case iq.Ping != nil:
		return reply(nil)
	case iq.Disco != nil && iq.Type == "get":
		q := discoInfoResult{Node: iq.Disco.Node, Identity: []discoIdentity{{Category: "client", Type: "bot", Name: "Switchboard"}}}
		for _, f := range clientFeatures {
			q.Features = append(q.Features, discoFeature{Var: f})
		}
		return reply(q)
	case iq.Roster != nil && iq.Type == "set" && ownPush:
		if err := reply(nil); err != nil {
			return err
		}
		for _, it := range iq.Roster.Items {
			s.rosterItem(ctx, it)
		}
		return nil
	case (iq.Block != nil || iq.Unblock != nil) && iq.Type == "set" && ownPush:
		return reply(nil)
	}
	return nil
}

// logf logs what a session cannot report anywhere else (a sink that refused an event is retried by the server's
// redelivery only for some stanzas).
func (s *session) logf(msg string, args ...any) {
	slog.Warn("xmpp: "+msg, append([]any{"instance", s.inst.ID}, args...)...)
}

// errorf is a failure of a call the network refused (not retryable).
func refusal(code string, format string, args ...any) *channels.Failure {
	return &channels.Failure{Code: code, Detail: fmt.Sprintf(format, args...)}
}
