package gateway

import (
	"context"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// slowDirectory is a DirectoryStore whose Channels waits for the test:
// the store read a first lookup makes, with a change committed meanwhile.
type slowDirectory struct {
	DirectoryStore // only Channels is called
	chs            []core.Channel
	reading        chan struct{}
	goOn           chan struct{}
	reads          int
}

func (s *slowDirectory) Channels(ctx context.Context) ([]core.Channel, error) {
	s.reads++
	chs := s.chs // what the read sees: the store as it began
	if s.reading != nil {
		close(s.reading)
		<-s.goOn
		s.reading = nil
	}
	return chs, nil
}

// A directory read from the store while a channel event is applied may
// predate the event: it answers the lookup that read it, and is not
// kept, so the next lookup reads the store again (and sees the change).
func TestDirectoryLoadRacingAChangeIsNotKept(t *testing.T) {
	def := core.Channel{ChatID: "default", Name: "Default", Kind: core.KindDefault, IsDefault: true}
	st := &slowDirectory{chs: []core.Channel{def}, reading: make(chan struct{}), goOn: make(chan struct{})}
	var d directory
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.view(context.Background(), st, func(byID map[string]core.Channel, _ string) {
			if _, ok := byID["chan_new"]; ok {
				t.Error("the read that predates the change has it")
			}
		})
	}()
	<-st.reading
	created := core.Channel{ChatID: "chan_new", Name: "New", Kind: core.KindChannel}
	d.apply(&core.Event{Type: core.EvChannelCreated, Channel: &created})
	st.chs = append(st.chs, created) // committed before the event applies
	close(st.goOn)
	<-done

	var found bool
	d.view(context.Background(), st, func(byID map[string]core.Channel, _ string) { _, found = byID["chan_new"] })
	if !found || st.reads != 2 {
		t.Fatalf("after the change: found %v with %d store reads, want found after a second read", found, st.reads)
	}
	// Now held: the store is not read again, and events keep it right.
	d.apply(&core.Event{Type: core.EvChannelDeleted, ChatID: "chan_new"})
	d.view(context.Background(), st, func(byID map[string]core.Channel, _ string) { _, found = byID["chan_new"] })
	if found || st.reads != 2 {
		t.Fatalf("after the delete: found %v with %d store reads", found, st.reads)
	}
}

// Icons are not held: the directory's icons may be megabytes, and a lane
// needs none.
func TestDirectoryHoldsNoIcons(t *testing.T) {
	st := &slowDirectory{chs: []core.Channel{{ChatID: "default", Kind: core.KindDefault, IsDefault: true, Icon: "aWNvbg=="}}}
	var d directory
	c := core.Channel{ChatID: "chan_a", Kind: core.KindChannel, Icon: "aWNvbg=="}
	d.view(context.Background(), st, func(map[string]core.Channel, string) {})
	d.apply(&core.Event{Type: core.EvChannelRenamed, Channel: &c})
	d.view(context.Background(), st, func(byID map[string]core.Channel, def string) {
		if def != "default" || byID["default"].Icon != "" || byID["chan_a"].Icon != "" {
			t.Fatalf("held: %+v (default %q)", byID, def)
		}
	})
}
