package qrcode

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	zxing "github.com/makiuchi-d/gozxing/qrcode"
)

// decode reads a QR code from an image with ZXing's decoder (the reader phone apps are built on).
func decode(t *testing.T, img image.Image) string {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := zxing.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("the code does not scan: %v", err)
	}
	return res.GetText()
}

var texts = []string{
	"https://sb.example/black-friday",
	"sandbox-qr:01JDAD0A1B2C3D4E5F6G7H8J9K:" + strings.Repeat("x", 120),
	"https://sb.example/" + strings.Repeat("long-slug-", 20) + "?utm_source=newsletter&utm_campaign=winter",
}

// The PNG scans back to the text, with its quiet zone of 4 modules and 8 pixels a module.
func TestPNGScans(t *testing.T) {
	for _, text := range texts {
		code, err := Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := PNG(code)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := decode(t, img); got != text {
			t.Errorf("scanned %q, want %q", got, text)
		}
		n := code.Bounds().Dx()
		if side := img.Bounds().Dx(); side != (n+2*quietZone)*pixelsPerModule || img.Bounds().Dy() != side {
			t.Errorf("%d px for %d modules", side, n)
		}
		for i := range quietZone * pixelsPerModule { // the margin is white all round
			for _, p := range [][2]int{{i, i}, {img.Bounds().Dx() - 1 - i, i}, {i, img.Bounds().Dy() - 1 - i}} {
				if r, _, _, _ := img.At(p[0], p[1]).RGBA(); r != 0xffff {
					t.Fatalf("quiet zone pixel %v is not white", p)
				}
			}
		}
	}
}

// The SVG is well-formed XML with its title escaped, and its path drawn as pixels scans back to the text.
func TestSVGScans(t *testing.T) {
	for _, text := range texts {
		code, err := Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		svg := SVG(code, `Short link <"&">`)
		var doc struct {
			Title string `xml:"title"`
			Path  struct {
				D string `xml:"d,attr"`
			} `xml:"path"`
		}
		if err := xml.Unmarshal(svg, &doc); err != nil {
			t.Fatalf("not XML: %v\n%s", err, svg)
		}
		if doc.Title != `Short link <"&">` {
			t.Errorf("title %q", doc.Title)
		}
		side := code.Bounds().Dx() + 2*quietZone
		const scale = 6
		img := image.NewGray(image.Rect(0, 0, side*scale, side*scale))
		for i := range img.Pix {
			img.Pix[i] = 0xff
		}
		runs := regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-\d+z`).FindAllStringSubmatch(doc.Path.D, -1)
		if len(runs) == 0 {
			t.Fatalf("no runs in %q", doc.Path.D)
		}
		for _, r := range runs {
			x, _ := strconv.Atoi(r[1])
			y, _ := strconv.Atoi(r[2])
			w, _ := strconv.Atoi(r[3])
			for py := y * scale; py < (y+1)*scale; py++ {
				for px := x * scale; px < (x+w)*scale; px++ {
					img.SetGray(px, py, color.Gray{})
				}
			}
		}
		if got := decode(t, img); got != text {
			t.Errorf("the SVG scanned %q, want %q", got, text)
		}
	}
}

// A data URL is a PNG that scans; a text beyond the largest code is an error, not a panic.
func TestDataURL(t *testing.T) {
	u, err := DataURL(texts[0])
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(u, "data:image/png;base64,"))
	if err != nil || !strings.HasPrefix(u, "data:image/png;base64,") {
		t.Fatalf("%.40s: %v", u, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, img); got != texts[0] {
		t.Errorf("scanned %q", got)
	}
	if _, err := DataURL(strings.Repeat("9", 8000)); err == nil {
		t.Error("a text larger than any QR code was encoded")
	}
}
