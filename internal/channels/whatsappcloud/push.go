package whatsappcloud

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// Receive answers Meta's URL check (GET, by the verify token) and applies a push (POST, by the app secret's
// X-Hub-Signature-256 over the raw body). Changes for another phone number (Meta sends everything of an app to its
// callback) are left alone: they belong to that number's instance.
func (p *Provider) Receive(ctx context.Context, inst channels.Instance, sink channels.Sink, push channels.Push) (channels.PushAnswer, error) {
	a := accountOf(inst)
	q := func(k string) string {
		if v := push.Query[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if push.Method == http.MethodGet {
		if q("hub.mode") != "subscribe" || a.verifyToken == "" ||
			subtle.ConstantTimeCompare([]byte(q("hub.verify_token")), []byte(a.verifyToken)) != 1 {
			return channels.PushAnswer{}, fmt.Errorf("%w: hub.verify_token does not match", channels.ErrPushUnverified)
		}
		return channels.PushAnswer{Challenge: q("hub.challenge")}, nil
	}
	if !signed(push, a.appSecret) {
		return channels.PushAnswer{}, fmt.Errorf("%w: X-Hub-Signature-256 does not verify with the app secret", channels.ErrPushUnverified)
	}
	var body notification
	if err := json.Unmarshal(push.Body, &body); err != nil {
		return channels.PushAnswer{}, &channels.Failure{Code: "invalid_push", Detail: "the body is not a WhatsApp notification: " + err.Error()}
	}
	g := &graph{http: inst.Client(p.opts.HTTP), a: a}
	applied := 0
	for _, e := range body.Entry {
		for _, c := range e.Changes {
			v := c.Value
			if c.Field != "messages" || v.Metadata.PhoneNumberID != a.phoneID {
				continue
			}
			names := map[string]string{}
			for _, ct := range v.Contacts {
				names[ct.WaID] = ct.Profile.Name
			}
			for _, m := range v.Messages {
				if err := sink.Inbound(ctx, inbound(g, m, names[m.From])); err != nil {
					return channels.PushAnswer{}, err
				}
				applied++
			}
			for _, st := range v.Statuses {
				r, ok := receipt(st)
				if !ok {
					continue
				}
				if err := sink.Receipt(ctx, r); err != nil {
					return channels.PushAnswer{}, err
				}
				applied++
			}
		}
	}
	return channels.PushAnswer{Applied: applied}, nil
}

// signed reports whether a push carries the HMAC-SHA256 of its raw body with the app secret.
func signed(push channels.Push, secret string) bool {
	got := http.Header(push.Header).Get("X-Hub-Signature-256")
	hexSig, ok := strings.CutPrefix(got, "sha256=")
	if !ok || secret == "" {
		return false
	}
	want, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(push.Body)
	return hmac.Equal(mac.Sum(nil), want)
}

// notification is a webhook push of the Cloud API (the messages field).
type notification struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value struct {
				Metadata struct {
					PhoneNumberID string `json:"phone_number_id"`
				} `json:"metadata"`
				Contacts []struct {
					WaID    string `json:"wa_id"`
					Profile struct {
						Name string `json:"name"`
					} `json:"profile"`
				} `json:"contacts"`
				Messages []waMessage `json:"messages"`
				Statuses []waStatus  `json:"statuses"`
			} `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type waMedia struct {
	ID       string `json:"id"`
	MIMEType string `json:"mime_type"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
}

type waMessage struct {
	From      string `json:"from"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Context   *struct {
		ID string `json:"id"`
	} `json:"context"`
	Text *struct {
		Body string `json:"body"`
	} `json:"text"`
	Image, Video, Audio, Document, Sticker *waMedia
	Location                               *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
		Address   string  `json:"address"`
	} `json:"location"`
	Contacts []struct {
		Name struct {
			FormattedName string `json:"formatted_name"`
		} `json:"name"`
		Phones []struct {
			Phone string `json:"phone"`
		} `json:"phones"`
	} `json:"contacts"`
	Reaction *struct {
		MessageID string `json:"message_id"`
		Emoji     string `json:"emoji"`
	} `json:"reaction"`
	Button *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button"`
	Interactive *struct {
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply"`
		ListReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"list_reply"`
	} `json:"interactive"`
}

type waStatus struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	Timestamp string    `json:"timestamp"`
	Errors    []waError `json:"errors"`
}

// waError is an error of a status report.
type waError struct {
	Code      int    `json:"code"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	ErrorData struct {
		Details string `json:"details"`
	} `json:"error_data"`
}

func unix(ts string) time.Time {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Now()
	}
	return time.Unix(n, 0)
}

// inbound is a person's message in the network-neutral shape. Media is fetched from Meta when the sink stores it.
func inbound(g *graph, m waMessage, name string) channels.Inbound {
	from := normalizeNumber(m.From)
	in := channels.Inbound{ProviderID: m.ID, Chat: from, From: channels.Party{Address: from, DisplayName: name},
		At: unix(m.Timestamp), Type: channels.TypeText}
	if m.Context != nil {
		in.ReplyTo = m.Context.ID
	}
	media := func(kind string, md *waMedia) {
		in.Type = channels.TypeMedia
		in.Media = &channels.Media{Kind: kind, MIMEType: md.MIMEType, Filename: md.Filename, Caption: md.Caption,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return g.download(ctx, md.ID) }}
	}
	switch {
	case m.Text != nil:
		in.Text = m.Text.Body
	case m.Image != nil:
		media("image", m.Image)
	case m.Video != nil:
		media("video", m.Video)
	case m.Audio != nil:
		media("audio", m.Audio)
	case m.Document != nil:
		media("document", m.Document)
	case m.Sticker != nil:
		media("sticker", m.Sticker)
	case m.Location != nil:
		in.Type = channels.TypeLocation
		in.Location = &channels.Location{Latitude: m.Location.Latitude, Longitude: m.Location.Longitude,
			Name: m.Location.Name, Address: m.Location.Address}
	case len(m.Contacts) > 0:
		in.Type = channels.TypeContact
		card := &channels.ContactCard{Name: m.Contacts[0].Name.FormattedName}
		for _, ph := range m.Contacts[0].Phones {
			card.Phones = append(card.Phones, ph.Phone)
		}
		in.Contact = card
	case m.Reaction != nil:
		in.Type, in.Target, in.Emoji = channels.TypeReaction, m.Reaction.MessageID, m.Reaction.Emoji
	case m.Button != nil:
		in.Text = m.Button.Text
	case m.Interactive != nil && m.Interactive.ButtonReply != nil:
		in.Text = m.Interactive.ButtonReply.Title
	case m.Interactive != nil && m.Interactive.ListReply != nil:
		in.Text = m.Interactive.ListReply.Title
	default:
		// An order, a poll, an unsupported type: kept as a message that says what it was, never dropped unseen.
		in.Text = "(a WhatsApp " + m.Type + " message, which Switchboard does not carry)"
	}
	return in
}

// receipt is a status of a sent message: delivered and read move it on, failed fails it with Meta's code (the
// failure codes of the send path); sent (Meta's acknowledgement, which the send already recorded) is skipped.
func receipt(st waStatus) (channels.Receipt, bool) {
	r := channels.Receipt{ProviderID: st.ID, Status: st.Status, At: unix(st.Timestamp)}
	switch st.Status {
	case "delivered", "read":
		return r, true
	case "failed":
		ge := &graphError{Status: http.StatusOK, Message: "the message could not be delivered"}
		if len(st.Errors) > 0 {
			e := st.Errors[0]
			ge.Code, ge.Message, ge.ErrorData.Details = e.Code, strings.TrimSpace(e.Title+" "+e.Message), e.ErrorData.Details
		}
		f, _ := failureOf(ge, "").(*channels.Failure)
		if f.Retryable { // a retryable code arriving as a final status is final all the same
			f.Retryable, f.RetryAfter = false, 0
		}
		r.Failure = f
		return r, true
	}
	return r, false
}

// download fetches the bytes of a media ID: its URL from the Graph API, then the bytes with the same token.
func (g *graph) download(ctx context.Context, id string) (io.ReadCloser, error) {
	var meta struct {
		URL string `json:"url"`
	}
	// The ID comes from the push: escaped, it names one object of the Graph API whatever it holds.
	if err := g.do(ctx, http.MethodGet, "/"+url.PathEscape(id), nil, "", &meta); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, meta.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.a.token)
	res, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("whatsapp_cloud: downloading media %s: HTTP %d", id, res.StatusCode)
	}
	return res.Body, nil
}
