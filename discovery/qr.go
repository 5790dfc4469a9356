package discovery

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/boombuler/barcode/qr"
)

// qrQuietZone is the light margin around a QR code, in modules: ISO/IEC
// 18004 asks for four, and phone cameras find codes without it poorly.
const qrQuietZone = 4

// qrModulePixels is the size of one module on the page, in CSS pixels:
// enough for a phone to read the code off a screen at arm's length.
const qrModulePixels = 4

// QRMatrix encodes content as a QR code (error correction level M, which
// survives a smudged or partly covered screen; L when the content is too
// long for M) and returns its modules, true for dark, indexed [y][x],
// without the quiet zone.
func QRMatrix(content string) ([][]bool, error) {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		code, err = qr.Encode(content, qr.L, qr.Auto)
	}
	if err != nil {
		return nil, fmt.Errorf("QR code of %d bytes: %w", len(content), err)
	}
	b := code.Bounds()
	m := make([][]bool, b.Dy())
	for y := range m {
		m[y] = make([]bool, b.Dx())
		for x := range m[y] {
			r, _, _, _ := code.At(b.Min.X+x, b.Min.Y+y).RGBA()
			m[y][x] = r < 0x8000
		}
	}
	return m, nil
}

// QRSVG renders content's QR code as an inline SVG element: one path of
// the dark modules (each run of them in a row is one rectangle) on a light
// square with the quiet zone, labelled for screen readers. It draws with
// presentation attributes only (no style attribute or element), so it
// needs nothing from a Content-Security-Policy of default-src 'none'.
func QRSVG(content, label string) (template.HTML, error) {
	m, err := QRMatrix(content)
	if err != nil {
		return "", err
	}
	size := len(m) + 2*qrQuietZone
	var path strings.Builder
	for y, row := range m {
		for x := 0; x < len(row); {
			if !row[x] {
				x++
				continue
			}
			run := 1
			for x+run < len(row) && row[x+run] {
				run++
			}
			fmt.Fprintf(&path, "M%d %dh%dv1h-%dz", x+qrQuietZone, y+qrQuietZone, run, run)
			x += run
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="qr" role="img" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges">`,
		size*qrModulePixels, size*qrModulePixels, size, size)
	b.WriteString("<title>")
	b.WriteString(template.HTMLEscapeString(label))
	b.WriteString("</title>")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`, size, size)
	fmt.Fprintf(&b, `<path fill="#000" d="%s"/>`, path.String())
	b.WriteString("</svg>")
	// Only numbers and the escaped label are written above.
	return template.HTML(b.String()), nil
}
