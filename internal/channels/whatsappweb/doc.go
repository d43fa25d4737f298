// Package whatsappweb is the WhatsApp Web (multi-device) provider, whatsapp_web: an instance is a linked device of
// a WhatsApp account, paired by scanning a QR code with the phone or by typing a pairing code into it, and talks
// to WhatsApp's servers through go.mau.fi/whatsmeow.
//
// whatsmeow's dependency go.mau.fi/libsignal is GPL-3.0, so every file of the provider that imports whatsmeow is
// built only with the build tag whatsapp_web (make build-whatsapp); a binary built with it is distributed under
// GPL-3.0 as a whole. Without the tag this package is empty and the default binary links no GPL code.
package whatsappweb
