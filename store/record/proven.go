package record

import (
	"strconv"
	"strings"

	"github.com/irisgate/irisgate/core"
)

// A device's proven cursors (devices.proven) are stored as text,
// "lo-hi,lo-hi", ranges in increasing order. It is the one stored format
// that is no JSON record: it predates records, and a set of ranges needs
// no versioning (a new shape would be a new column).

// EncodeProven writes ranges as the devices.proven column holds them.
func EncodeProven(ranges []core.CursorRange) string {
	var b strings.Builder
	for i, r := range ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.Lo, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.Hi, 10))
	}
	return b.String()
}

// DecodeProven reads EncodeProven's output. Malformed parts are skipped,
// not an error: the worst outcome of a lost proof is a frame replayed
// twice, while refusing the row would lock the device out of its sync.
func DecodeProven(v string) []core.CursorRange {
	var out []core.CursorRange
	for _, part := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(part, "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if err1 == nil && err2 == nil && lo <= hi {
			out = append(out, core.CursorRange{Lo: lo, Hi: hi})
		}
	}
	return out
}
