package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

// Broker endpoint types (store.EndpointHTTPS is the other).
const (
	TypeRabbitMQ = "rabbitmq"
	TypeNATS     = "nats"
	TypeMQTT     = "mqtt"
)

// brokerSchemes are the URL schemes each broker type takes.
var brokerSchemes = map[string][]string{
	TypeRabbitMQ: {"amqp", "amqps"},
	TypeNATS:     {"nats", "tls"},
	TypeMQTT:     {"mqtt", "mqtts", "tcp", "ssl"},
}

// Default templates of where a broker destination publishes.
const (
	defaultRoutingKey = "{type}"
	defaultSubject    = "switchboard.{workspace}.{type}"
	defaultTopic      = "switchboard/{workspace}/{type}"
)

// ClassBrokerRefused: the broker answered but did not take the message (credentials, a missing exchange or stream,
// an unroutable message, a negative acknowledgement); the attempt log's excerpt says what it said.
const ClassBrokerRefused = "broker_refused"

// Destination is where a broker endpoint publishes, sealed in the endpoint's row: the broker URL with its
// credentials, and the exchange and routing key (RabbitMQ), subject (NATS) or topic (MQTT) templates.
type Destination struct {
	URL        string `json:"url"`
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routing_key,omitempty"`
	Subject    string `json:"subject,omitempty"`
	Topic      string `json:"topic,omitempty"`
}

// destinationAD is appended to the endpoint ID as the associated data of a sealed destination.
const destinationAD = ":destination"

// sealDestination seals a destination for an endpoint.
func sealDestination(b *sealbox.Box, d Destination, endpointID string) *string {
	plain, _ := json.Marshal(d) // strings only
	sealed := b.Seal(plain, []byte(endpointID+destinationAD))
	return &sealed
}

// OpenDestination opens a broker endpoint's destination. Returns sealbox.ErrOpen if it does not open.
func OpenDestination(b *sealbox.Box, e store.WebhookEndpoint) (Destination, error) {
	if e.Destination == nil {
		return Destination{}, sealbox.ErrOpen
	}
	plain, err := b.Open(*e.Destination, []byte(e.ID+destinationAD))
	if err != nil {
		return Destination{}, err
	}
	var d Destination
	if err := json.Unmarshal(plain, &d); err != nil {
		return Destination{}, sealbox.ErrOpen
	}
	return d, nil
}

// IsBroker reports whether an endpoint type is a message broker's.
func IsBroker(typ string) bool { _, ok := brokerSchemes[typ]; return ok }

// withoutPassword is a broker URL as people see it: the user name stays, the password goes.
func withoutPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

// checkDestination records what is wrong with a broker destination: a URL of another scheme, without a host, or
// whose host the egress policy does not allow (checked like an https receiver's).
func (s *Service) checkDestination(ctx context.Context, typ string, d Destination, bad *problem.Fields) {
	u, err := url.Parse(d.URL)
	if err != nil || u.Host == "" {
		bad.Add("/url", "must be an absolute URL with a host")
		return
	}
	if !slices.Contains(brokerSchemes[typ], u.Scheme) {
		bad.Add("/url", fmt.Sprintf("a %s destination's URL starts with %s://", typ, strings.Join(brokerSchemes[typ], ":// or ")))
		return
	}
	if err := s.guard.CheckURL(ctx, "https://"+u.Host+"/"); err != nil {
		msg := "the host is not allowed"
		if errors.Is(err, egress.ErrUnresolvable) {
			msg = "the host does not resolve"
		}
		bad.Add("/url", msg)
	}
	for _, t := range []string{d.RoutingKey, d.Subject, d.Topic} {
		if strings.ContainsAny(t, " \t\r\n\x00") {
			bad.Add("/"+typ, "templates cannot hold spaces or control characters")
		}
	}
}

// expand fills a destination template for an event.
func expand(template string, ev store.Event) string {
	return strings.NewReplacer("{type}", ev.Type, "{workspace}", ev.WorkspaceID).Replace(template)
}

// brokerMessage is what every broker is sent for a delivery: the envelope and the Standard Webhooks headers.
type brokerMessage struct {
	event   store.Event
	body    []byte
	headers map[string]string
}

// publisher publishes to one kind of broker, keeping a connection per endpoint between attempts.
type publisher interface {
	// publish returns once the broker confirmed the message, or with why it did not.
	publish(ctx context.Context, endpointID string, d Destination, m brokerMessage) error
	close()
}

// endpointConns are a publisher's connections, one per endpoint (T is the connection type, with its own lock, used
// one publish at a time).
type endpointConns[T any, P interface {
	*T
	sync.Locker
	reset()
}] struct {
	mu sync.Mutex
	m  map[string]P
}

// get returns an endpoint's connection, an unopened one the first time.
func (p *endpointConns[T, P]) get(endpointID string) P {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]P{}
	}
	c, ok := p.m[endpointID]
	if !ok {
		c = P(new(T))
		p.m[endpointID] = c
	}
	return c
}

// close closes every connection.
func (p *endpointConns[T, P]) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.m {
		c.Lock()
		c.reset()
		c.Unlock()
	}
	p.m = nil
}

// brokers holds the publishers of a Sender, each with its connections.
type brokers struct {
	guard *egress.Guard
	mu    sync.Mutex
	pubs  map[string]publisher
}

func (b *brokers) publisher(typ string) publisher {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.pubs[typ]; ok {
		return p
	}
	var p publisher
	switch typ {
	case TypeRabbitMQ:
		p = newRabbitMQ(b.guard)
	case TypeNATS:
		p = newNATS(b.guard)
	case TypeMQTT:
		p = newMQTT(b.guard)
	default:
		return nil
	}
	if b.pubs == nil {
		b.pubs = map[string]publisher{}
	}
	b.pubs[typ] = p
	return p
}

func (b *brokers) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pubs {
		p.close()
	}
	b.pubs = nil
}

// publish is Send for a broker endpoint: the envelope, signed like a webhook, published and confirmed.
func (s *Sender) publish(ctx context.Context, e store.WebhookEndpoint, ev store.Event) (Sent, error) {
	keys, err := s.signingKeys(e, time.Now())
	if err != nil {
		return Sent{}, err
	}
	d, err := OpenDestination(s.box, e)
	if err != nil {
		return Sent{}, err
	}
	body, err := Body(ev)
	if err != nil {
		return Sent{}, err
	}
	p := s.brokers.publisher(e.Type)
	if p == nil {
		return Sent{}, fmt.Errorf("webhook: endpoint %s has the unknown type %q", e.ID, e.Type)
	}
	start := time.Now()
	signature := Sign(keys, ev.ID, start, body)
	headers := map[string]string{}
	for name, values := range Headers(ev.ID, start, signature) {
		headers[strings.ToLower(name)] = values[0]
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = p.publish(ctx, e.ID, d, brokerMessage{event: ev, body: body, headers: headers})
	r := Sent{StartedAt: start, Duration: time.Since(start), Signature: signature, Outcome: Outcome{Result: Delivered}}
	if err != nil {
		class := ClassBrokerRefused
		var refused *brokerRefusal
		if !errors.As(err, &refused) {
			class = errorClass(err)
		}
		if errors.Is(err, egress.ErrBlocked) {
			class = ClassBlocked
		}
		reason := cutText([]byte(err.Error()), ExcerptLen)
		r.Outcome, r.Excerpt = Outcome{Result: Failed, Class: class}, &reason
	}
	return r, nil
}

// brokerRefusal is an answer of a broker that refused a message (as opposed to a connection that failed).
type brokerRefusal struct{ reason string }

func (e *brokerRefusal) Error() string { return e.reason }

func refused(format string, args ...any) error {
	return &brokerRefusal{reason: fmt.Sprintf(format, args...)}
}

// guardedDial dials a broker's host:port under the egress policy, within ctx.
func guardedDial(ctx context.Context, guard *egress.Guard, address string) (net.Conn, error) {
	conn, err := guard.DialContext(ctx, "tcp", address)
	if errors.Is(err, egress.ErrBlocked) {
		return nil, fmt.Errorf("%w: %w", ErrBlocked, err)
	}
	return conn, err
}
