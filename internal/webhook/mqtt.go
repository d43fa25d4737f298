package webhook

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"net"
	"net/url"
	"sync"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/switchboard/switchboard/internal/egress"
)

// mqttBroker publishes with MQTT 5 at QoS 1: a publish is delivered once the broker acknowledged it (PUBACK with a
// success code). The envelope's headers travel as user properties. One connection per endpoint.
type mqttBroker struct {
	guard *egress.Guard
	conns endpointConns[mqttConn, *mqttConn]
}

func newMQTT(guard *egress.Guard) *mqttBroker { return &mqttBroker{guard: guard} }

type mqttConn struct {
	sync.Mutex
	url    string
	client *paho.Client
}

func (m *mqttBroker) publish(ctx context.Context, endpointID string, d Destination, msg brokerMessage) error {
	c := m.conns.get(endpointID)
	c.Lock()
	defer c.Unlock()
	if c.client != nil {
		select {
		case <-c.client.Done():
			c.client = nil
		default:
		}
	}
	if c.client == nil || c.url != d.URL {
		c.reset()
		if err := c.open(ctx, m.guard, d.URL); err != nil {
			return err
		}
	}
	topic := d.Topic
	if topic == "" {
		topic = defaultTopic
	}
	props := &paho.PublishProperties{ContentType: "application/json"}
	for k, v := range msg.headers {
		props.User = append(props.User, paho.UserProperty{Key: k, Value: v})
	}
	res, err := c.client.Publish(ctx, &paho.Publish{QoS: 1, Topic: expand(topic, msg.event), Payload: msg.body,
		Properties: props})
	if err != nil {
		c.reset()
		if res != nil && res.ReasonCode >= 0x80 {
			return refused("the MQTT broker refused the message: reason code %#x", res.ReasonCode)
		}
		return err
	}
	// 0x10 (no matching subscribers) is a success: the broker took the message.
	if res.ReasonCode >= 0x80 {
		return refused("the MQTT broker refused the message: reason code %#x", res.ReasonCode)
	}
	return nil
}

// open dials the broker through the egress guard (TLS for mqtts:// and ssl://) and connects with the URL's
// credentials, as a client of its own (a clean session: QoS 1 state is the outbox's, not the broker's).
func (c *mqttConn) open(ctx context.Context, guard *egress.Guard, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		port := "1883"
		if u.Scheme == "mqtts" || u.Scheme == "ssl" {
			port = "8883"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	conn, err := guardedDial(ctx, guard, host)
	if err != nil {
		return err
	}
	if u.Scheme == "mqtts" || u.Scheme == "ssl" {
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return err
		}
		conn = packets.NewThreadSafeConn(tc)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	client := paho.NewClient(paho.ClientConfig{Conn: conn})
	cp := &paho.Connect{ClientID: "switchboard-" + hex.EncodeToString(id), CleanStart: true, KeepAlive: 30}
	if u.User != nil {
		cp.Username, cp.UsernameFlag = u.User.Username(), true
		if pw, ok := u.User.Password(); ok {
			cp.Password, cp.PasswordFlag = []byte(pw), true
		}
	}
	ack, err := client.Connect(ctx, cp)
	if err != nil {
		_ = conn.Close()
		if ack != nil && ack.ReasonCode >= 0x80 {
			return refused("the MQTT broker refused the connection: %s", ack.String())
		}
		return err
	}
	c.url, c.client = rawURL, client
	return nil
}

func (c *mqttConn) reset() {
	if c.client != nil {
		_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	c.client = nil
}

func (m *mqttBroker) close() { m.conns.close() }
