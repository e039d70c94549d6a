package server_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// serverReaders counts the gateway's goroutines of connections that wait
// for a device's frames: inside a read of coder/websocket (deep: each
// holds a 4 KiB stack), and outside one (idle.go's await, small).
func serverReaders() (inRead, awaiting int) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case strings.Contains(g, "server.(*Server).serve(") && strings.Contains(g, "websocket.(*Conn).reader("):
			inRead++
		case strings.Contains(g, "server.(*Server).await(") && !strings.Contains(g, "server.(*Server).serve("):
			awaiting++
		}
	}
	return inRead, awaiting
}

// A connection with nothing to read waits for its device outside any
// read of coder/websocket, in a goroutine of its own; it reads on when
// the device sends again (a request, the answer to a ping), and idles
// again after.
func TestIdleConnectionWaitsOutsideReads(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "idler")
	idle := func(when string) {
		t.Helper()
		eventually(t, "the idle connection to wait outside reads "+when, func() bool {
			in, aw := serverReaders()
			return in == 0 && aw == 1
		})
	}
	idle("after its hello")
	for i := range 3 {
		barrier(t, d) // a request, and its answer
		idle("after request " + string(rune('1'+i)))
	}
	// A message sent: its frames are proven by a ping the device answers
	// while its connection waits (the Pong is read, then it idles again),
	// and the turn's frames reach it. A second device idles beside it.
	send(t, d, client.Lane{ChatID: "default"}, "hello while idle")
	idle("after a message.send")
	d2 := g.Dial(t, "idler-2")
	barrier(t, d2)
	eventually(t, "both to idle", func() bool {
		in, aw := serverReaders()
		return in == 0 && aw == 2
	})
	barrier(t, d)
}
