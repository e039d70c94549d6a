package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/sandbox"
)

// BenchmarkTerminalTrue is the cost the sandbox adds to a command: `true`
// through the terminal tool, without walls (bash under the supervisor,
// which kills what a command leaves behind) and behind each wall. It
// reports the median (p50) besides the mean; compare them in one run, the
// machine is shared:
//
//	go test -run '^$' -bench TerminalTrue -benchtime 200x ./agent/
//
// On a busy machine every process a command adds waits for a CPU each time
// it wakes; `chrt -f 10` on the test binary shows the cost without the
// other load.
func BenchmarkTerminalTrue(b *testing.B) {
	for _, w := range []sandbox.Wall{sandbox.None, sandbox.Landlock, sandbox.Namespaces} {
		b.Run(w.String(), func(b *testing.B) {
			dir := b.TempDir()
			sb, err := sandbox.New(sandbox.Config{Temp: b.TempDir(), Want: w})
			if err != nil {
				b.Fatal(err)
			}
			if sb.Wall() != w {
				b.Skipf("this kernel offers %s, not %s", sb.Wall(), w)
			}
			ts := &Tools{Sandbox: sb}
			ts.List = Builtin(ts)
			env := &ToolEnv{Cwd: dir, Yolo: true, emit: func(Event) {}}
			call := ToolCall{ID: "c", Name: "terminal", Arguments: `{"command":"true"}`}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if out := ts.run(context.Background(), env, 1, call); strings.HasPrefix(out, "error") || out != "" {
					b.Fatalf("true: %q", out)
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
