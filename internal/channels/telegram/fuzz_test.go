package telegram

import (
	"testing"

	"github.com/switchboard/switchboard/internal/channels/providertest"
)

func FuzzNormalizeAddress(f *testing.F) {
	providertest.FuzzNormalizeAddress(f, New(Options{}).NormalizeAddress,
		"123456789", "-1001234567890", "@Acme_Bot", "+1 (555) 010-0002", "15550100002", "0", "+0", "@", "-0", "  42 ")
}
