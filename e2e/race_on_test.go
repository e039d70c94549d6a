//go:build race

package e2e

// raceEnabled: the test binary runs under the race detector, so the
// irisgate binary it builds does too.
const raceEnabled = true
