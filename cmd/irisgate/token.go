package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/irisgate/irisgate/admin"
)

// TokenCmd manages device tokens. With a gateway running, the commands act
// through its admin socket (a new token works at once, a revoked one's
// connections are closed at once); with none, on the data directory.
type TokenCmd struct {
	Create TokenCreateCmd `cmd:"" help:"Create a token and print it (only this once)."`
	List   TokenListCmd   `cmd:"" help:"List tokens (never the tokens themselves)."`
	Revoke TokenRevokeCmd `cmd:"" help:"Revoke a token, by its id (tok_…) or the token itself; its live connections are closed."`
}

// dataFlag names the gateway an admin command acts on, and its store for
// when the command acts on the data itself (no gateway answers).
type dataFlag struct {
	Data  string `help:"Data directory of the gateway (default: ./irisgate-data if it exists, else the gateway running for this user)." env:"IRISGATE_DATA" type:"path"`
	Store string `help:"The gateway's --store (its PostgreSQL database), needed only when no gateway answers: a running one is asked directly." env:"IRISGATE_STORE"`
}

// connect finds the gateway. create lets a command that stores something
// make a data directory the person named with --data.
func (d dataFlag) connect(ctx context.Context, create bool) (*admin.Client, error) {
	return admin.Connect(ctx, admin.Options{DataDir: d.Data, Create: create, Store: d.Store})
}

// connectTokens is connect for the token commands, which may act on the
// data directory of a gateway whose admin socket does not answer: the
// gateway reads its tokens from the database.
func (d dataFlag) connectTokens(ctx context.Context, create bool) (*admin.Client, error) {
	return admin.Connect(ctx, admin.Options{DataDir: d.Data, Create: create, Beside: true, Store: d.Store})
}

// where says, after a change, where it was made.
func where(c *admin.Client) string {
	if c.Live() {
		return "on the running gateway (" + c.DataDir() + ")"
	}
	if c.Beside() {
		return "in " + c.DataDir() + ", beside the gateway running there (its admin socket does not answer; it reads the change from the database within a second)"
	}
	return "in " + c.DataDir() + " (no gateway is running there; it takes effect when one starts)"
}

// TokenCreateCmd creates a token.
type TokenCreateCmd struct {
	dataFlag
	Name   string `help:"A name to recognise the token by." default:""`
	Device string `help:"Bind the token to this device_id: no other device may use it (mobile:ID binds only that Hermes Mobile phone)."`
}

// Run implements the command.
func (c *TokenCreateCmd) Run(o *cliIO) error {
	t, place, err := createToken(context.Background(), c.dataFlag, c.Name, c.Device)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Err, "created %s %s; the token (shown only now):\n", t.ID, place)
	fmt.Fprintln(o.Out, t.Value)
	return nil
}

// createToken makes a device token on the gateway d names (through its
// admin socket, or in its data directory when none runs) and says where.
func createToken(ctx context.Context, d dataFlag, name, device string) (admin.NewToken, string, error) {
	ac, err := d.connectTokens(ctx, true)
	if err != nil {
		return admin.NewToken{}, "", err
	}
	defer ac.Close()
	t, err := ac.CreateToken(ctx, name, device)
	return t, where(ac), err
}

// TokenListCmd lists tokens.
type TokenListCmd struct{ dataFlag }

// Run implements the command.
func (c *TokenListCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connectTokens(ctx, false)
	if err != nil {
		return err
	}
	defer ac.Close()
	toks, err := ac.Tokens(ctx)
	if err != nil {
		return err
	}
	return printTokens(o.Out, toks)
}

func printTokens(out io.Writer, toks []admin.Token) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tDEVICE\tCREATED\tLAST USED")
	for _, t := range toks {
		used := "never"
		if !t.LastUsed.IsZero() {
			used = t.LastUsed.Local().Format(time.DateTime)
		}
		dev := t.DeviceID
		if dev == "" {
			dev = "(any)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, dev, t.Created.Local().Format(time.DateTime), used)
	}
	return w.Flush()
}

// TokenRevokeCmd revokes a token.
type TokenRevokeCmd struct {
	dataFlag
	ID string `arg:"" name:"token" help:"The token's id (tok_…) as token list shows it, or the token itself (igt_…)."`
}

// Run implements the command.
func (c *TokenRevokeCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connectTokens(ctx, false)
	if err != nil {
		return err
	}
	defer ac.Close()
	r, err := ac.RevokeToken(ctx, c.ID)
	if err != nil {
		return err
	}
	name := ""
	if r.Name != "" {
		name = fmt.Sprintf(" (%s)", r.Name)
	}
	if ac.Live() {
		fmt.Fprintf(o.Err, "revoked %s%s; %d live connection(s) closed\n", r.ID, name, r.Closed)
	} else {
		fmt.Fprintf(o.Err, "revoked %s%s %s\n", r.ID, name, where(ac))
	}
	return nil
}

// ChannelsCmd lists the channel directory.
type ChannelsCmd struct{ dataFlag }

// Run implements the command.
func (c *ChannelsCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connect(ctx, false)
	if err != nil {
		return err
	}
	defer ac.Close()
	chs, err := ac.Channels(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tKIND\tIN")
	for _, ch := range chs {
		kind := ch.Kind
		if ch.IsDefault && kind != "default" {
			kind += " (default)"
		}
		if ch.Automation {
			kind += " (automation)"
		}
		in := ch.ParentChatID
		if in == "" {
			in = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ch.ChatID, ch.Name, kind, in)
	}
	return w.Flush()
}
