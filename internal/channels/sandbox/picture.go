package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// pictureSize is the side of a sandbox account's profile picture, in pixels (a 5×5 pattern, mirrored, scaled up).
const pictureSize = 80

// Picture is the profile picture of a sandbox account: the one it set, or else a pattern drawn from its number and
// display name, so the same account has the same picture and a new display name a new one. Numbers without an
// account have none; a group has the picture its participants set, if any.
func (s *session) Picture(ctx context.Context, address string) (channels.Picture, error) {
	if _, number := s.live(); number == "" {
		return channels.Picture{}, notConnected()
	}
	if isGroup(address) {
		g, err := s.p.net.Group(ctx, s.p.net.Reader(), address)
		if errors.Is(err, store.ErrNotFound) {
			return channels.Picture{}, nil
		}
		if err != nil {
			return channels.Picture{}, err
		}
		pic, _ := storedPicture(g.Picture, g.PictureType)
		return pic, nil
	}
	n, err := normalizeNumber(address)
	if err != nil {
		return channels.Picture{}, nil
	}
	accounts, err := s.p.net.Accounts(ctx, s.p.net.Reader(), []string{n})
	if err != nil || len(accounts) == 0 {
		return channels.Picture{}, err
	}
	if pic, ok := storedPicture(accounts[0].Picture, accounts[0].PictureType); ok {
		return pic, nil // the one the account set
	}
	sum := sha256.Sum256([]byte(accounts[0].Number + "\x00" + accounts[0].DisplayName))
	data, err := identicon(sum)
	if err != nil {
		return channels.Picture{}, err
	}
	return channels.Picture{ID: hex.EncodeToString(sum[:8]), MIMEType: "image/png", Data: data}, nil
}

// identicon draws a symmetric 5×5 pattern of the hash's bits in a colour of its bytes.
func identicon(sum [32]byte) ([]byte, error) {
	img := image.NewPaletted(image.Rect(0, 0, pictureSize, pictureSize),
		color.Palette{color.RGBA{240, 240, 244, 255}, color.RGBA{sum[0] | 64, sum[1] & 191, sum[2] | 32, 255}})
	cell := pictureSize / 5
	for y := range 5 {
		for x := range 3 {
			if sum[3+y*3+x]&1 == 0 {
				continue
			}
			for _, cx := range []int{x, 4 - x} {
				for py := y * cell; py < (y+1)*cell; py++ {
					for px := cx * cell; px < (cx+1)*cell; px++ {
						img.SetColorIndex(px, py, 1)
					}
				}
			}
		}
	}
	var b bytes.Buffer
	err := png.Encode(&b, img)
	return b.Bytes(), err
}
