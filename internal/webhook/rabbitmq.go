package webhook

import (
	"context"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/switchboard/switchboard/internal/egress"
)

// rabbitMQ publishes to RabbitMQ (AMQP 0-9-1): persistent messages, mandatory (an unroutable message is refused,
// not dropped) and confirmed by the broker, on one connection and confirm-mode channel per endpoint, one publish at
// a time so that a returned message is known to be the one just published.
type rabbitMQ struct {
	guard *egress.Guard
	conns endpointConns[amqpChannel, *amqpChannel]
}

func newRabbitMQ(guard *egress.Guard) *rabbitMQ { return &rabbitMQ{guard: guard} }

// amqpChannel is an endpoint's connection and channel, for the URL it was opened with.
type amqpChannel struct {
	sync.Mutex
	url     string
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

func (r *rabbitMQ) publish(ctx context.Context, endpointID string, d Destination, m brokerMessage) error {
	c := r.conns.get(endpointID)
	c.Lock()
	defer c.Unlock()
	if c.ch == nil || c.ch.IsClosed() || c.url != d.URL {
		c.reset()
		if err := c.open(ctx, r.guard, d.URL); err != nil {
			return err
		}
	}
	routingKey := d.RoutingKey
	if routingKey == "" {
		routingKey = defaultRoutingKey
	}
	headers := amqp.Table{}
	for k, v := range m.headers {
		headers[k] = v
	}
	conf, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, d.Exchange, expand(routingKey, m.event), true, false,
		amqp.Publishing{Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: m.event.ID, Type: m.event.Type, Timestamp: m.event.CreatedAt, Body: m.body})
	if err != nil {
		c.reset()
		return err
	}
	acked, err := conf.WaitContext(ctx)
	if err != nil {
		c.reset()
		return err
	}
	select {
	case ret, ok := <-c.returns:
		if !ok { // the channel closed: the broker's reason follows
			break
		}
		return refused("rabbitmq returned the message as unroutable (%d %s): no queue is bound to exchange %q for routing key %q",
			ret.ReplyCode, ret.ReplyText, d.Exchange, ret.RoutingKey)
	default:
	}
	if !acked {
		reason := "rabbitmq did not confirm the message"
		select {
		case cerr := <-c.closed:
			if cerr != nil {
				reason = "rabbitmq closed the channel: " + cerr.Error()
			}
		default:
		}
		c.reset()
		return refused("%s", reason)
	}
	return nil
}

// open connects through the egress guard and opens a channel in confirm mode.
func (c *amqpChannel) open(ctx context.Context, guard *egress.Guard, rawURL string) error {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US",
		Dial: func(_, addr string) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return guardedDial(dctx, guard, addr)
		}})
	if err != nil {
		if aerr, ok := err.(*amqp.Error); ok {
			return refused("rabbitmq refused the connection: %s", aerr.Error())
		}
		return err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return err
	}
	c.url, c.conn, c.ch = rawURL, conn, ch
	c.returns = ch.NotifyReturn(make(chan amqp.Return, 1))
	c.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	return nil
}

// reset closes the connection, if any: the next publish opens a new one.
func (c *amqpChannel) reset() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.conn, c.ch, c.returns, c.closed = nil, nil, nil, nil
}

func (r *rabbitMQ) close() { r.conns.close() }
