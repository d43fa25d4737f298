//go:build !whatsapp_web

package app_test

// taggedProviders are the providers of the build's tags: none in the default build, which links no GPL code.
var taggedProviders []string
