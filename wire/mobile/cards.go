package mobile

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

// A card is a core picker as a Hermes Mobile prompt: exec_approval ↔
// approval, slash_confirm ↔ confirm, clarify ↔ clarify (choice and model
// pickers are shown as clarify cards too: they are questions with listed
// answers). Each option's id is what the device sends; its value is what
// the core is given.
type card struct {
	id       string
	device   string // hub device id of the device it was shown to
	session  string
	kind     string
	text     string
	command  string
	desc     string
	options  []option
	deadline time.Time
	timer    *time.Timer
}

type option struct {
	ID, Label, Style, Value string
}

// cardOptions maps a picker to a card kind and its options; ok is false
// for pickers the protocol has no card for.
func cardOptions(p *core.Picker) (kind string, opts []option, ok bool) {
	switch p.Kind {
	case "approval":
		return "exec_approval", fixedOptions(p.Choices, []option{
			{ID: "once", Label: "Allow once", Style: "primary"},
			{ID: "session", Label: "Allow for this session"},
			{ID: "always", Label: "Always allow"},
			{ID: "deny", Label: "Deny", Style: "danger"},
		}), true
	case "confirm":
		return "slash_confirm", fixedOptions(p.Choices, []option{
			{ID: "once", Label: "Confirm", Style: "primary"},
			{ID: "always", Label: "Always"},
			{ID: "cancel", Label: "Cancel", Style: "danger"},
		}), true
	case "clarify", "choice", "model":
		var choices []core.Choice
		if p.Kind == "model" {
			for _, pr := range p.Providers {
				for _, m := range pr.Models {
					choices = append(choices, core.Choice{Value: pr.ID + "/" + m.Value, Label: m.Label + " (" + pr.Label + ")"})
				}
			}
		} else {
			choices = p.Choices
		}
		for i, c := range choices {
			label := c.Label
			if label == "" {
				label = c.Value
			}
			style := ""
			if c.IsCurrent {
				style = "primary"
			}
			opts = append(opts, option{ID: "c" + strconv.Itoa(i), Label: label, Style: style, Value: c.Value})
		}
		return "clarify", append(opts, option{ID: "other", Label: "Other…"}), true
	}
	return "", nil, false
}

// fixedOptions keeps the table's options the picker offers (with the
// picker's labels), in the table's order; a picker that names none of
// them gets the whole table.
func fixedOptions(choices []core.Choice, table []option) []option {
	var out []option
	for _, o := range table {
		for _, c := range choices {
			if c.Value == o.ID {
				if c.Label != "" {
					o.Label = c.Label
				}
				o.Value = o.ID
				out = append(out, o)
				break
			}
		}
	}
	if len(out) == 0 {
		for _, o := range table {
			o.Value = o.ID
			out = append(out, o)
		}
	}
	return out
}

// safeDefault is what an unknown answer becomes.
func safeDefault(kind string) string {
	switch kind {
	case "exec_approval":
		return "deny"
	case "slash_confirm":
		return "cancel"
	}
	return "other"
}

// resolve validates a device's answer against the card: applied is the
// option actually applied (reported in prompt_done), value what the core
// is given. The client is not trusted: an option outside the card becomes
// the kind's safe default. needText is a clarify answered "other" without
// text: the device's next text message is the answer.
func (c *card) resolve(optionID, text string) (applied, value string, needText bool) {
	text = strings.TrimSpace(text)
	if c.kind != "clarify" {
		id := optionID
		if id == "" {
			id = strings.ToLower(text)
		}
		for _, o := range c.options {
			if o.ID == id {
				return o.ID, o.Value, false
			}
		}
		d := safeDefault(c.kind)
		return d, d, false
	}
	for _, o := range c.options {
		if o.ID == optionID && o.ID != "other" {
			return o.ID, o.Value, false
		}
	}
	if text == "" {
		return "other", "", true
	}
	// A typed answer that names an option is that option.
	for _, o := range c.options {
		if o.ID != "other" && (strings.EqualFold(o.Value, text) || strings.EqualFold(o.Label, text)) {
			return o.ID, o.Value, false
		}
	}
	return "other", text, false
}

func (c *card) frame(now time.Time) []byte {
	p := mobilev1.Prompt{T: "prompt", ID: c.id, Kind: c.kind, Text: c.text, Command: c.command, Description: c.desc,
		Session: c.session, TimeoutSeconds: max(int((c.deadline.Sub(now)+time.Second-1)/time.Second), 1), Options: make([]mobilev1.Option, len(c.options))}
	for i, o := range c.options {
		p.Options[i] = mobilev1.Option{ID: o.ID, Label: o.Label, Style: o.Style}
	}
	return mobilev1.Marshal(p)
}

// cards are the open cards of every Hermes Mobile device, by picker id.
// They outlive connections: a device that reconnects is shown its cards
// again, and one answered from another device is refused.
type cards struct {
	d      *Dialect
	mu     sync.Mutex
	m      map[string]*card
	closed bool
}

// maxCardsPerDevice bounds the cards kept for one device; the oldest go.
const maxCardsPerDevice = 64

// open registers the card for a picker shown to device and returns its
// frame (nil when the protocol has no card for it). A picker shown again
// (a reconnect) keeps its deadline.
func (cs *cards) open(device, session string, p *core.Picker) []byte {
	kind, opts, ok := cardOptions(p)
	if !ok || p.ID == "" {
		return nil
	}
	now := time.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil
	}
	if c := cs.m[p.ID]; c != nil && c.device == device {
		return c.frame(now)
	}
	c := &card{id: p.ID, device: device, session: session, kind: kind, text: p.Title, options: opts,
		deadline: now.Add(cs.d.cfg.PromptTTL)}
	if kind == "exec_approval" {
		c.command, c.desc = p.Command, p.Description
	}
	if c.text == "" {
		c.text = p.Command
	}
	if old := cs.m[p.ID]; old != nil && old.timer != nil {
		old.timer.Stop()
	}
	cs.evict(device)
	c.timer = time.AfterFunc(cs.d.cfg.PromptTTL, func() { cs.expire(c) })
	cs.m[p.ID] = c
	return c.frame(now)
}

// evict drops the device's oldest cards beyond the bound.
func (cs *cards) evict(device string) {
	var mine []*card
	for _, c := range cs.m {
		if c.device == device {
			mine = append(mine, c)
		}
	}
	for len(mine) >= maxCardsPerDevice {
		oldest := 0
		for i, c := range mine {
			if c.deadline.Before(mine[oldest].deadline) {
				oldest = i
			}
		}
		c := mine[oldest]
		c.timer.Stop()
		delete(cs.m, c.id)
		mine = append(mine[:oldest], mine[oldest+1:]...)
	}
}

// expire closes a card whose time is up: the device is told
// prompt_done{expired}.
func (cs *cards) expire(c *card) {
	cs.mu.Lock()
	if cs.closed || cs.m[c.id] != c {
		cs.mu.Unlock()
		return
	}
	delete(cs.m, c.id)
	cs.mu.Unlock()
	cs.d.sendTo(c.device, mobilev1.Marshal(mobilev1.PromptDone{T: "prompt_done", ID: c.id, Expired: true}))
}

// get returns an open card.
func (cs *cards) get(id string) *card {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[id]
	if c == nil || time.Now().After(c.deadline) {
		return nil
	}
	return c
}

// done removes a card that was answered (or whose picker is gone).
func (cs *cards) done(c *card) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m[c.id] == c {
		c.timer.Stop()
		delete(cs.m, c.id)
	}
}

// take removes and returns the card of picker id if it was shown to
// device; nil when there is none (never shown there, or closed already).
// Whoever takes a card tells its device prompt_done, so it is told once.
func (cs *cards) take(id, device string) *card {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[id]
	if c == nil || c.device != device {
		return nil
	}
	c.timer.Stop()
	delete(cs.m, id)
	return c
}

// doneFrame is the card's prompt_done once its picker took value: the
// option that carries it (a typed clarify answer is "other"), or expired
// when nobody answered.
func (c *card) doneFrame(value string) []byte {
	if value == "" {
		return mobilev1.Marshal(mobilev1.PromptDone{T: "prompt_done", ID: c.id, Expired: true})
	}
	applied := "other"
	for _, o := range c.options {
		if o.Value == value && o.ID != "other" {
			applied = o.ID
			break
		}
	}
	if c.kind != "clarify" && applied == "other" {
		applied = value // an approval or confirm answered off the card's options
	}
	return mobilev1.Marshal(mobilev1.PromptDone{T: "prompt_done", ID: c.id, OptionID: applied})
}

// of returns the device's open cards, oldest first.
func (cs *cards) of(device string) []*card {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []*card
	now := time.Now()
	for _, c := range cs.m {
		if c.device == device && now.Before(c.deadline) {
			out = append(out, c)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].deadline.Before(out[j-1].deadline); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (cs *cards) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for id, c := range cs.m {
		c.timer.Stop()
		delete(cs.m, id)
	}
}

// answer takes a card's answer.
func (s *Session) answer(ctx context.Context, a mobilev1.PromptAnswer) error {
	c := s.d.cards.get(a.PromptID)
	if c == nil {
		s.reply(mobilev1.PromptDone{T: "prompt_done", ID: a.PromptID, Expired: true})
		return nil
	}
	if c.device != s.hubID {
		return ErrOtherCard.New()
	}
	gw := s.d.cfg.GW
	if !gw.PickerPending(c.id) { // answered on another device, or timed out
		s.d.cards.done(c)
		s.reply(mobilev1.PromptDone{T: "prompt_done", ID: c.id, Expired: true})
		return nil
	}
	applied, value, needText := c.resolve(a.OptionID, a.Text)
	if needText {
		s.d.cards.done(c)
		s.awaitText = c
		s.reply(mobilev1.PromptDone{T: "prompt_done", ID: c.id, OptionID: applied})
		return nil
	}
	if err := gw.SelectPicker(ctx, s.caller(), c.id, value); err != nil {
		return err
	}
	// The picker's close has normally told this device already, with the
	// same option; it did not if the picker went meanwhile without one.
	if s.d.cards.take(c.id, s.hubID) != nil {
		s.reply(mobilev1.PromptDone{T: "prompt_done", ID: c.id, OptionID: applied})
	}
	return nil
}

// answerText gives a text message to a clarify card answered "other"
// before, while that question still waits; done is false when the text is
// an ordinary message.
func (s *Session) answerText(ctx context.Context, text string) (done bool, err error) {
	c := s.awaitText
	if c == nil {
		return false, nil
	}
	s.awaitText = nil
	gw := s.d.cfg.GW
	if time.Now().After(c.deadline) || !gw.PickerPending(c.id) {
		return false, nil
	}
	_, value, _ := c.resolve("other", text)
	if err := gw.SelectPicker(ctx, s.caller(), c.id, value); err != nil {
		s.awaitText = c // let the person try again
		return true, err
	}
	return true, nil
}
