package prosodytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/switchboard/switchboard/internal/await"
)

// Client is a plain XMPP client of an account, as a person's app: it keeps every stanza it receives, answers
// receipt requests when asked to, and sends raw XML.
type Client struct {
	t  testing.TB
	xs *xmpp.Session

	mu       sync.Mutex
	stanzas  []Stanza
	receipts bool
}

// Stanza is a received stanza: its name and main attributes, its body, and its XML to decode further.
type Stanza struct {
	Name               string // message, presence, iq
	ID, From, To, Type string
	Body               string
	RequestsReceipt    bool
	Raw                []byte
}

// Decode reads the stanza's XML into v.
func (s Stanza) Decode(v any) error { return xml.Unmarshal(s.Raw, v) }

// Dial connects a client of account (STARTTLS trusting the server's certificate, SCRAM, a resource of the
// server's choosing) and sends its initial presence. It disconnects when the test ends.
func (p *Server) Dial(account, password string) *Client {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		p.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(p.CAPEM))
	xs, err := xmpp.NewClientSession(ctx, jid.MustParse(account), conn,
		xmpp.StartTLS(&tls.Config{ServerName: p.Domain, RootCAs: pool, MinVersion: tls.VersionTLS12}),
		xmpp.SASL("", password, sasl.ScramSha1),
		xmpp.BindResource())
	if err != nil {
		p.t.Fatal(err)
	}
	c := &Client{t: p.t, xs: xs}
	go func() { _ = xs.Serve(xmpp.HandlerFunc(c.handle)) }()
	p.t.Cleanup(func() { xs.Close(); conn.Close() })
	c.Send(`<presence/>`)
	return c
}

// JID is the client's bound address.
func (c *Client) JID() jid.JID { return c.xs.LocalAddr() }

// AnswerReceipts makes the client answer receipt requests (XEP-0184) as messages arrive.
func (c *Client) AnswerReceipts() {
	c.mu.Lock()
	c.receipts = true
	c.mu.Unlock()
}

func (c *Client) handle(r xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	var buf bytes.Buffer
	e := xml.NewEncoder(&buf)
	if _, err := xmlstream.Copy(e, withoutDeclarations{xmlstream.MultiReader(xmlstream.Token(*start), r)}); err != nil {
		return nil
	}
	if e.Flush() != nil {
		return nil
	}
	var head struct {
		ID      string    `xml:"id,attr"`
		From    string    `xml:"from,attr"`
		To      string    `xml:"to,attr"`
		Type    string    `xml:"type,attr"`
		Body    string    `xml:"body"`
		Request *struct{} `xml:"urn:xmpp:receipts request"`
	}
	if xml.Unmarshal(buf.Bytes(), &head) != nil {
		return nil
	}
	s := Stanza{Name: start.Name.Local, ID: head.ID, From: head.From, To: head.To, Type: head.Type, Body: head.Body,
		RequestsReceipt: head.Request != nil, Raw: buf.Bytes()}
	c.mu.Lock()
	c.stanzas = append(c.stanzas, s)
	answer := c.receipts
	c.mu.Unlock()
	if answer && s.Name == "message" && s.RequestsReceipt && s.ID != "" {
		return r.Encode(struct {
			XMLName  xml.Name `xml:"message"`
			To       string   `xml:"to,attr"`
			Type     string   `xml:"type,attr,omitempty"`
			Received struct {
				XMLName xml.Name `xml:"urn:xmpp:receipts received"`
				ID      string   `xml:"id,attr"`
			}
		}{To: s.From, Type: s.Type, Received: struct {
			XMLName xml.Name `xml:"urn:xmpp:receipts received"`
			ID      string   `xml:"id,attr"`
		}{ID: s.ID}})
	}
	return nil
}

// Send writes one raw stanza to the client's stream, failing the test that dialled the client if it cannot.
func (c *Client) Send(raw string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, raw); err != nil {
		c.t.Fatalf("client send %s: %v", raw, err)
	}
}

// Write writes one raw stanza to the client's stream (for tests that run it from a subtest of the one that dialled
// the client, which must not fail that test from their goroutine).
func (c *Client) Write(ctx context.Context, raw string) error {
	return c.xs.Send(ctx, xml.NewDecoder(strings.NewReader(raw)))
}

// Wait waits for a received stanza that match accepts and returns it.
func (c *Client) Wait(what string, match func(Stanza) bool) Stanza {
	c.t.Helper()
	return await.Until(c.t, what, func() Stanza {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.stanzas {
			if match(s) {
				return s
			}
		}
		return Stanza{}
	}, func(s Stanza) bool { return s.Name != "" })
}

// withoutDeclarations drops namespace declarations from start elements: the decoder already resolved them into the
// names, from which the encoder declares them again.
type withoutDeclarations struct{ r xml.TokenReader }

func (w withoutDeclarations) Token() (xml.Token, error) {
	tok, err := w.r.Token()
	if start, ok := tok.(xml.StartElement); ok {
		attrs := make([]xml.Attr, 0, len(start.Attr))
		for _, a := range start.Attr {
			if a.Name.Space != "xmlns" && (a.Name.Space != "" || a.Name.Local != "xmlns") {
				attrs = append(attrs, a)
			}
		}
		start.Attr = attrs
		tok = start
	}
	return tok, err
}

// Received returns the stanzas received so far, oldest first.
func (c *Client) Received() []Stanza {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Stanza(nil), c.stanzas...)
}
