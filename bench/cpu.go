package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat; Linux
// reports them in USER_HZ, 100 on every architecture Go runs on.
const clockTick = 10 * time.Millisecond

// processCPU returns the user+system CPU time the processes used so far
// (Linux /proc); processes that are gone count nothing.
func processCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		// After "pid (comm)": state is field 3; utime 14 and stime 15.
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		s, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			total += time.Duration(u+s) * clockTick
		}
	}
	return total
}

// selfCPU returns the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidFromFile reads a pidfile.
func pidFromFile(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return []int{pid}
}
