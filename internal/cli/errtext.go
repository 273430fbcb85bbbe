package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/client"
)

// ErrText is an error's text for a command's one-line message, which
// already starts with the command's name: the client package's errors
// start with "metis: " (and wrap each other), so an API error reads
// "metis send: 409 turn_in_flight: a turn is running" rather than
// "metis send: metis: 409 …".
func ErrText(err error) string {
	s := err.Error()
	var ae *client.APIError
	if errors.As(err, &ae) {
		plain := fmt.Sprintf("%d %s: %s", ae.Status, ae.Code, ae.Message)
		s = strings.Replace(s, ae.Error(), plain, 1)
	}
	s = strings.TrimPrefix(s, clientPrefix)
	return strings.ReplaceAll(s, ": "+clientPrefix, ": ")
}

// clientPrefix starts the client package's errors.
const clientPrefix = "metis: "
