package gateway

import "time"

// The defaults of Config, which the command line's flags show too.
const (
	DefaultOutboxKeep    = 200_000
	DefaultOutboxMaxAge  = 30 * 24 * time.Hour
	DefaultPruneEvery    = time.Minute
	DefaultProgressEvery = time.Second
)

// The defaults of Bounds.
const (
	DefaultTurnsPerToken        = 64
	DefaultTurnsInAll           = 512
	DefaultTurnsRunning         = 16
	DefaultChannels             = 5000
	DefaultAutoThreadsPerMinute = 30
	DefaultConnsPerToken        = 64
	DefaultDevices              = 10_000
	DefaultDeviceAge            = 90 * 24 * time.Hour
)
