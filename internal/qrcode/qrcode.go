// Package qrcode draws QR codes on the server: a PNG to paste into a document (or a data URL for an <img>) and an
// SVG to print at any size. Short links and the pairing codes of messaging instances use them.
package qrcode

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"github.com/boombuler/barcode"
	"github.com/boombuler/barcode/qr"
)

const (
	// quietZone is the blank margin, in modules, that scanners need around a code (ISO/IEC 18004 asks for 4).
	quietZone = 4
	// pixelsPerModule makes the PNG of a short URL (a version 2–4 code, 25–33 modules) about 300 pixels wide.
	pixelsPerModule = 8
)

// Encode encodes text with error correction level M, which still reads with about 15 % of the code damaged (a
// crease, a smudge on a printed flyer).
func Encode(text string) (barcode.Barcode, error) {
	return qr.Encode(text, qr.M, qr.Auto)
}

// dark reports whether the module at x, y of the code is dark.
func dark(code barcode.Barcode, x, y int) bool {
	r, _, _, _ := code.At(x, y).RGBA()
	return r < 0x8000
}

// PNG draws code as a black-and-white PNG with its quiet zone.
func PNG(code barcode.Barcode) ([]byte, error) {
	n := code.Bounds().Dx()
	side := (n + 2*quietZone) * pixelsPerModule
	img := image.NewPaletted(image.Rect(0, 0, side, side), color.Palette{color.White, color.Black})
	for y := range n {
		for x := range n {
			if !dark(code, x, y) {
				continue
			}
			x0, y0 := (x+quietZone)*pixelsPerModule, (y+quietZone)*pixelsPerModule
			for py := y0; py < y0+pixelsPerModule; py++ {
				for px := x0; px < x0+pixelsPerModule; px++ {
					img.SetColorIndex(px, py, 1)
				}
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// SVG draws code as an SVG of one path, a module per unit and each row's runs of dark modules merged, with its
// quiet zone; it scales to any size without blurring.
func SVG(code barcode.Barcode, title string) []byte {
	n := code.Bounds().Dx()
	side := n + 2*quietZone
	var path bytes.Buffer
	for y := range n {
		for x := 0; x < n; {
			if !dark(code, x, y) {
				x++
				continue
			}
			run := 1
			for x+run < n && dark(code, x+run, y) {
				run++
			}
			fmt.Fprintf(&path, "M%d %dh%dv1h-%dz", x+quietZone, y+quietZone, run, run)
			x += run
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges" role="img">`,
		side, side, side*pixelsPerModule, side*pixelsPerModule)
	b.WriteString("<title>")
	_ = xml.EscapeText(&b, []byte(title)) // a bytes.Buffer never fails
	b.WriteString("</title>")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="%s"/></svg>`, side, side, path.String())
	return b.Bytes()
}

// DataURL encodes text and draws it as a PNG data URL, ready for an <img src>.
func DataURL(text string) (string, error) {
	code, err := Encode(text)
	if err != nil {
		return "", err
	}
	b, err := PNG(code)
	if err != nil {
		return "", err
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b), nil
}
