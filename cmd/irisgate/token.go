package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// TokenCmd manages device tokens in the data directory's database; the
// running gateway sees changes at once.
type TokenCmd struct {
	Create TokenCreateCmd `cmd:"" help:"Create a token and print it (only this once)."`
	List   TokenListCmd   `cmd:"" help:"List tokens (never the tokens themselves)."`
	Revoke TokenRevokeCmd `cmd:"" help:"Revoke a token by its id."`
}

type dataFlag struct {
	Data string `help:"Data directory of the gateway." default:"./irisgate-data" env:"IRISGATE_DATA" type:"path"`
}

func (d dataFlag) open() (*store.Store, error) {
	if err := os.MkdirAll(d.Data, 0o700); err != nil {
		return nil, err
	}
	return store.Open(filepath.Join(d.Data, server.DBFile))
}

// TokenCreateCmd creates a token.
type TokenCreateCmd struct {
	dataFlag
	Name   string `help:"A name to recognise the token by." default:""`
	Device string `help:"Bind the token to this device_id: no other device may use it."`
}

// Run implements the command.
func (c *TokenCreateCmd) Run() error {
	tok, id, err := createToken(context.Background(), c.dataFlag, c.Name, c.Device)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %s; the token (shown only now):\n", id)
	fmt.Println(tok)
	return nil
}

// createToken makes a device token for the gateway whose data d names and
// returns it with its id. token create and pair both call it.
func createToken(ctx context.Context, d dataFlag, name, device string) (token, id string, err error) {
	st, err := d.open()
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	tok, t, err := gateway.CreateToken(ctx, st, name, device)
	return tok, t.ID, err
}

// TokenListCmd lists tokens.
type TokenListCmd struct{ dataFlag }

// Run implements the command.
func (c *TokenListCmd) Run() error {
	st, err := c.open()
	if err != nil {
		return err
	}
	defer st.Close()
	toks, err := st.Tokens(context.Background())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tDEVICE\tCREATED\tLAST USED")
	for _, t := range toks {
		used := "never"
		if !t.LastUsed.IsZero() {
			used = t.LastUsed.Format(time.DateTime)
		}
		dev := t.DeviceID
		if dev == "" {
			dev = "(any)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, dev, t.Created.Format(time.DateTime), used)
	}
	return w.Flush()
}

// TokenRevokeCmd revokes a token.
type TokenRevokeCmd struct {
	dataFlag
	ID string `arg:"" help:"The token's id (tok_…), as token list shows it."`
}

// Run implements the command.
func (c *TokenRevokeCmd) Run() error {
	st, err := c.open()
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RevokeToken(context.Background(), c.ID); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no token with id %s", c.ID)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "revoked %s\n", c.ID)
	return nil
}
