package main

import (
	"fmt"
	"strings"

	qrcode "github.com/yeqown/go-qrcode/v2"
)

// qrQuiet is the light margin drawn around a code, in modules. The
// standard asks for four; two is what terminal QR printers use, and what
// phone cameras read in practice, and it keeps the code on one screen.
const qrQuiet = 2

// qrMatrix encodes text as a QR code, rows of modules, true for dark. Level
// L (7% recovery) suits a screen: the image is clean and flat, and fewer
// modules make bigger ones, which a camera reads from further away.
func qrMatrix(text string) ([][]bool, error) {
	c, err := qrcode.NewWith(text, qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionLow))
	if err != nil {
		return nil, fmt.Errorf("QR code: %w", err)
	}
	var m matrixGrab
	if err := c.Save(&m); err != nil {
		return nil, fmt.Errorf("QR code: %w", err)
	}
	return m.bits, nil
}

// matrixGrab is a qrcode.Writer that keeps the modules.
type matrixGrab struct{ bits [][]bool }

func (g *matrixGrab) Write(m qrcode.Matrix) error { g.bits = m.Bitmap(); return nil }
func (g *matrixGrab) Close() error                { return nil }

// renderQR draws a code for a terminal, two module rows per text line with
// half blocks, inside a quiet zone. With ansi it paints black on white, so
// it reads on any background; without, it draws the light modules as ink,
// which is a normal code on the usual light-on-dark terminal (and an
// inverted one, which phone cameras also read, on a light one).
func renderQR(bits [][]bool, ansi bool) string {
	n := len(bits)
	size := n + 2*qrQuiet
	ink := func(x, y int) bool {
		if y >= size {
			return false // the half line below an odd-sized code
		}
		x, y = x-qrQuiet, y-qrQuiet
		dark := y >= 0 && y < n && x >= 0 && x < n && bits[y][x]
		return dark == ansi
	}
	var b strings.Builder
	for y := 0; y < size; y += 2 {
		if ansi {
			b.WriteString("\x1b[30;107m")
		}
		for x := 0; x < size; x++ {
			switch top, bottom := ink(x, y), ink(x, y+1); {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		if ansi {
			b.WriteString("\x1b[0m")
		}
		b.WriteString("\n")
	}
	return b.String()
}
