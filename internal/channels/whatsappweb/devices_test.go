//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"fmt"
	"testing"

	waAdv "go.mau.fi/whatsmeow/proto/waAdv"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A device paired in one process is read back whole by another process's store, on both databases, through
// whatsmeow's own store interfaces; wiping it removes its rows from whatsmeow's tables.
func TestDeviceStoreRoundTripsAndWipes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		devices := NewDevices(db)
		saved := saveDevice(t, devices)
		jid := *saved.dev.ID

		other := NewDevices(db) // another process
		got := saved.check(t, other)
		if err := other.Wipe(ctx, got); err != nil {
			t.Fatal(err)
		}
		if ok, err := devices.Paired(ctx, jid); err != nil || ok {
			t.Errorf("the wiped device is still in the store (%v)", err)
		}
		for table, column := range map[string]string{"whatsmeow_sessions": "our_jid", "whatsmeow_identity_keys": "our_jid",
			"whatsmeow_pre_keys": "jid", "whatsmeow_device": "jid"} {
			var n int
			if err := db.Reader().NewRaw("SELECT count(*) FROM "+table+" WHERE "+column+" = ?", jid.String()).Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%s keeps %d rows of the wiped device", table, n)
			}
		}
		fresh, err := devices.Device(ctx, jid)
		if err != nil || fresh.ID != nil {
			t.Errorf("the wiped device's JID gives %v, %v; want a new unpaired device", fresh.ID, err)
		}
	})
}

// savedDevice is a paired device saved through whatsmeow's store, with a peer's identity and Signal session, its
// pre-keys and a LID mapping.
type savedDevice struct {
	dev  *wastore.Device
	peer string
	keys []*keys.PreKey
}

// saveDevice pairs a new device (its number is the test binary's own: the PostgreSQL database is shared) and saves
// it with a peer's identity and session, pre-keys and a LID mapping.
func saveDevice(t *testing.T, devices *Devices) savedDevice {
	t.Helper()
	ctx := t.Context()
	dev, err := devices.Device(ctx, types.EmptyJID)
	if err != nil {
		t.Fatal(err)
	}
	if dev.ID != nil {
		t.Fatal("a new device has an ID before pairing")
	}
	jid := types.JID{User: fmt.Sprintf("1555%07d", numbers.Add(1)), Server: types.DefaultUserServer, Device: 7}
	lid := types.NewJID("2000"+jid.User, types.HiddenUserServer)
	dev.ID, dev.LID, dev.PushName, dev.Platform = &jid, lid, "Me", "android"
	dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("details"), AccountSignatureKey: bytes.Repeat([]byte{1}, 32),
		AccountSignature: bytes.Repeat([]byte{2}, 64), DeviceSignature: bytes.Repeat([]byte{3}, 64)}
	if err := dev.Save(ctx); err != nil {
		t.Fatal(err)
	}
	peer := "4915112345678:0"
	if err := dev.Identities.PutIdentity(ctx, peer, [32]byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sessions.PutSession(ctx, peer, []byte("signal session")); err != nil {
		t.Fatal(err)
	}
	pre, err := dev.PreKeys.GetOrGenPreKeys(ctx, 3)
	if err != nil || len(pre) != 3 {
		t.Fatalf("pre-keys %d, %v", len(pre), err)
	}
	if err := dev.LIDs.PutLIDMapping(ctx, types.NewJID("200000000000099", types.HiddenUserServer),
		types.NewJID("4915112345678", types.DefaultUserServer)); err != nil {
		t.Fatal(err)
	}
	return savedDevice{dev: dev, peer: peer, keys: pre}
}

// check reads the device back through devices and fails unless it is the one saved, with its peer's identity and
// session and its pre-keys; it returns the device read.
func (s savedDevice) check(t *testing.T, devices *Devices) *wastore.Device {
	t.Helper()
	ctx := t.Context()
	dev := s.dev
	got, err := devices.Device(ctx, *dev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == nil || *got.ID != *dev.ID || got.LID != dev.LID || got.PushName != "Me" || got.Platform != "android" ||
		got.RegistrationID != dev.RegistrationID || *got.NoiseKey.Priv != *dev.NoiseKey.Priv ||
		*got.IdentityKey.Priv != *dev.IdentityKey.Priv || *got.SignedPreKey.Priv != *dev.SignedPreKey.Priv ||
		!bytes.Equal(got.AdvSecretKey, dev.AdvSecretKey) || !bytes.Equal(got.Account.Details, dev.Account.Details) {
		t.Fatal("the device read back differs from the one saved")
	}
	if b, err := got.Sessions.GetSession(ctx, s.peer); err != nil || string(b) != "signal session" {
		t.Errorf("the Signal session read back: %q, %v", b, err)
	}
	if ok, err := got.Identities.IsTrustedIdentity(ctx, s.peer, [32]byte{9}); err != nil || !ok {
		t.Errorf("the peer's identity is not the one saved (%v)", err)
	}
	if ok, _ := got.Identities.IsTrustedIdentity(ctx, s.peer, [32]byte{8}); ok {
		t.Error("another identity key is trusted for the peer")
	}
	if k, err := got.PreKeys.GetPreKey(ctx, s.keys[1].KeyID); err != nil || k == nil || *k.Priv != *s.keys[1].Priv {
		t.Errorf("a pre-key read back differs (%v)", err)
	}
	if pn, err := got.LIDs.GetPNForLID(ctx, types.NewJID("200000000000099", types.HiddenUserServer)); err != nil ||
		pn.User != "4915112345678" {
		t.Errorf("the LID mapping read back: %v, %v", pn, err)
	}
	return got
}
