package console

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"github.com/boombuler/barcode"
	"github.com/boombuler/barcode/qr"
)

// QR codes of short links, drawn on the server: a PNG to paste into a document and an SVG to print at any size.

const (
	// qrQuietZone is the blank margin, in modules, that scanners need around a code (ISO/IEC 18004 asks for 4).
	qrQuietZone = 4
	// qrPixelsPerModule makes the PNG of a short URL (a version 2–4 code, 25–33 modules) about 300 pixels wide.
	qrPixelsPerModule = 8
)

// qrCode encodes text with error correction level M, which still reads with about 15 % of the code damaged (a
// crease, a smudge on a printed flyer).
func qrCode(text string) (barcode.Barcode, error) {
	return qr.Encode(text, qr.M, qr.Auto)
}

// dark reports whether the module at x, y of the code is dark.
func dark(code barcode.Barcode, x, y int) bool {
	r, _, _, _ := code.At(x, y).RGBA()
	return r < 0x8000
}

// qrPNG draws code as a black-and-white PNG with its quiet zone.
func qrPNG(code barcode.Barcode) ([]byte, error) {
	n := code.Bounds().Dx()
	side := (n + 2*qrQuietZone) * qrPixelsPerModule
	img := image.NewPaletted(image.Rect(0, 0, side, side), color.Palette{color.White, color.Black})
	for y := range n {
		for x := range n {
			if !dark(code, x, y) {
				continue
			}
			x0, y0 := (x+qrQuietZone)*qrPixelsPerModule, (y+qrQuietZone)*qrPixelsPerModule
			for py := y0; py < y0+qrPixelsPerModule; py++ {
				for px := x0; px < x0+qrPixelsPerModule; px++ {
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

// qrSVG draws code as an SVG of one path, a module per unit and each row's runs of dark modules merged, with its
// quiet zone; it scales to any size without blurring.
func qrSVG(code barcode.Barcode, title string) []byte {
	n := code.Bounds().Dx()
	side := n + 2*qrQuietZone
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
			fmt.Fprintf(&path, "M%d %dh%dv1h-%dz", x+qrQuietZone, y+qrQuietZone, run, run)
			x += run
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges" role="img">`,
		side, side, side*qrPixelsPerModule, side*qrPixelsPerModule)
	b.WriteString("<title>")
	_ = xml.EscapeText(&b, []byte(title)) // a bytes.Buffer never fails
	b.WriteString("</title>")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="%s"/></svg>`, side, side, path.String())
	return b.Bytes()
}
