package gateway

import "time"

// The defaults of Config, which the command line's flags show too.
const (
	DefaultOutboxKeep    = 200_000
	DefaultOutboxMaxAge  = 30 * 24 * time.Hour
	DefaultPruneEvery    = time.Minute
	DefaultProgressEvery = time.Second
)
