package irisschema

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

var intLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// ReadableID is the request id a frame carries, read independently of
// the gateway's decoder, for fuzz tests to check it against: the input is
// a JSON object whose only member named "id" in any letter case is
// exactly "id" and holds an int64 literal. ok is false when there is no
// such id.
func ReadableID(data []byte) (id int64, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return 0, false
	}
	n := 0
	for k := range m {
		if strings.EqualFold(k, "id") {
			n++
		}
	}
	raw, ok := m["id"]
	if !ok || n != 1 || !intLiteral.Match(raw) {
		return 0, false
	}
	id, err := strconv.ParseInt(string(raw), 10, 64)
	return id, err == nil
}
