package turn

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// ErrPickerChoice refuses a selection that is none of the picker's choices.
var ErrPickerChoice = core.NewKind("picker_choice_unknown", core.CodeUnsupported, "%q is not one of this picker's choices")

// Pickers are prompts waiting for a person's choice. They are outboxed, so
// a device that reconnects re-renders one still pending, but what waits on
// them lives in memory: after a restart a selection is stale, a no-op.

type picker struct {
	p    core.Picker
	lane core.Lane
	// answer receives the choice when an agent turn waits on the picker
	// (approval, clarify).
	answer chan answer
	// onSelect runs a command's choice (/model, /reasoning, /fast, /new).
	onSelect func(ctx context.Context, from hub.Caller, value string) error
	// free accepts any non-empty value, not only the listed choices
	// (clarify: the person may answer in their own words).
	free bool
}

// answer is a picker's choice and who made it (their picker.select gets
// the reply message).
type answer struct {
	value string
	from  hub.Caller
}

// pickers are the open pickers, by id.
type pickers struct {
	mu sync.Mutex
	m  map[string]*picker
	// closed are the ids of the last pickers closed here, oldest first
	// (at most maxClosed): an answer to one is stale, not another
	// replica's to apply.
	closed []string
}

// maxClosed bounds pickers.closed.
const maxClosed = 256

func (ps *pickers) add(pk *picker) {
	ps.mu.Lock()
	ps.m[pk.p.ID] = pk
	ps.mu.Unlock()
}

func (ps *pickers) get(id string) *picker {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.m[id]
}

func (ps *pickers) drop(id string) *picker {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	pk := ps.m[id]
	if pk != nil {
		delete(ps.m, id)
		if len(ps.closed) == maxClosed {
			ps.closed = append(ps.closed[:0], ps.closed[1:]...)
		}
		ps.closed = append(ps.closed, id)
	}
	return pk
}

// wasClosed reports whether picker id was one of the last closed here.
func (ps *pickers) wasClosed(id string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Contains(ps.closed, id)
}

// OpenPicker shows a command's picker p on every device; onSelect runs the
// choice made.
func (r *Runner) OpenPicker(ctx context.Context, lk core.Lane, p core.Picker, onSelect func(ctx context.Context, from hub.Caller, value string) error) error {
	return r.openPicker(ctx, lk, &picker{p: p, onSelect: onSelect})
}

// openPicker registers a picker and commits it (with a notification for
// approvals and questions), so every device shows it.
func (r *Runner) openPicker(ctx context.Context, lk core.Lane, pk *picker) error {
	if pk.p.ID == "" {
		pk.p.ID = core.NewID("pk_")
	}
	pk.lane = lk
	r.pickers.add(pk)
	p := pk.p
	if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvPicker, Lane: lk, Picker: &p}); err != nil {
		r.pickers.drop(pk.p.ID)
		return err
	}
	switch p.Kind {
	case "approval", "clarify":
		body := p.Title
		if p.Command != "" {
			body = p.Command
		}
		n := &core.Notification{Kind: p.Kind, Title: p.Title, Body: body, TS: time.Now().UnixMilli()}
		if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvNotification, Lane: lk, Notification: n}); err != nil {
			r.log.Warn("picker notification", "err", err)
		}
	}
	return nil
}

// closePicker ends a picker that still waits and tells the devices, with
// the value applied ("" when nobody answered), so a prompt shown elsewhere
// closes at once instead of at its own timeout. It returns nil when the
// picker was already gone: whoever took it has told them.
func (r *Runner) closePicker(id, value string) *picker {
	pk := r.pickers.drop(id)
	if pk != nil {
		r.c.Publish(&core.Event{Type: core.EvPickerClosed, Lane: pk.lane, Closed: &core.PickerClosed{ID: id, Value: value}})
	}
	return pk
}

// SelectPicker answers a picker. The reply is a message in the picker's
// lane saying what the choice did, whose copy to the selecting device
// carries its request id. An unknown or expired picker is a no-op (nil
// error, nothing sent): the selection is simply stale. A value that is not
// one of the picker's choices is refused.
//
// A replica's pickers are those of the turns it runs: one it does not
// know, and has not closed, may be open on the replica holding the lane,
// which gets the answer through the fleet (Leasing.Forward) and applies
// it with SelectForwarded.
func (r *Runner) SelectPicker(ctx context.Context, from hub.Caller, pickerID, value string) error {
	pk := r.pickers.get(pickerID)
	if pk == nil {
		if r.fl != nil && r.fl.Forward != nil && !r.pickers.wasClosed(pickerID) {
			r.fl.Forward.ForwardPick(core.Lane{}, from.DeviceID(), pickerID, value)
		}
		return nil
	}
	return r.selectPicker(ctx, from, pk, value)
}

// SelectForwarded applies an answer another replica forwarded from
// deviceID: only to a picker open here, through SelectPicker's checks (a
// value that is none of its choices is dropped, the first answer wins),
// and never forwarded again. A command's picker (/model…) runs its choice
// as if from no device: its replies go to the chat.
func (r *Runner) SelectForwarded(deviceID, pickerID, value string) error {
	pk := r.pickers.get(pickerID)
	if pk == nil {
		return nil
	}
	var from hub.Caller
	if pk.answer != nil && deviceID != "" {
		// What the turn does with it: name the device in the chat. No
		// reply address: the request was the other replica's.
		from.Conn = &hub.Conn{DeviceID: deviceID}
	}
	return r.selectPicker(r.ctx, from, pk, value)
}

func (r *Runner) selectPicker(ctx context.Context, from hub.Caller, pk *picker, value string) error {
	pickerID := pk.p.ID
	if !pk.valid(value) {
		return ErrPickerChoice.New(value)
	}
	if r.closePicker(pickerID, value) == nil {
		return nil // answered meanwhile from another device
	}
	if pk.answer != nil {
		pk.answer <- answer{value, from} // buffered: the waiter may have given up
		return nil
	}
	if pk.onSelect != nil {
		return pk.onSelect(ctx, from, value)
	}
	return nil
}

func (pk *picker) valid(v string) bool {
	if pk.free && strings.TrimSpace(v) != "" {
		return true
	}
	for _, c := range pk.p.Choices {
		if c.Value == v {
			return true
		}
	}
	if pk.p.Kind == "model" {
		for _, pr := range pk.p.Providers {
			for _, m := range pr.Models {
				if v == pr.ID+"/"+m.Value || v == m.Value {
					return true
				}
			}
		}
	}
	return false
}

// PickerPending reports whether a picker still waits for an answer.
// SelectPicker treats an unknown or answered picker as a silent no-op; a
// dialect that must tell the person the prompt is gone asks this first.
func (r *Runner) PickerPending(id string) bool { return r.pickers.get(id) != nil }

// PendingApproval returns the lane's open approval picker, "" for none.
func (r *Runner) PendingApproval(lk core.Lane) string {
	r.pickers.mu.Lock()
	defer r.pickers.mu.Unlock()
	for id, pk := range r.pickers.m {
		if pk.lane == lk && pk.p.Kind == "approval" {
			return id
		}
	}
	return ""
}

// ask opens a picker and waits for its answer, the timeout or ctx (a
// stopped turn). ok is false when nobody answered.
func (r *Runner) ask(ctx context.Context, lk core.Lane, p core.Picker, free bool) (ans answer, ok bool, err error) {
	pk := &picker{p: p, answer: make(chan answer, 1), free: free}
	if err := r.openPicker(ctx, lk, pk); err != nil {
		return ans, false, err
	}
	defer r.closePicker(pk.p.ID, "") // a no-op once answered
	r.c.Commit(ctx, nil, &core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "waiting_input"})
	defer r.c.Commit(context.Background(), nil, &core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "tool"})
	t := time.NewTimer(r.cfg.AskTimeout)
	defer t.Stop()
	select {
	case a := <-pk.answer:
		return a, true, nil
	case <-t.C:
		return ans, false, nil
	case <-ctx.Done():
		return ans, false, ctx.Err()
	}
}
