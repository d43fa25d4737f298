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
		d.container = c
	})
	return d.container, d.err
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
