//go:build whatsapp_web

package app

import (
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/whatsappweb"
)

// The WhatsApp Web provider, in binaries built with -tags whatsapp_web. Its devices live in the product's
// database; its media downloads and uploads go through the egress guard like every customer-driven request.
func init() {
	optionalProviders = append(optionalProviders, func(a *App) channels.Provider {
		return whatsappweb.New(a.DB, whatsappweb.Options{NewClient: whatsappweb.Real(whatsappweb.RealOptions{Media: a.Guard.Client(5 * time.Minute)})})
	})
}
