//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	waAdv "go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/types"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
)

// errOffline is what dialing WhatsApp gives on a machine without a network.
var errOffline = errors.New("connect: network is unreachable")

// offline is whatsmeow's real client whose websocket dials fail, as on a machine that cannot reach WhatsApp;
// dials counts the attempts.
func offline(dials *atomic.Int64) NewClient {
	return Real(RealOptions{Websocket: &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { dials.Add(1); return nil, errOffline },
	}}})
}

// The real client, offline: every Run fails at once with a retryable server_unreachable failure naming the cause
// (the channel runtime shows it as the reason of reconnecting and backs off), reports nothing, and leaves no
// goroutine behind over 100 attempts, for a paired device and for one still to pair.
func TestRealClientOfflineFailsCleanly(t *testing.T) {
	ctx := t.Context()
	db := sqlite(t)
	var dials atomic.Int64
	p := New(db, Options{NewClient: offline(&dials)})
	dev, err := p.devices.Device(ctx, types.EmptyJID)
	if err != nil {
		t.Fatal(err)
	}
	jid := types.JID{User: "15550100001", Server: types.DefaultUserServer, Device: 3}
	dev.ID, dev.LID = &jid, types.NewJID("200000000000001", types.HiddenUserServer)
	dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("d"), AccountSignatureKey: bytes.Repeat([]byte{1}, 32),
		AccountSignature: bytes.Repeat([]byte{2}, 64), DeviceSignature: bytes.Repeat([]byte{3}, 64)}
	if err := dev.Save(ctx); err != nil {
		t.Fatal(err)
	}
	paired := []byte(fmt.Sprintf(`{"jid":%q}`, jid.String()))

	attempt := func(creds []byte) {
		t.Helper()
		sink := &recorder{}
		s, err := p.Open(channels.Instance{ID: "inst_offline", Credentials: creds, Config: map[string]any{}}, sink)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Run(ctx)
		var f *channels.Failure
		if !errors.As(err, &f) || f.Code != "server_unreachable" || !f.Retryable || !bytes.Contains([]byte(f.Detail), []byte(errOffline.Error())) {
			t.Fatalf("Run offline returned %v; want a retryable server_unreachable failure naming the cause", err)
		}
		for _, c := range sink.all() {
			if c.kind != "state" || c.status != channels.StatusConnecting {
				t.Fatalf("Run offline reported %s", c)
			}
		}
	}
	attempt(paired) // the first attempt starts what lives as long as the process (the HTTP transport's pool)
	attempt(nil)
	before := runtime.NumGoroutine()
	for range 100 {
		attempt(paired)
	}
	for range 5 {
		attempt(nil)
	}
	if dials.Load() < 107 {
		t.Errorf("%d dials for 107 attempts: the client did not try to connect each time", dials.Load())
	}
	// Goroutines that end after Run returned (whatsmeow's event dispatch) are waited for, not slept on.
	await.Until(t, "the goroutines of 105 offline attempts to end", runtime.NumGoroutine, func(n int) bool { return n <= before })
}
