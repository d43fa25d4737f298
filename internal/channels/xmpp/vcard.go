package xmpp

import (
	"context"
	"crypto/sha1" // XEP-0153 names an avatar by the SHA-1 of its bytes
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"strings"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/switchboard/switchboard/internal/channels"
)

// nsVCard is vcard-temp (XEP-0054): an account's card with its name, description and photo, which servers keep
// for every account and most clients show as its profile.
const nsVCard = "vcard-temp"

var (
	_ channels.PictureReader = (*session)(nil)
	_ channels.PictureWriter = (*session)(nil)
	_ channels.ProfileEditor = (*session)(nil)
)

// maxVCardPhoto bounds a photo read from a vCard (servers cap them well below; XEP-0153 suggests a few KiB).
const maxVCardPhoto = 5 << 20

// vCard is the part of a vcard-temp card the provider reads and writes; Rest keeps every other element of the
// account's own card as it was, since a vCard is set whole.
type vCard struct {
	XMLName  xml.Name    `xml:"vcard-temp vCard"`
	FN       string      `xml:"FN,omitempty"`
	Nickname string      `xml:"NICKNAME,omitempty"`
	Desc     string      `xml:"DESC,omitempty"`
	Note     string      `xml:"NOTE,omitempty"`
	Photo    *vCardPhoto `xml:"PHOTO,omitempty"`
	Rest     []anyElem   `xml:",any"`
}

type vCardPhoto struct {
	Type   string `xml:"TYPE,omitempty"`
	BinVal string `xml:"BINVAL,omitempty"`
}

// anyElem is an element kept as it was read.
type anyElem struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Inner   []byte     `xml:",innerxml"`
}

// card reads the vCard of who (the zero JID: the account's own). A missing card is an empty one.
func (s *session) card(ctx context.Context, who jid.JID) (vCard, error) {
	xs, err := s.conn()
	if err != nil {
		return vCard{}, err
	}
	var out vCard
	err = s.query(ctx, xs, stanza.GetIQ, who, vCard{}, &out)
	var se stanza.Error
	if errors.As(err, &se) && (se.Condition == stanza.ItemNotFound || se.Condition == stanza.ServiceUnavailable) {
		return vCard{}, nil
	}
	return out, stanzaFailure(err, "reading the vCard")
}

// Picture is the photo of an account's vCard, named by its SHA-1 as XEP-0153 does; none when the card has none.
func (s *session) Picture(ctx context.Context, address string) (channels.Picture, error) {
	who, err := jid.Parse(address)
	if err != nil {
		return channels.Picture{}, refusal("invalid_address", "%s", err.Error())
	}
	c, err := s.card(ctx, who.Bare())
	if err != nil || c.Photo == nil || c.Photo.BinVal == "" {
		return channels.Picture{}, err
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(c.Photo.BinVal), ""))
	if err != nil || len(data) > maxVCardPhoto {
		return channels.Picture{}, nil // an unreadable photo is as none
	}
	sum := sha1.Sum(data)
	kind := c.Photo.Type
	if kind == "" {
		kind = "image/jpeg"
	}
	return channels.Picture{ID: hex.EncodeToString(sum[:]), MIMEType: kind, Data: data}, nil
}

// Profile is the account's own vCard: its nickname (else its full name) and description (else its note).
func (s *session) Profile(ctx context.Context) (channels.Profile, error) {
	c, err := s.card(ctx, jid.JID{})
	if err != nil {
		return channels.Profile{}, err
	}
	name, about := c.Nickname, c.Desc
	if name == "" {
		name = c.FN
	}
	if about == "" {
		about = c.Note
	}
	return channels.Profile{Name: &name, About: &about}, nil
}

// SetProfile writes the account's vCard with a new nickname and full name, or a new description: read, changed,
// set whole, so the card's other fields stay.
func (s *session) SetProfile(ctx context.Context, change channels.Profile) error {
	return s.editCard(ctx, func(c *vCard) {
		if change.Name != nil {
			c.Nickname, c.FN = *change.Name, *change.Name
		}
		if change.About != nil {
			// Some servers keep a vCard as vCard4, which has a note and no description: both are set.
			c.Desc, c.Note = *change.About, *change.About
		}
	})
}

// SetPicture sets or removes the photo of the account's own vCard. Rooms' pictures are not set: the provider does
// not list groups.picture.
func (s *session) SetPicture(ctx context.Context, target string, data []byte, mimeType string) (string, error) {
	if target != "" {
		return "", refusal("capability_not_supported", "setting a room's picture is not supported")
	}
	err := s.editCard(ctx, func(c *vCard) {
		c.Photo = nil
		if len(data) > 0 {
			c.Photo = &vCardPhoto{Type: mimeType, BinVal: base64.StdEncoding.EncodeToString(data)}
		}
	})
	if err != nil || len(data) == 0 {
		return "", err
	}
	sum := sha1.Sum(data)
	return hex.EncodeToString(sum[:]), nil
}

// editCard reads the account's own vCard, changes it and sets it back.
func (s *session) editCard(ctx context.Context, change func(*vCard)) error {
	c, err := s.card(ctx, jid.JID{})
	if err != nil {
		return err
	}
	change(&c)
	xs, err := s.conn()
	if err != nil {
		return err
	}
	return stanzaFailure(s.query(ctx, xs, stanza.SetIQ, jid.JID{}, c, nil), "setting the vCard")
}
