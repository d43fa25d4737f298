//go:build whatsapp_web

package app_test

// taggedProviders are the providers of the build's tags: WhatsApp Web in a whatsapp_web build.
var taggedProviders = []string{"whatsapp_web"}
