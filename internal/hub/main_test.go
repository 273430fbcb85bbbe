package hub

import (
	"flag"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// raceChecks is the default number of rapid checks under the race
// detector, which slows the transpiled SQLite by more than an order of
// magnitude; the property tests run their full 100 without it. An
// explicit -rapid.checks wins.
const raceChecks = 30

func TestMain(m *testing.M) {
	flag.Parse()
	if raceEnabled {
		explicit := false
		flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
		if !explicit {
			if err := flag.Set("rapid.checks", strconv.Itoa(raceChecks)); err != nil {
				panic(err)
			}
		}
	}
	goleak.VerifyTestMain(m)
}
