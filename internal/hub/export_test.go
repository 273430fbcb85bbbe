package hub

// RaceEnabled tells the external tests that the race detector is on, so
// their stress loops can shrink to fit the slowdown.
const RaceEnabled = raceEnabled
