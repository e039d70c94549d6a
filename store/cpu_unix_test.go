//go:build unix

package store

import (
	"syscall"
	"time"
)

// cpuTime is the CPU this process has used, all its threads: benchmarks
// report it beside wall time, which other processes on a shared machine
// stretch.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
