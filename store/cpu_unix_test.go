//go:build unix

package store

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used so far (user and
// system), for benchmarks on a shared machine, where wall time measures
// the neighbours too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
