//go:build whatsapp_web

package whatsappweb

import (
	"context"

	"github.com/switchboard/switchboard/store"
)

// prepareCopy brings whatsmeow's schema of both databases to this binary's version with whatsmeow's own upgrade
// (the source's may be older, when no server of this version ran on it yet), and creates the device bindings, so
// the source's rows fit the destination's columns.
func prepareCopy(ctx context.Context, src, dst *store.DB, _ []string) error {
	if _, err := NewDevices(src).Container(ctx); err != nil {
		return err
	}
	_, err := NewDevices(dst).Container(ctx)
	return err
}
