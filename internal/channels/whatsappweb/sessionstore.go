//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"

	sbstore "github.com/switchboard/switchboard/store"
)

// Devices is where the linked devices' identities, Signal sessions, pre-keys and app state live: whatsmeow's own
// SQL store, in its own tables (whatsmeow_*, versioned in whatsmeow_version) of the product's database, on SQLite
// and on PostgreSQL alike. Everything in them is session material: it is never logged, and a device's rows go
// when the instance logs out or is logged out by the phone.
type Devices struct {
	db        *sbstore.DB
	once      sync.Once
	container *sqlstore.Container
	err       error
}

// NewDevices returns the device store over the product's database; its tables are created or upgraded on first
// use.
func NewDevices(db *sbstore.DB) *Devices { return &Devices{db: db} }

// Container returns whatsmeow's container, its tables migrated.
func (d *Devices) Container(ctx context.Context) (*sqlstore.Container, error) {
	d.once.Do(func() {
		dialect := "postgres"
		if d.db.Dialect() == sbstore.SQLite {
			// The product's writer connection: SQLite has one writer, and whatsmeow's writes must queue behind the
			// product's rather than fail with SQLITE_BUSY on a second connection.
			dialect = "sqlite3"
		}
		// whatsmeow's logger is off: its debug output carries keys and message contents.
		c := sqlstore.NewWithDB(d.db.Bun().DB, dialect, waLog.Noop)
		if err := c.Upgrade(ctx); err != nil {
			d.err = fmt.Errorf("whatsapp_web: migrating the device store: %w", err)
			return
		}
		if _, err := d.db.Bun().ExecContext(ctx, bindingsTable); err != nil {
			d.err = fmt.Errorf("whatsapp_web: creating the device bindings: %w", err)
			return
		}
		d.container = c
	})
	return d.container, d.err
}

// bindingsTable says which instance each device is: deleting an instance whose session is not live (disconnected,
// failed) does not reach the provider, so Sweep finds the devices of instances that are gone and deletes them.
const bindingsTable = `CREATE TABLE IF NOT EXISTS whatsapp_web_instances (
	instance_id TEXT PRIMARY KEY,
	jid         TEXT NOT NULL
)`

// Bind records that the instance is the device jid; a device the instance was before is deleted.
func (d *Devices) Bind(ctx context.Context, instanceID string, jid types.JID) error {
	c, err := d.Container(ctx)
	if err != nil {
		return err
	}
	var before []string
	if err := d.db.Bun().NewRaw("SELECT jid FROM whatsapp_web_instances WHERE instance_id = ?", instanceID).
		Scan(ctx, &before); err != nil {
		return fmt.Errorf("whatsapp_web: reading the device binding: %w", err)
	}
	for _, old := range before {
		if old == jid.String() {
			return nil
		}
		if err := d.wipeJID(ctx, c, old); err != nil {
			return err
		}
	}
	if _, err := d.db.Bun().ExecContext(ctx, "DELETE FROM whatsapp_web_instances WHERE instance_id = ?", instanceID); err != nil {
		return fmt.Errorf("whatsapp_web: binding the device: %w", err)
	}
	if _, err := d.db.Bun().ExecContext(ctx, "INSERT INTO whatsapp_web_instances (instance_id, jid) VALUES (?, ?)",
		instanceID, jid.String()); err != nil {
		return fmt.Errorf("whatsapp_web: binding the device: %w", err)
	}
	return nil
}

// Sweep deletes the devices of instances that no longer exist, and their bindings. It returns how many it deleted.
func (d *Devices) Sweep(ctx context.Context) (int, error) {
	c, err := d.Container(ctx)
	if err != nil {
		return 0, err
	}
	var gone []struct {
		InstanceID string `bun:"instance_id"`
		JID        string `bun:"jid"`
	}
	if err := d.db.Bun().NewRaw(`SELECT b.instance_id, b.jid FROM whatsapp_web_instances b
		LEFT JOIN instances i ON i.id = b.instance_id WHERE i.id IS NULL`).Scan(ctx, &gone); err != nil {
		return 0, fmt.Errorf("whatsapp_web: finding the devices of deleted instances: %w", err)
	}
	for _, g := range gone {
		if err := d.wipeJID(ctx, c, g.JID); err != nil {
			return 0, err
		}
		if _, err := d.db.Bun().ExecContext(ctx, "DELETE FROM whatsapp_web_instances WHERE instance_id = ?", g.InstanceID); err != nil {
			return 0, fmt.Errorf("whatsapp_web: deleting a device binding: %w", err)
		}
	}
	return len(gone), nil
}

// wipeJID deletes the device jid names, when it still has rows.
func (d *Devices) wipeJID(ctx context.Context, c *sqlstore.Container, raw string) error {
	jid, err := types.ParseJID(raw)
	if err != nil {
		return nil // no device could have been saved under it
	}
	dev, err := c.GetDevice(ctx, jid)
	if err != nil {
		return fmt.Errorf("whatsapp_web: reading a device to delete: %w", err)
	}
	return d.Wipe(ctx, dev)
}

// Device returns the device paired as jid, or a new unpaired device when jid is empty or its rows are gone (the
// instance logged out, or the phone removed the device).
func (d *Devices) Device(ctx context.Context, jid types.JID) (*store.Device, error) {
	c, err := d.Container(ctx)
	if err != nil {
		return nil, err
	}
	if !jid.IsEmpty() {
		dev, err := c.GetDevice(ctx, jid)
		if err != nil {
			return nil, fmt.Errorf("whatsapp_web: reading the device: %w", err)
		}
		if dev != nil {
			return dev, nil
		}
	}
	return c.NewDevice(), nil
}

// Paired reports whether the device jid has its rows in the store.
func (d *Devices) Paired(ctx context.Context, jid types.JID) (bool, error) {
	c, err := d.Container(ctx)
	if err != nil {
		return false, err
	}
	dev, err := c.GetDevice(ctx, jid)
	return dev != nil, err
}

// Wipe deletes a device's rows: its identity, sessions, keys and app state (whatsmeow's tables cascade from the
// device row). A device that was never saved has none.
func (d *Devices) Wipe(ctx context.Context, dev *store.Device) error {
	if dev == nil || dev.ID == nil || dev.Deleted {
		return nil
	}
	if err := dev.Delete(ctx); err != nil && !errors.Is(err, store.ErrDeviceDeleted) {
		return fmt.Errorf("whatsapp_web: deleting the device: %w", err)
	}
	return nil
}
