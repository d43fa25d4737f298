package xmpp

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"strconv"
	"time"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"
)

// Namespaces of the extensions the provider speaks.
const (
	nsDiscoInfo  = "http://jabber.org/protocol/disco#info"
	nsDiscoItems = "http://jabber.org/protocol/disco#items"
	nsPing       = "urn:xmpp:ping"
	nsReceipts   = "urn:xmpp:receipts"                     // XEP-0184
	nsMarkers    = "urn:xmpp:chat-markers:0"               // XEP-0333
	nsCorrect    = "urn:xmpp:message-correct:0"            // XEP-0308
	nsRetract    = "urn:xmpp:message-retract:1"            // XEP-0424
	nsReactions  = "urn:xmpp:reactions:0"                  // XEP-0444
	nsReply      = "urn:xmpp:reply:0"                      // XEP-0461
	nsFallback   = "urn:xmpp:fallback:0"                   // XEP-0428
	nsHints      = "urn:xmpp:hints"                        // XEP-0334
	nsOOB        = "jabber:x:oob"                          // XEP-0066
	nsUpload     = "urn:xmpp:http:upload:0"                // XEP-0363
	nsBlocking   = "urn:xmpp:blocking"                     // XEP-0191
	nsMUC        = "http://jabber.org/protocol/muc"        // XEP-0045
	nsMUCUser    = "http://jabber.org/protocol/muc#user"   // XEP-0045
	nsMUCAdmin   = "http://jabber.org/protocol/muc#admin"  // XEP-0045
	nsMUCOwner   = "http://jabber.org/protocol/muc#owner"  // XEP-0045
	nsPrivate    = "jabber:iq:private"                     // XEP-0049
	nsDataForms  = "jabber:x:data"                         // XEP-0004
	nsRooms      = "urn:switchboard:xmpp:rooms:0"          // our rooms, kept in the account's private storage
	nsSM         = "urn:xmpp:sm:3"                         // XEP-0198
	nsCarbons    = "urn:xmpp:carbons:2"                    // XEP-0280
	nsChatStates = "http://jabber.org/protocol/chatstates" // XEP-0085
)

// idRef is an element that points at a message by its id.
type idRef struct {
	ID string `xml:"id,attr"`
}

// inMessage is a message stanza with the extensions the provider reads.
type inMessage struct {
	XMLName   xml.Name  `xml:"message"`
	ID        string    `xml:"id,attr"`
	From      string    `xml:"from,attr"`
	To        string    `xml:"to,attr"`
	Type      string    `xml:"type,attr"`
	Body      *string   `xml:"body"`
	Subject   *string   `xml:"subject"`
	Request   *struct{} `xml:"urn:xmpp:receipts request"`
	Received  *idRef    `xml:"urn:xmpp:receipts received"`
	Markable  *struct{} `xml:"urn:xmpp:chat-markers:0 markable"`
	Displayed *idRef    `xml:"urn:xmpp:chat-markers:0 displayed"`
	MarkerRcv *idRef    `xml:"urn:xmpp:chat-markers:0 received"`
	Replace   *idRef    `xml:"urn:xmpp:message-correct:0 replace"`
	// Chat states (XEP-0085): the sender types (composing) or stopped (paused).
	Composing *struct{} `xml:"http://jabber.org/protocol/chatstates composing"`
	Paused    *struct{} `xml:"http://jabber.org/protocol/chatstates paused"`
	Retract   *idRef    `xml:"urn:xmpp:message-retract:1 retract"`
	Reactions *struct {
		ID       string   `xml:"id,attr"`
		Reaction []string `xml:"reaction"`
	} `xml:"urn:xmpp:reactions:0 reactions"`
	Reply *struct {
		ID string `xml:"id,attr"`
		To string `xml:"to,attr"`
	} `xml:"urn:xmpp:reply:0 reply"`
	OOB *struct {
		URL  string `xml:"url"`
		Desc string `xml:"desc"`
	} `xml:"jabber:x:oob x"`
	MUCUser    *mucUserX `xml:"http://jabber.org/protocol/muc#user x"`
	Conference *struct {
		JID string `xml:"jid,attr"`
	} `xml:"jabber:x:conference x"`
	Delay *struct {
		Stamp string `xml:"stamp,attr"`
	} `xml:"urn:xmpp:delay delay"`
	Error *struct {
		Type string `xml:"type,attr"`
		Cond []struct {
			XMLName xml.Name
		} `xml:",any"`
	} `xml:"error"`
	// Message carbons (XEP-0280): copies of what the account's other clients sent and received.
	CarbonSent     *carbon `xml:"urn:xmpp:carbons:2 sent"`
	CarbonReceived *carbon `xml:"urn:xmpp:carbons:2 received"`
}

type carbon struct {
	Forwarded struct {
		Message *inMessage `xml:"message"`
	} `xml:"urn:xmpp:forward:0 forwarded"`
}

// at is when the message was sent: its delay stamp (offline storage, room history) or now.
func (m inMessage) at() time.Time {
	if m.Delay != nil {
		if t, err := time.Parse(time.RFC3339Nano, m.Delay.Stamp); err == nil {
			return t.UTC()
		}
	}
	return time.Now().UTC()
}

// mucUserX is the muc#user payload of room presences and messages.
type mucUserX struct {
	Items  []mucItem `xml:"item"`
	Status []struct {
		Code int `xml:"code,attr"`
	} `xml:"status"`
	Invite *struct {
		From   string `xml:"from,attr"`
		Reason string `xml:"reason"`
	} `xml:"invite"`
}

func (x *mucUserX) has(code int) bool {
	if x == nil {
		return false
	}
	for _, s := range x.Status {
		if s.Code == code {
			return true
		}
	}
	return false
}

type mucItem struct {
	JID         string `xml:"jid,attr,omitempty"`
	Nick        string `xml:"nick,attr,omitempty"`
	Affiliation string `xml:"affiliation,attr,omitempty"`
	Role        string `xml:"role,attr,omitempty"`
	Reason      string `xml:"reason,omitempty"`
}

// inPresence is a presence stanza.
type inPresence struct {
	XMLName xml.Name  `xml:"presence"`
	From    string    `xml:"from,attr"`
	Type    string    `xml:"type,attr"`
	Show    string    `xml:"show"`
	Status  string    `xml:"status"`
	MUCUser *mucUserX `xml:"http://jabber.org/protocol/muc#user x"`
	Error   *struct {
		Type string `xml:"type,attr"`
		Cond []struct {
			XMLName xml.Name
		} `xml:",any"`
	} `xml:"error"`
}

// rosterQuery is the roster (RFC 6121 §2).
type rosterQuery struct {
	XMLName xml.Name     `xml:"jabber:iq:roster query"`
	Items   []rosterItem `xml:"item"`
}

type rosterItem struct {
	JID          string `xml:"jid,attr"`
	Name         string `xml:"name,attr,omitempty"`
	Subscription string `xml:"subscription,attr,omitempty"`
}

type blockList struct {
	Items []struct {
		JID string `xml:"jid,attr"`
	} `xml:"item"`
}

type discoIdentity struct {
	Category string `xml:"category,attr"`
	Type     string `xml:"type,attr"`
	Name     string `xml:"name,attr,omitempty"`
}

type discoFeature struct {
	Var string `xml:"var,attr"`
}

type formField struct {
	Var    string   `xml:"var,attr"`
	Type   string   `xml:"type,attr,omitempty"`
	Values []string `xml:"value"`
}

type dataForm struct {
	XMLName xml.Name    `xml:"jabber:x:data x"`
	Type    string      `xml:"type,attr"`
	Fields  []formField `xml:"field"`
}

func (f dataForm) value(name string) string {
	for _, fl := range f.Fields {
		if fl.Var == name && len(fl.Values) > 0 {
			return fl.Values[0]
		}
	}
	return ""
}

// discoInfoResult is a disco#info answer (and the one this client gives).
type discoInfoResult struct {
	XMLName  xml.Name        `xml:"http://jabber.org/protocol/disco#info query"`
	Node     string          `xml:"node,attr,omitempty"`
	Identity []discoIdentity `xml:"identity"`
	Features []discoFeature  `xml:"feature"`
	Forms    []dataForm      `xml:"jabber:x:data x"`
}

func (i discoInfoResult) has(feature string) bool {
	for _, f := range i.Features {
		if f.Var == feature {
			return true
		}
	}
	return false
}

func (i discoInfoResult) hasIdentity(category, typ string) bool {
	for _, id := range i.Identity {
		if id.Category == category && id.Type == typ {
			return true
		}
	}
	return false
}

// uploadMax is the HTTP File Upload service's max-file-size (0 when it does not say).
func (i discoInfoResult) uploadMax() int64 {
	for _, f := range i.Forms {
		if v := f.value("max-file-size"); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// formValue is a field of the info's extended forms (XEP-0128), such as a room's description.
func (i discoInfoResult) formValue(name string) string {
	for _, f := range i.Forms {
		if v := f.value(name); v != "" {
			return v
		}
	}
	return ""
}

type discoItem struct {
	JID  string `xml:"jid,attr"`
	Node string `xml:"node,attr"`
	Name string `xml:"name,attr"`
}

// tokens marshals v for a mellium send call. The decoder resolves namespaces into the elements' names, and the
// stream's encoder declares them again from there, so the declarations themselves are dropped (else each element
// would carry its xmlns twice, which servers refuse as not well-formed).
func tokens(v any) xml.TokenReader {
	return nsDeduper{encoded(v)}
}

// encoded is v's XML, to be read as tokens. The provider's stanza types always marshal.
func encoded(v any) *xml.Decoder {
	var b bytes.Buffer
	if err := xml.NewEncoder(&b).Encode(v); err != nil {
		panic("xmpp: a stanza type does not marshal: " + err.Error())
	}
	return xml.NewDecoder(&b)
}

type nsDeduper struct{ d *xml.Decoder }

func (r nsDeduper) Token() (xml.Token, error) {
	tok, err := r.d.Token()
	if start, ok := tok.(xml.StartElement); ok {
		attrs := start.Attr[:0:0]
		for _, a := range start.Attr {
			if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
				continue
			}
			attrs = append(attrs, a)
		}
		start.Attr = attrs
		tok = start
	}
	return tok, err
}

// rawTokens marshals v for a writer that takes tokens as they are (no namespace translation), as the stream is
// during negotiation.
func rawTokens(v any) xml.TokenReader {
	return rawReader{encoded(v)}
}

type rawReader struct{ d *xml.Decoder }

func (r rawReader) Token() (xml.Token, error) { return r.d.RawToken() }

// query sends an IQ with payload to to and decodes the answer's payload into out (nil: ignored). An error answer is
// a stanza.Error. An answer counts as a handled stanza for stream management.
func (s *session) query(ctx context.Context, xs *xmpp.Session, typ stanza.IQType, to jid.JID, payload, out any) error {
	err := xs.UnmarshalIQElement(ctx, tokens(payload), stanza.IQ{Type: typ, To: to}, out)
	var se stanza.Error
	if err == nil || errors.As(err, &se) {
		s.sm.handled.Add(1)
	}
	return err
}

func (s *session) discoInfo(ctx context.Context, xs *xmpp.Session, to jid.JID) (discoInfoResult, error) {
	var out discoInfoResult
	err := s.query(ctx, xs, stanza.GetIQ, to, struct {
		XMLName xml.Name `xml:"http://jabber.org/protocol/disco#info query"`
	}{}, &out)
	return out, err
}

func (s *session) discoItems(ctx context.Context, xs *xmpp.Session, to jid.JID) ([]discoItem, error) {
	var out struct {
		Items []discoItem `xml:"item"`
	}
	err := s.query(ctx, xs, stanza.GetIQ, to, struct {
		XMLName xml.Name `xml:"http://jabber.org/protocol/disco#items query"`
	}{}, &out)
	return out.Items, err
}
