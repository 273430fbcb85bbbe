package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/client"
)

// ErrText is an error's text for a command's one-line message, which
// already starts with the command's name: an API error reads "409
// turn_in_flight: a turn is running" rather than repeating "metis:".
func ErrText(err error) string {
	s := err.Error()
	var ae *client.APIError
	if errors.As(err, &ae) {
		plain := fmt.Sprintf("%d %s: %s", ae.Status, ae.Code, ae.Message)
		s = strings.Replace(s, ae.Error(), plain, 1)
	}
	return s
}
