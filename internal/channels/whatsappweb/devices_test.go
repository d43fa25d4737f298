//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"fmt"
	"testing"

	waAdv "go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/types"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A device paired in one process is read back whole by another process's store, on both databases, through
// whatsmeow's own store interfaces; wiping it removes its rows from whatsmeow's tables.
func TestDeviceStoreRoundTripsAndWipes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		devices := NewDevices(db)
		dev, err := devices.Device(ctx, types.EmptyJID)
		if err != nil {
			t.Fatal(err)
		}
		if dev.ID != nil {
			t.Fatal("a new device has an ID before pairing")
		}
		// The PostgreSQL database is the test binary's: each run pairs a number of its own.
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
		keys, err := dev.PreKeys.GetOrGenPreKeys(ctx, 3)
		if err != nil || len(keys) != 3 {
			t.Fatalf("pre-keys %d, %v", len(keys), err)
		}
		if err := dev.LIDs.PutLIDMapping(ctx, types.NewJID("200000000000099", types.HiddenUserServer),
			types.NewJID("4915112345678", types.DefaultUserServer)); err != nil {
			t.Fatal(err)
		}

		other := NewDevices(db) // another process
		got, err := other.Device(ctx, jid)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == nil || *got.ID != jid || got.LID != lid || got.PushName != "Me" || got.Platform != "android" ||
			got.RegistrationID != dev.RegistrationID || *got.NoiseKey.Priv != *dev.NoiseKey.Priv ||
			*got.IdentityKey.Priv != *dev.IdentityKey.Priv || *got.SignedPreKey.Priv != *dev.SignedPreKey.Priv ||
			!bytes.Equal(got.AdvSecretKey, dev.AdvSecretKey) || !bytes.Equal(got.Account.Details, dev.Account.Details) {
			t.Fatal("the device read back differs from the one saved")
		}
		if s, err := got.Sessions.GetSession(ctx, peer); err != nil || string(s) != "signal session" {
			t.Errorf("the Signal session read back: %q, %v", s, err)
		}
		if ok, err := got.Identities.IsTrustedIdentity(ctx, peer, [32]byte{9}); err != nil || !ok {
			t.Errorf("the peer's identity is not the one saved (%v)", err)
		}
		if ok, _ := got.Identities.IsTrustedIdentity(ctx, peer, [32]byte{8}); ok {
			t.Error("another identity key is trusted for the peer")
		}
		if k, err := got.PreKeys.GetPreKey(ctx, keys[1].KeyID); err != nil || k == nil || *k.Priv != *keys[1].Priv {
			t.Errorf("a pre-key read back differs (%v)", err)
		}

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
