package channels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// ProxySetting is the forward proxy an instance's connections go through: URL is http://host:port (CONNECT) or
// socks5://host:port; Password nil keeps the stored one on an update while URL and Username stay.
type ProxySetting struct {
	URL, Username string
	Password      *string
}

// setProxy checks a proxy for an instance of provider p and stores it on i, its password sealed for the instance.
// It returns a CapabilityNotSupported problem for a provider that cannot use one, and a ValidationFailed problem for
// a URL of the wrong form or a host the egress policy refuses.
func (s *Recorder) setProxy(ctx context.Context, p Provider, i *store.Instance, ps ProxySetting) error {
	if !p.Info().Has(CapProxy) {
		return notSupported(p.Info().Name, CapProxy)
	}
	px, err := egress.ParseProxy(ps.URL)
	if err == nil {
		err = s.guard.CheckProxy(ctx, px)
	}
	if err != nil {
		var errs problem.Fields
		switch {
		case errors.Is(err, egress.ErrBlocked):
			errs.Add("/proxy/url", "the proxy's host is not allowed: it is, or resolves to, an address the server's egress policy refuses")
		case errors.Is(err, egress.ErrUnresolvable):
			errs.Add("/proxy/url", "the proxy's host could not be resolved")
		default:
			errs.Add("/proxy/url", err.Error())
		}
		return errs.Err()
	}
	sameAccount := i.ProxyURL != nil && *i.ProxyURL == px.URL() && deref(i.ProxyUsername) == ps.Username
	url := px.URL()
	i.ProxyURL, i.ProxyUsername = &url, nonEmpty(ps.Username)
	switch {
	case ps.Password != nil:
		sealed := s.sealer.Seal([]byte(*ps.Password), proxyAD(i.ID))
		i.ProxySealedPassword = &sealed
	case !sameAccount:
		i.ProxySealedPassword = nil
	}
	return nil
}

// clearProxy removes an instance's proxy; it reports whether there was one.
func clearProxy(i *store.Instance) bool {
	had := i.ProxyURL != nil
	i.ProxyURL, i.ProxyUsername, i.ProxySealedPassword = nil, nil, nil
	return had
}

// proxyOf is the guard's way out through an instance's proxy (nil when it has none). The same proxy, user and
// sealed password give the same value, so that sessions and pushes of the instance share its connection pools.
func (s *Recorder) proxyOf(i store.Instance) (*egress.Proxied, error) {
	if i.ProxyURL == nil {
		return nil, nil
	}
	key := i.ID + "\x00" + *i.ProxyURL + "\x00" + deref(i.ProxyUsername) + "\x00" + deref(i.ProxySealedPassword)
	if v, ok := s.vias.Load(key); ok {
		return v.(*egress.Proxied), nil
	}
	px, err := egress.ParseProxy(*i.ProxyURL)
	if err != nil {
		return nil, fmt.Errorf("channels: instance %s: stored proxy: %w", i.ID, err)
	}
	px.Username = deref(i.ProxyUsername)
	if i.ProxySealedPassword != nil {
		b, err := s.sealer.Open(*i.ProxySealedPassword, proxyAD(i.ID))
		if err != nil {
			return nil, fmt.Errorf("channels: instance %s: the proxy password does not open with the server key: %w", i.ID, err)
		}
		px.Password = string(b)
	}
	v, _ := s.vias.LoadOrStore(key, s.guard.Via(px))
	return v.(*egress.Proxied), nil
}

// Dialer is how a session of the instance opens a TCP connection: through its proxy when it has one, else with
// direct.
func (i Instance) Dialer(direct func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	if i.Via == nil {
		return direct
	}
	return i.Via.DialContext
}

// Client is the HTTP client a session of the instance uses: one through its proxy, with c's timeout, when it has
// one, else c.
func (i Instance) Client(c *http.Client) *http.Client {
	if i.Via == nil {
		return c
	}
	return i.Via.Client(c.Timeout)
}

// proxyAD binds a sealed proxy password to its instance, apart from the instance's other secrets.
func proxyAD(id string) []byte { return []byte("proxy:" + id) }

// proxyAPI is an instance's proxy as the API shows it, without the password.
func proxyAPI(i store.Instance) *gen.InstanceProxySettings {
	if i.ProxyURL == nil {
		return nil
	}
	return &gen.InstanceProxySettings{Url: *i.ProxyURL, Username: i.ProxyUsername, PasswordSet: i.ProxySealedPassword != nil}
}
