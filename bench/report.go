package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// percentile returns the p-th percentile (0–100) of the samples by the
// nearest-rank method; it sorts them.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(p/100*float64(len(samples))+0.5) - 1
	return samples[min(max(rank, 0), len(samples)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// us formats a duration in microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// perSec formats a rate.
func perSec(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f/s", r)
	case r >= 10:
		return fmt.Sprintf("%.1f/s", r)
	}
	return fmt.Sprintf("%.2f/s", r)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// table is a Markdown table.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.header, " | "))
	seps := make([]string, len(t.header))
	for i := range seps {
		seps[i] = "---"
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(seps, " | "))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

// machine describes where a run happened.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	pkg := func(name string) string {
		out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", name).Output()
		if err != nil || len(out) == 0 {
			return "not installed"
		}
		return string(out)
	}
	return fmt.Sprintf("%d cores (%s), %s %s/%s, Prosody %s, ejabberd %s",
		runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH, pkg("prosody"), pkg("ejabberd"))
}

// loadAverage is the machine's 1-minute load average: on a shared
// machine it says how much else was running.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// revision names the pingd source measured.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "(unknown revision)"
	}
	return "at " + strings.TrimSpace(string(out))
}

// reporter writes result sections to stdout and, if set, a file.
type reporter struct {
	w io.Writer
}

func newReporter(path string) (*reporter, func(), error) {
	if path == "" {
		return &reporter{w: os.Stdout}, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return &reporter{w: io.MultiWriter(os.Stdout, f)}, func() { f.Close() }, nil
}

func (r *reporter) section(title, command string) {
	fmt.Fprintf(r.w, "\n### %s\n\n", title)
	fmt.Fprintf(r.w, "Run %s on %s, pingd %s; load average at the end %s.", time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), revision(), loadAverage())
	if command != "" {
		fmt.Fprintf(r.w, " Command: `%s`.", command)
	}
	fmt.Fprint(r.w, "\n\n")
}

func (r *reporter) note(format string, args ...any) {
	fmt.Fprintf(r.w, format+"\n\n", args...)
}
