//go:build whatsapp_web

package whatsappweb

import (
	"testing"

	"github.com/switchboard/switchboard/internal/channels/providertest"
)

func FuzzNormalizeAddress(f *testing.F) {
	// NormalizeAddress reads no database: the provider is built over none.
	providertest.FuzzNormalizeAddress(f, New(nil, Options{}).NormalizeAddress,
		"+1 (555) 010-0002", "15550100002@s.whatsapp.net", "15550100002:12@s.whatsapp.net", "15550100002.0:3@s.whatsapp.net",
		"120363025246125486@g.us", "1234567890-1600000000@G.US", "123456789012345@lid", "123456789012345:7@lid",
		"@g.us", "+@s.whatsapp.net", "status@broadcast", "a@b@c", "+١٥٥٥٠١٠٠٠٠٢", "  +15550100002 ")
}
