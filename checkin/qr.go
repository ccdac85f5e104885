package checkin

import (
	"bytes"
	"fmt"

	qrcode "github.com/skip2/go-qrcode"
)

// QRCodeSVG returns the QR code of text as an SVG image: one dark square
// path over a white background with a quiet zone, at error correction
// level M (a phone's camera reads it from a screen or on paper).
func QRCodeSVG(text string) ([]byte, error) {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return nil, fmt.Errorf("checkin: QR code: %w", err)
	}
	bits := q.Bitmap() // with its quiet zone
	n := len(bits)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" shape-rendering="crispEdges" role="img" aria-label="ticket QR code">`, n, n)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y, row := range bits {
		for x, dark := range row {
			if dark {
				fmt.Fprintf(&b, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes(), nil
}
