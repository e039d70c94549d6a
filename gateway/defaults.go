package gateway

import (
	"time"

	"github.com/irisgate/irisgate/gateway/turn"
)

// The defaults of Config, which the command line's flags show too.
const (
	DefaultOutboxKeep    = 200_000
	DefaultOutboxMaxAge  = 30 * 24 * time.Hour
	DefaultPruneEvery    = time.Minute
	DefaultProgressEvery = turn.DefaultProgressEvery
)

// The defaults of Bounds.
const (
	DefaultTurnsPerToken        = turn.DefaultPerToken
	DefaultTurnsInAll           = turn.DefaultInAll
	DefaultTurnsRunning         = turn.DefaultRunning
	DefaultChannels             = 5000
	DefaultAutoThreadsPerMinute = 30
	DefaultConnsPerToken        = 64
	DefaultDevices              = 10_000
	DefaultDeviceAge            = 90 * 24 * time.Hour
)
