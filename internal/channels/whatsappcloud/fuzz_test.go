package whatsappcloud

import (
	"testing"

	"github.com/switchboard/switchboard/internal/channels/providertest"
)

func FuzzNormalizeAddress(f *testing.F) {
	providertest.FuzzNormalizeAddress(f, New(Options{}).NormalizeAddress,
		"+1 (555) 010-0002", "15550100002", "+44 20 7946 0958", "0044 20 7946 0958", "+0", "0", "+", "1-555-010-0002 ext 7",
		"+١٥٥٥٠١٠٠٠٠٢", "  +15550100002 ")
}
