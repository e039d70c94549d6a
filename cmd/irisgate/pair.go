package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// PairCmd makes a token for one new device and prints the link (and QR
// code) that pairs a phone's or a computer's browser with it.
type PairCmd struct {
	dataFlag
	Name      string `help:"A name to recognise the device's token by in token list (default: paired <date>)."`
	Device    string `help:"Bind the token to this device_id: only an app that connects as it may use the token (not the web app, which picks its own id)."`
	Listen    string `help:"The gateway's --listen address, for the addresses in the link (default: the running gateway's, else :8787)." env:"IRISGATE_LISTEN"`
	PublicURL string `help:"The web app's address as devices reach it (behind a reverse proxy: https://iris.example.com/; default: the running gateway's --public-url)." env:"IRISGATE_PUBLIC_URL"`
	QR        bool   `help:"Print the link as a QR code too." default:"true" negatable:""`
}

// Run implements the command.
func (c *PairCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connect(ctx, true)
	if err != nil {
		return err
	}
	defer ac.Close()
	// The running gateway knows where it listens and how devices reach
	// it; flags (or the environment) say otherwise, and stand in when
	// none runs.
	listen, public := c.Listen, c.PublicURL
	if info := ac.Info(); ac.Live() {
		if listen == "" {
			listen = info.Listen
		}
		if public == "" {
			public = info.PublicURL
		}
	}
	if listen == "" {
		listen = ":8787"
	}
	// The addresses first: a bad --public-url must not cost a token.
	r, err := machineReach(listen, public)
	if err != nil {
		return err
	}
	name := c.Name
	if name == "" {
		name = "paired " + time.Now().Format("2006-01-02 15:04")
	}
	t, err := ac.CreateToken(ctx, name, c.Device)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Err, "created %s (%q) %s\n", t.ID, name, where(ac))
	p := pairing{Reach: r, Token: t.Value, Device: c.Device, CLI: cliName(), QR: c.QR, Color: colorTerminal(os.Stdout)}
	p.print(o.Out)
	return nil
}

// pairing is what pair prints.
type pairing struct {
	Reach     reach
	Token     string
	Device    string
	CLI       string
	QR, Color bool
}

func (p pairing) print(w io.Writer) {
	fmt.Fprintf(w, "A new device token, shown only this once:\n\n    %s\n\n", p.Token)
	ws := wsOf(p.Reach.Pair)
	if p.Device != "" {
		// The web app makes up its own device id, so a link would pair a
		// browser that the gateway then turns away.
		fmt.Fprintf(w, "It is bound to device %q: set up the app that connects as %q with it, at %s\n", p.Device, p.Device, ws)
		fmt.Fprintf(w, "(for a browser, run pair without --device: the web app chooses its own device id).\n\n")
		fmt.Fprintf(w, "From a terminal:  %s chat --url %s --device %s --token %s\n", p.CLI, ws, shellQuote(p.Device), p.Token)
		return
	}
	link := pairLink(p.Reach.Pair, p.Token)
	fmt.Fprintf(w, "Open this on the device, or point its camera at the code:\n\n    %s\n\n", link)
	if p.QR {
		if bits, err := qrMatrix(link); err == nil {
			io.WriteString(w, indentBlock(renderQR(bits, p.Color), "    "))
			io.WriteString(w, "\n")
		}
	}
	if p.Reach.Container {
		fmt.Fprintf(w, "In a container this link names localhost: for a phone, set IRISGATE_PUBLIC_URL to your machine's address.\n")
	}
	if p.Reach.LoopbackOnly {
		fmt.Fprintf(w, "The gateway listens on loopback only: a phone cannot reach %s (serve --listen :PORT lets it).\n", p.Reach.Pair)
	}
	fmt.Fprintf(w, "Other apps connect to %s with the token.\n", ws)
}
