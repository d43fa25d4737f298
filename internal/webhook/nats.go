package webhook

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard/switchboard/internal/egress"
)

// natsJetStream publishes to NATS JetStream: each message is acknowledged by the stream that stored it, and carries
// Nats-Msg-Id = the event ID, so that JetStream drops a repeat within the stream's duplicate window (a retry after
// a lost acknowledgement, a delivery redelivered on purpose excepted). One connection per endpoint.
type natsJetStream struct {
	guard *egress.Guard
	conns endpointConns[natsConn, *natsConn]
}

func newNATS(guard *egress.Guard) *natsJetStream { return &natsJetStream{guard: guard} }

type natsConn struct {
	sync.Mutex
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// natsDialer dials NATS servers through the egress guard.
type natsDialer struct {
	guard *egress.Guard
}

func (d natsDialer) Dial(_, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return guardedDial(ctx, d.guard, address)
}

func (n *natsJetStream) publish(ctx context.Context, endpointID string, d Destination, m brokerMessage) error {
	c := n.conns.get(endpointID)
	c.Lock()
	defer c.Unlock()
	if c.nc == nil || !c.nc.IsConnected() || c.url != d.URL {
		c.reset()
		nc, err := nats.Connect(d.URL, nats.SetCustomDialer(natsDialer{n.guard}), nats.NoReconnect(),
			nats.Timeout(10*time.Second), nats.Name("switchboard"))
		if err != nil {
			if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
				return refused("nats refused the connection: %v", err)
			}
			return err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return err
		}
		c.url, c.nc, c.js = d.URL, nc, js
	}
	subject := d.Subject
	if subject == "" {
		subject = defaultSubject
	}
	msg := nats.NewMsg(expand(subject, m.event))
	msg.Data = m.body
	for k, v := range m.headers {
		msg.Header.Set(k, v)
	}
	msg.Header.Set("Content-Type", "application/json")
	msg.Header.Set(jetstream.MsgIDHeader, m.event.ID)
	_, err := c.js.PublishMsg(ctx, msg)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return refused("no JetStream stream captures subject %q", msg.Subject)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return refused("nats JetStream refused the message: %v", apiErr)
	}
	c.reset()
	return err
}

func (c *natsConn) reset() {
	if c.nc != nil {
		c.nc.Close()
	}
	c.nc, c.js = nil, nil
}

func (n *natsJetStream) close() { n.conns.close() }
