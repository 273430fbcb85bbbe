package streamtest

import (
	"bytes"
	"encoding/json"
)

// JSONEqual compares two JSON values semantically (object key order and
// spacing aside); either not being JSON, it compares the bytes.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// SameJSON compares two lists of JSON values semantically.
func SameJSON(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !JSONEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
