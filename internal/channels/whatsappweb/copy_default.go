//go:build !whatsapp_web

package whatsappweb

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/store"
)

// prepareCopy refuses: a binary without the provider has no whatsmeow to create its tables in the destination.
func prepareCopy(_ context.Context, _, _ *store.DB, tables []string) error {
	return fmt.Errorf("the source holds WhatsApp Web sessions (tables %s) and this binary is built without the "+
		"WhatsApp Web provider, so it cannot create their tables in the destination: run migrate-data of the "+
		"whatsapp_web build (make build-whatsapp) to carry them", strings.Join(tables, ", "))
}
