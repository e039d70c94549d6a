package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memSample is the gateway process's memory at one moment.
type memSample struct {
	rss        int64 // VmRSS, bytes
	heapInuse  float64
	stackInuse float64
	goroutines float64
}

func runMemory(ctx context.Context, o *Options) (r Result) {
	n := o.MemoryConns
	r.Title = fmt.Sprintf("(e) Memory per idle connection at %s connections", commas(int64(n)))
	dir, err := os.MkdirTemp(o.TempDir, "irisgate-bench-memory-")
	if err != nil {
		r.Err = err
		return r
	}
	defer os.RemoveAll(dir)
	addr, err := freeLoopbackAddr()
	if err != nil {
		r.Err = err
		return r
	}
	cmd, err := o.GatewayCmd(addr, dir, Token)
	if err != nil {
		r.Err = err
		return r
	}
	var stderr lockedBuffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	o.progress("memory: starting the gateway subprocess on %s", addr)
	if err := cmd.Start(); err != nil {
		r.Err = fmt.Errorf("starting %s: %w", cmd.Path, err)
		return r
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	pid := cmd.Process.Pid
	base := "http://" + addr
	if err := waitHealthy(ctx, base, exited); err != nil {
		r.Err = fmt.Errorf("%w; gateway stderr: %.500s", err, stderr.String())
		return r
	}
	url := "ws://" + addr + "/ws"
	settle := time.Second
	if o.Quick {
		settle = 200 * time.Millisecond
	}

	// Warm up: one device comes and goes, so the first connection's
	// one-time costs (database pages, HTTP machinery) are in the baseline.
	if w, err := dialMany(ctx, url, 10, 10, func(i int) string { return fmt.Sprintf("warm-%d", i) }); err == nil {
		for _, d := range w {
			d.serve(nil)
		}
		time.Sleep(settle / 4)
		closeAll(w)
	}
	time.Sleep(settle / 2)
	before, err := sample(ctx, pid, base)
	if err != nil {
		r.Err = err
		return r
	}

	o.progress("memory: opening %d idle connections", n)
	start := time.Now()
	devs, err := dialMany(ctx, url, n, 64, func(i int) string { return fmt.Sprintf("idle-%05d", i) })
	if err != nil {
		r.Err = fmt.Errorf("%w; gateway stderr: %.500s", err, stderr.String())
		return r
	}
	dialTime := time.Since(start)
	for _, d := range devs {
		d.serve(nil) // answer pings, read the status frame
	}
	defer closeAll(devs)
	// Let the connections settle (status frames written, garbage of the
	// handshakes collectable), then take the larger of two samples apart.
	time.Sleep(settle)
	after, err := sample(ctx, pid, base)
	if err != nil {
		r.Err = err
		return r
	}
	time.Sleep(settle)
	if a2, err := sample(ctx, pid, base); err == nil && a2.rss > after.rss {
		after = a2
	}
	var dropped int
	for _, d := range devs {
		select {
		case <-d.done:
			dropped++
		default:
		}
	}

	per := func(a, b float64) float64 { return (b - a) / float64(n) }
	rssPer := per(float64(before.rss), float64(after.rss))
	r.setup("Gateway as a subprocess (%s serve, echo agent), %s idle devices dialled from the bench process", cmdName(cmd.Path), commas(int64(n)))
	r.setup("(raw WebSockets, 64 at a time); each said hello and got hello.ack + status. RSS from /proc/%d/status (VmRSS),", pid)
	r.setup("Go figures from the gateway's /metrics. Baseline taken after 10 devices came and went.")
	r.fig("RSS per connection", kib(rssPer), "<= 16 KiB", ptr(rssPer <= 16*1024))
	r.fig("RSS before → after", fmt.Sprintf("%s → %s", mib(float64(before.rss)), mib(float64(after.rss))), "", nil)
	if before.goroutines > 0 {
		r.fig("Go heap in use per connection", kib(per(before.heapInuse, after.heapInuse)), "", nil)
		r.fig("goroutine stacks per connection", kib(per(before.stackInuse, after.stackInuse)), "", nil)
		r.fig("goroutines per connection", fmt.Sprintf("%.2f (%.0f → %.0f)", per(before.goroutines, after.goroutines), before.goroutines, after.goroutines), "", nil)
	}
	r.check("connections dropped while idle", fmt.Sprint(dropped), "0", dropped == 0)
	r.fig("connect + hello", fmt.Sprintf("%s connections in %.2fs", commas(int64(n)), dialTime.Seconds()), "", nil)
	if s := strings.TrimSpace(stderr.String()); s != "" {
		lines := strings.Split(s, "\n")
		r.note("gateway stderr (%d lines), first: %.300s", len(lines), lines[0])
	}
	return r
}

func cmdName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// freeLoopbackAddr finds a free port on 127.0.0.1 for the subprocess.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

func waitHealthy(ctx context.Context, base string, exited <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("gateway exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("gateway not healthy within 30s")
}

func sample(ctx context.Context, pid int, base string) (memSample, error) {
	var s memSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			s.rss = kb << 10
		}
	}
	if s.rss == 0 {
		return s, errors.New("no VmRSS in /proc status")
	}
	m, err := scrape(ctx, base+"/metrics")
	if err == nil {
		s.heapInuse = m["go_memstats_heap_inuse_bytes"]
		s.stackInuse = m["go_memstats_stack_inuse_bytes"]
		s.goroutines = m["go_goroutines"]
	}
	return s, nil
}

// scrape reads the unlabelled series of a Prometheus text endpoint.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
