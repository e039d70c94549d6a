package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/gateway/slash"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Caller is the connection and request a command comes from.
type Caller = hub.Caller

// MaxTextBytes bounds a message's text.
const MaxTextBytes = 64 << 10

// maxMessageID bounds a message id a device names (ours are far shorter).
const maxMessageID = 128

// SendRequest is a message a person sends.
type SendRequest struct {
	Lane       core.Lane
	Text       string
	ReplyTo    string
	MediaRefs  []string
	AutoThread bool
}

// Send stores a person's message, echoes it to every device (with the
// request id to the sender) and queues an agent turn for it.
func (g *Gateway) Send(ctx context.Context, from Caller, req SendRequest) error {
	ch, err := g.checkSend(ctx, &req)
	if err != nil {
		return err
	}
	refs, err := g.checkRefs(ctx, from.DeviceID(), req.MediaRefs)
	if err != nil {
		return err
	}
	if g.turns.Down() {
		return turn.ErrShuttingDown.New()
	}
	name, args, isCmd := slash.Parse(req.Text)
	var th *core.Channel
	if req.AutoThread && req.Lane.ThreadID == "" && ch.IsDefault && strings.TrimSpace(req.Text) != "" && !strings.HasPrefix(req.Text, "/") {
		if err := g.autoThread(from.Token(), time.Now()); err != nil {
			return err
		}
		th = &core.Channel{ChatID: core.NewID("t_"), Name: threadTitle(req.Text), Kind: core.KindThread, ParentChatID: ch.ChatID, Auto: true}
		req.Lane.ThreadID = th.ChatID
	}
	m := core.Message{ID: core.NewMessageID(), Lane: req.Lane, Role: core.RoleUser, Text: req.Text, ReplyTo: req.ReplyTo, TS: time.Now().UnixMilli()}
	var voiceNote string
	if !isCmd && strings.TrimSpace(req.Text) == "" && len(refs) > 0 {
		// After the parse: a transcript never runs as a slash command.
		m.Text, voiceNote = g.transcribe(ctx, from.DeviceID(), req.Lane, refs)
	}
	var slot *turn.Slot
	if !isCmd {
		// Full bounds refuse the message before anything is stored, the
		// auto-thread it would open included.
		if slot, err = g.turns.Reserve(req.Lane, from.Token()); err != nil {
			return err
		}
	}
	if th != nil {
		if err := g.commit(ctx, func(tx store.Tx) error {
			if err := g.roomForChannel(tx); err != nil {
				return err
			}
			return tx.PutChannel(*th)
		}, &core.Event{Type: core.EvChannelCreated, Channel: th}); err != nil {
			g.turns.Release(m.Lane, slot)
			return err
		}
	}
	p, err := g.queueMessage(ctx, from, refs, &m, isCmd)
	if err == nil {
		err = p.Wait()
	}
	if err != nil {
		if !isCmd {
			g.turns.Release(m.Lane, slot)
		}
		return err
	}
	if isCmd {
		slash.Run(ctx, slashEnv{g}, from, m.Lane, name, args)
		return nil
	}
	if voiceNote != "" {
		g.systemMessage(ctx, m.Lane, voiceNote)
	}
	if err := g.turns.EnqueueReserved(turn.Pending{Msg: m, Origin: from.Conn, Slot: slot}); err != nil && !errors.Is(err, turn.ErrShuttingDown) {
		return err
	}
	return nil
}

// checkSend refuses what a send may be refused for before anything is
// looked up or stored, and resolves its lane.
func (g *Gateway) checkSend(ctx context.Context, req *SendRequest) (core.Channel, error) {
	// A flood into a full lane is refused before it costs a lookup.
	if req.Lane.ChatID != "" && !slash.Is(req.Text) && g.turns.QueueFull(req.Lane) {
		g.cfg.Metrics.Limited.WithLabelValues("lane_queue").Inc()
		return core.Channel{}, turn.ErrQueueFull.New(turn.MaxQueued)
	}
	ch, err := g.resolveLane(ctx, &req.Lane)
	if err != nil {
		return ch, err
	}
	if ch.Automation {
		return ch, ErrAutomationSend.New(ch.Name)
	}
	if len(req.Text) > MaxTextBytes {
		return ch, ErrTextTooLong.New(len(req.Text), MaxTextBytes)
	}
	if !utf8.ValidString(req.Text) {
		return ch, ErrTextNotUTF8.New()
	}
	if strings.TrimSpace(req.Text) == "" && len(req.MediaRefs) == 0 {
		return ch, ErrEmptyMessage.New()
	}
	return ch, nil
}

// queueMessage queues the commit of a person's message m (with its media
// refs) and its echo, and of the turn it is owed unless it is a command.
// The turn is owed from the moment the message is stored: a restart
// before it runs still answers it.
func (g *Gateway) queueMessage(ctx context.Context, from Caller, refs []string, m *core.Message, isCmd bool) (*commit.Pending, error) {
	return g.commits.Enqueue(ctx, func(tx store.Tx) error {
		if err := attach(tx, from.DeviceID(), refs, m); err != nil {
			return err
		}
		if err := tx.InsertMessage(*m, false); err != nil {
			return err
		}
		if isCmd {
			return nil
		}
		return tx.QueueTurn(m.Lane, m.ID)
	}, &core.Event{Type: core.EvMessage, Lane: m.Lane, Message: m, ReplyTo: from.Reply()})
}

// resolveLane fills in the default channel when the chat id is absent and
// checks that the lane exists. It returns the lane's channel (without its
// icon), from the directory held in memory (directory.go).
func (g *Gateway) resolveLane(ctx context.Context, l *core.Lane) (core.Channel, error) {
	var ch core.Channel
	var rerr error
	err := g.dir.view(ctx, g.st, func(byID map[string]core.Channel, def string) {
		if l.ChatID == "" {
			l.ChatID = def
		}
		var ok bool
		if ch, ok = byID[l.ChatID]; !ok {
			rerr = ErrUnknownChat.New(quote(l.ChatID))
			return
		}
		if ch.Kind == core.KindThread {
			rerr = ErrChatIsThread.New(l.ChatID)
			return
		}
		if l.ThreadID != "" {
			if th, ok := byID[l.ThreadID]; !ok || th.Kind != core.KindThread || th.ParentChatID != l.ChatID {
				rerr = ErrUnknownThread.New(l.ThreadID, l.ChatID)
			}
		}
	})
	if err != nil {
		return ch, err
	}
	return ch, rerr
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}

// threadTitle derives an instant title for an auto-thread from its first
// message: the first line, cut at a word near 48 characters.
func threadTitle(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	r := []rune(line)
	if len(r) <= 48 {
		return line
	}
	cut := string(r[:48])
	if i := strings.LastIndexByte(cut, ' '); i > 24 {
		cut = cut[:i]
	}
	return cut + "…"
}

// Stop ends the lane's running turn; the answer is the turn's agent.idle.
// With nothing running the answer is an agent.idle at once.
func (g *Gateway) Stop(ctx context.Context, from Caller, lk core.Lane) error {
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	g.turns.Stop(from, lk)
	return nil
}

// Steer hands text to the lane's running turn (turn.Runner.Steer); with
// no turn running it is simply sent.
func (g *Gateway) Steer(ctx context.Context, from Caller, lk core.Lane, text string) error {
	if strings.TrimSpace(text) == "" {
		return ErrEmptySteer.New()
	}
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	if steered, err := g.turns.Steer(ctx, from, lk, text); steered || err != nil {
		return err
	}
	return g.Send(ctx, from, SendRequest{Lane: lk, Text: text})
}

// maxDeleteIDs bounds one message.delete.
const maxDeleteIDs = 1000

// DeleteMessages removes messages of a lane from history and outbox and
// tells every device. Ids already gone are announced all the same.
func (g *Gateway) DeleteMessages(ctx context.Context, from Caller, lk core.Lane, ids []string) error {
	if len(ids) == 0 {
		return ErrNoMessageIDs.New()
	}
	if len(ids) > maxDeleteIDs {
		return ErrTooManyIDs.New(maxDeleteIDs)
	}
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	if err := g.commit(ctx, func(tx store.Tx) error { return tx.DeleteMessages(lk, ids) },
		&core.Event{Type: core.EvMessageDeleted, Lane: lk, MessageIDs: ids, ReplyTo: from.Reply()}); err != nil {
		return err
	}
	g.collectMedia() // their files, unless other messages have the same bytes
	return nil
}

// ReadReceipt records that a person saw a message on one device and tells
// the others; a request with an id is answered with the receipt.
func (g *Gateway) ReadReceipt(ctx context.Context, from Caller, lk core.Lane, messageID string) error {
	if messageID == "" {
		return ErrReceiptNoID.New()
	}
	if len(messageID) > maxMessageID {
		return ErrMessageIDTooLong.New(maxMessageID)
	}
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	// Only a message of the lane can be read: a receipt for anything else
	// would be stored (and told to every device) for nothing.
	if m, err := g.st.Message(ctx, messageID); errors.Is(err, store.ErrNotFound) || (err == nil && m.Lane != lk) {
		return ErrReceiptUnknown.New(quote(messageID))
	} else if err != nil {
		return err
	}
	dev := from.DeviceID()
	now := time.Now().UnixMilli()
	if err := g.commit(ctx, func(tx store.Tx) error { return tx.MarkRead(lk, messageID, dev, now) },
		&core.Event{Type: core.EvReadReceipt, Lane: lk, MessageIDs: []string{messageID}, NotTo: dev}); err != nil {
		return err
	}
	// The other devices get the receipt; the sender's request, when it
	// carries an id, gets its one reply: the same receipt, with the id.
	if from.Conn != nil && from.ReqID != 0 {
		from.Conn.SendEvent(&core.Event{Type: core.EvReadReceipt, Lane: lk, MessageIDs: []string{messageID}, TS: now}, from.ReqID)
	}
	return nil
}

// History limits. A page holds at most MaxHistory messages and, beyond its
// newest message, MaxHistoryBytes of them: a page of long replies is cut
// short (has_more set), as a page of many is.
const (
	DefaultHistory  = 50
	MaxHistory      = 200
	MaxHistoryBytes = 1 << 20
)

// History returns a page of a lane's messages, oldest first.
func (g *Gateway) History(ctx context.Context, lk core.Lane, before string, limit int) ([]core.Message, bool, error) {
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return nil, false, err
	}
	switch {
	case limit <= 0:
		limit = DefaultHistory
	case limit > MaxHistory:
		limit = MaxHistory
	}
	ms, more, err := g.st.History(ctx, lk, before, limit)
	if err != nil {
		return nil, false, notFound(err, ErrUnknownBefore, quote(before))
	}
	// Keep the newest messages that fit; the page goes on from the
	// oldest kept, so nothing is skipped.
	size := 0
	for i := len(ms) - 1; i >= 0; i-- {
		size += messageSize(&ms[i])
		if size > MaxHistoryBytes && i < len(ms)-1 {
			return ms[i+1:], true, nil
		}
	}
	return ms, more, nil
}

// messageSize is about what a message takes in a frame.
func messageSize(m *core.Message) int {
	return 256 + len(m.Text) + len(m.Reasoning) + 256*len(m.Media)
}

// RegisterPush stores a device's push addresses.
// A browser's Web Push subscription (JSON) may come along; it is checked
// for an endpoint and keys before it is kept. An address its service
// would refuse (an ntfy topic ntfy does not accept) refuses the request,
// and nothing is stored.
func (g *Gateway) RegisterPush(ctx context.Context, from Caller, fcmToken, ntfyTopic, webPush string) error {
	if err := checkPushAddresses(fcmToken, ntfyTopic); err != nil {
		return err
	}
	// The hello may have left the device's row queued (seeDevice): an
	// empty write through the log waits for it, so the row that gets a
	// push address also names the token it came with, and revoking that
	// token ends the registration. A row lost with the queue (a stop
	// before it committed) fails the request instead: nothing is stored.
	if err := g.commits.Commit(ctx, nil, nil); err != nil {
		return err
	}
	if webPush != "" && webPush != "null" {
		// PushSubscription.toJSON() has the record's shape: its endpoint
		// and keys are kept, the rest (expirationTime) is not.
		var sub record.WebPush
		if len(webPush) > 4096 || json.Unmarshal([]byte(webPush), &sub) != nil || sub.Check() != nil {
			return ErrWebPush.New()
		}
		if err := g.st.SetWebPush(ctx, from.DeviceID(), sub); err != nil {
			return err
		}
		if fcmToken == "" && ntfyTopic == "" {
			return nil
		}
	}
	return g.st.SetPushRegistration(ctx, from.DeviceID(), fcmToken, ntfyTopic)
}
