package whatsappweb

import (
	"strings"

	"github.com/switchboard/switchboard/store"
)

// CopyExtra is what migrate-data needs to carry the linked devices' sessions from SQLite to PostgreSQL: whatsmeow's
// tables and the device bindings are created by the provider, not by the migrations. A binary built with
// whatsapp_web creates them in the destination with whatsmeow's own upgrade and copies their rows; the default
// binary, which has no whatsmeow, refuses a source that holds them rather than leave every instance to pair again.
func CopyExtra() store.Extra {
	return store.Extra{
		Name:     "WhatsApp Web sessions",
		Owns:     ownsTable,
		Prepare:  prepareCopy,
		Versions: []string{"whatsmeow_version"},
	}
}

// ownsTable reports whether a table is the provider's: whatsmeow's (whatsmeow_*) or the device bindings.
func ownsTable(name string) bool {
	return strings.HasPrefix(name, "whatsmeow_") || name == "whatsapp_web_instances"
}
