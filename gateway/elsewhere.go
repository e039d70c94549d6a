package gateway

import (
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
)

// elsewhere are the pickers other replicas opened and have not closed, as
// their frames said (Remote): a turn's picker lives in the memory of the
// replica that runs it, and a dialect that asks PickerPending before it
// answers (Hermes Mobile's cards) must not take one of them for gone. The
// answer then goes to that replica (turn.Leasing.Forward).
type elsewhere struct {
	mu  sync.Mutex
	m   map[string]time.Time // picker id → when to forget it
	ttl time.Duration
}

// maxElsewhere bounds the pickers remembered; past it the oldest go.
const maxElsewhere = 1024

func newElsewhere(askTimeout time.Duration) *elsewhere {
	if askTimeout <= 0 {
		askTimeout = DefaultAskTimeout
	}
	// A picker outlives its wait by little: its close may have been lost
	// on the way (NATS only makes replicas prompt).
	return &elsewhere{m: map[string]time.Time{}, ttl: askTimeout + time.Minute}
}

func (e *elsewhere) apply(ev *core.Event) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ev.Type == core.EvPicker && ev.Picker != nil && ev.Picker.ID != "":
		if len(e.m) >= maxElsewhere {
			e.pruneLocked(now)
		}
		if len(e.m) < maxElsewhere {
			e.m[ev.Picker.ID] = now.Add(e.ttl)
		}
	case ev.Type == core.EvPickerClosed && ev.Closed != nil:
		delete(e.m, ev.Closed.ID)
	}
}

// pruneLocked forgets the expired pickers, and the oldest half if none.
func (e *elsewhere) pruneLocked(now time.Time) {
	for id, until := range e.m {
		if now.After(until) {
			delete(e.m, id)
		}
	}
	if len(e.m) < maxElsewhere {
		return
	}
	cut := now.Add(e.ttl / 2)
	for id, until := range e.m {
		if until.Before(cut) {
			delete(e.m, id)
		}
	}
}

func (e *elsewhere) open(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	until, ok := e.m[id]
	return ok && time.Now().Before(until)
}
