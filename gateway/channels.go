package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Channel limits.
const (
	MaxChannelName = 100       // runes
	MaxIconBytes   = 512 << 10 // decoded
	// MaxDirectoryIcons bounds the icons of all channels together (base64,
	// as they go out): the whole directory is one frame (hello.ack,
	// channel.list), which the protocol does not page.
	MaxDirectoryIcons = 4 << 20
)

// Channels returns the directory, held in memory between channel events
// (directory.go): the slice is shared and must not be changed.
func (g *Gateway) Channels(ctx context.Context) ([]core.Channel, error) {
	return g.dir.channels(ctx, g.st)
}

// CreateChannel adds a channel, or a thread under parent.
func (g *Gateway) CreateChannel(ctx context.Context, from Caller, name, kind, parent string) error {
	name, err := channelName(name)
	if err != nil {
		return err
	}
	c := core.Channel{Name: name}
	switch kind {
	case "", core.KindChannel:
		if parent != "" {
			return ErrChannelParent.New()
		}
		c.Kind, c.ChatID = core.KindChannel, core.NewID("chan_")
	case core.KindThread:
		p, err := g.st.Channel(ctx, parent)
		if err != nil {
			return notFound(err, ErrUnknownParent, quote(parent))
		}
		if p.Kind == core.KindThread {
			return ErrNestedThread.New(parent)
		}
		c.Kind, c.ChatID, c.ParentChatID = core.KindThread, core.NewID("t_"), parent
	default:
		return ErrChannelKind.New(kind)
	}
	return g.commit(ctx, func(tx store.Tx) error {
		if err := g.roomForChannel(tx); err != nil {
			return err
		}
		return tx.PutChannel(c)
	}, &core.Event{Type: core.EvChannelCreated, Channel: &c, ReplyTo: from.Reply()})
}

// ChannelChange is one of the edits answered by channel.renamed.
type ChannelChange struct {
	Name       *string
	SetDefault bool
	Favorite   *bool
	Icon       *string // "" clears
	Color      *string // "" clears
	Automation *bool
}

// ChangeChannel edits a directory entry and broadcasts the full entry.
func (g *Gateway) ChangeChannel(ctx context.Context, from Caller, chatID string, ch ChannelChange) error {
	if ch.Name != nil {
		n, err := channelName(*ch.Name)
		if err != nil {
			return err
		}
		ch.Name = &n
	}
	if ch.Icon != nil && *ch.Icon != "" {
		if err := checkIcon(*ch.Icon); err != nil {
			return err
		}
	}
	if ch.Color != nil && *ch.Color != "" && !isColor(*ch.Color) {
		return ErrColor.New(*ch.Color)
	}
	var out core.Channel
	var lost []string // entries the default flag moves away from
	ev := &core.Event{Type: core.EvChannelRenamed, Channel: &out, ReplyTo: from.Reply()}
	err := g.commit(ctx, func(tx store.Tx) error {
		c, err := tx.Channel(chatID)
		if err != nil {
			return notFound(err, ErrUnknownChat, quote(chatID))
		}
		if ch.Name != nil {
			c.Name = *ch.Name
		}
		if ch.Favorite != nil {
			c.Favorite = *ch.Favorite
		}
		if ch.Icon != nil {
			if len(*ch.Icon) > len(c.Icon) {
				others, err := tx.IconBytes(chatID)
				if err != nil {
					return err
				}
				if others+int64(len(*ch.Icon)) > MaxDirectoryIcons {
					return ErrIconsTooLarge.New((others+int64(len(*ch.Icon)))>>10, MaxDirectoryIcons>>10)
				}
			}
			c.Icon = *ch.Icon
		}
		if ch.Color != nil {
			c.Color = strings.ToUpper(*ch.Color)
		}
		if ch.Automation != nil {
			if c.Kind == core.KindDefault || c.IsDefault {
				return ErrDefaultAutomate.New()
			}
			if c.Kind == core.KindThread {
				return ErrThreadAutomate.New()
			}
			c.Automation = *ch.Automation
		}
		if ch.SetDefault {
			if c.Kind == core.KindThread {
				return ErrThreadDefault.New()
			}
			if c.Automation {
				return ErrAutomateDefault.New()
			}
			if lost, err = tx.SetDefault(c.ChatID); err != nil {
				return err
			}
			c.IsDefault = true
		}
		if err := tx.PutChannel(c); err != nil {
			return err
		}
		out = c
		return nil
	}, ev)
	if err != nil {
		return err
	}
	// The old default changed too; devices that only heard of the new
	// one would show two defaults.
	for _, id := range lost {
		var c core.Channel
		if err := g.commit(ctx, func(tx store.Tx) error {
			var err error
			c, err = tx.Channel(id)
			return err
		}, &core.Event{Type: core.EvChannelRenamed, Channel: &c}); err != nil && !errors.Is(err, store.ErrNotFound) {
			// The request is answered already; a second answer would break
			// "exactly one reply".
			g.log.Error("announcing the former default channel", "chat_id", id, "err", err)
		}
	}
	return nil
}

// DeleteChannel removes a channel with its threads and all their history.
func (g *Gateway) DeleteChannel(ctx context.Context, from Caller, chatID string) error {
	var gone []core.Channel
	ev := &core.Event{Type: core.EvChannelDeleted, ChatID: chatID, ReplyTo: from.Reply()}
	err := g.commit(ctx, func(tx store.Tx) error {
		c, err := tx.Channel(chatID)
		if err != nil {
			return notFound(err, ErrUnknownChat, quote(chatID))
		}
		if c.IsDefault || c.Kind == core.KindDefault {
			return ErrDeleteDefault.New()
		}
		gone, err = tx.DeleteChannel(chatID)
		return err
	}, ev)
	if err != nil {
		return err
	}
	g.collectMedia() // the files of its messages
	// Turns of deleted lanes stop; their final writes find no message and
	// are dropped.
	g.turns.DropLanes(func(key core.Lane) bool {
		for _, c := range gone {
			if key.ChatID == c.ChatID || key.ThreadID == c.ChatID {
				return true
			}
		}
		return false
	})
	return nil
}

func channelName(n string) (string, error) {
	n = strings.TrimSpace(n)
	if n == "" {
		return "", ErrNameEmpty.New()
	}
	if !utf8.ValidString(n) {
		return "", ErrNameNotUTF8.New()
	}
	if utf8.RuneCountInString(n) > MaxChannelName {
		return "", ErrNameTooLong.New(MaxChannelName)
	}
	if strings.IndexFunc(n, unicode.IsControl) >= 0 {
		return "", ErrNameControl.New()
	}
	return n, nil
}

func isColor(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	for _, c := range s[1:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// checkIcon accepts a base64 PNG or JPEG of at most MaxIconBytes, judging
// the size from the encoded length before decoding anything.
func checkIcon(s string) error {
	if base64.StdEncoding.DecodedLen(len(s)) > MaxIconBytes+2 {
		return ErrIconTooLarge.New(MaxIconBytes >> 10)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return ErrIconBase64.New(err)
	}
	if len(b) > MaxIconBytes {
		return ErrIconTooLarge.New(MaxIconBytes >> 10)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) && !bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}) {
		return ErrIconType.New()
	}
	return nil
}
