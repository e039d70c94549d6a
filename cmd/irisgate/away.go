package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/server"
)

// PushFlags configure the push backends of serve.
type PushFlags struct {
	FCMServiceAccount string        `help:"Firebase service-account JSON key file: turns on FCM push." type:"existingfile" env:"IRISGATE_FCM_SERVICE_ACCOUNT" group:"Push"`
	NtfyServer        string        `help:"ntfy server URL (e.g. https://ntfy.sh): turns on ntfy push." env:"IRISGATE_NTFY_SERVER" group:"Push"`
	NtfyToken         string        `help:"ntfy access token." env:"IRISGATE_NTFY_TOKEN" group:"Push"`
	NtfyClick         string        `help:"URL a tap on an ntfy notification opens, with the push's ids in its query (e.g. an app's deep link); default: the chat in the web app." env:"IRISGATE_NTFY_CLICK" group:"Push"`
	WebPush           bool          `help:"Web Push for browsers (VAPID keys are made on first start)." default:"true" negatable:"" env:"IRISGATE_WEBPUSH" group:"Push"`
	WebPushContact    string        `help:"Contact in the VAPID token (mailto: or https:)." env:"IRISGATE_WEBPUSH_CONTACT" group:"Push"`
	PushContent       string        `help:"What a push reveals: full, preview or ids." default:"preview" enum:"full,preview,ids" env:"IRISGATE_PUSH_CONTENT" group:"Push"`
	PushHold          time.Duration `help:"How long a push waits for more news of its chat before it goes out: a burst becomes one notification (0 sends at once)." default:"${push_hold}" env:"IRISGATE_PUSH_HOLD" group:"Push"`
	PushTimeout       time.Duration `help:"Bound on each request to a push service." default:"${push_timeout}" env:"IRISGATE_PUSH_TIMEOUT" group:"Push"`
	DeliverTokens     []string      `help:"Tokens that may deliver messages from other hosts (POST /api/send, the mobile deliver frame)." env:"IRISGATE_DELIVER_TOKENS" group:"Push"`
}

func (p PushFlags) config() server.PushConfig {
	return server.PushConfig{FCMServiceAccount: p.FCMServiceAccount, NtfyServer: p.NtfyServer, NtfyToken: p.NtfyToken, NtfyClick: p.NtfyClick,
		WebPush: p.WebPush, WebPushSubscriber: p.WebPushContact, Content: p.PushContent, Hold: p.PushHold, Timeout: p.PushTimeout}
}

// SendCmd posts into a channel through the running gateway: on this
// machine through its admin socket (no token), on another over HTTP with
// a delivery token.
type SendCmd struct {
	dataFlag
	URL    string `help:"The gateway's HTTP address, when it runs on another machine (then --token is needed); without it the gateway on this machine is used." env:"IRISGATE_HTTP_URL"`
	To     string `help:"Channel to post into: its id or its name (irisgate channels lists them)." required:""`
	Thread string `help:"Thread id inside the channel."`
	Text   string `help:"The text (- reads standard input); with --file, the file's caption."`
	File   string `help:"A file to send: streamed into the gateway's media store, then posted." type:"existingfile"`
	Token  string `help:"Delivery token (one of the gateway's --deliver-tokens), for --url." env:"IRISGATE_DELIVER_TOKEN"`
}

// Validate implements kong.Validatable.
func (c *SendCmd) Validate() error {
	if c.Text == "" && c.File == "" {
		return errors.New("give --text, --file or both")
	}
	return nil
}

// Run implements the command.
func (c *SendCmd) Run(o *cliIO) error {
	return c.send(context.Background(), os.Stdin, o.Out, o.Err)
}

// sendProgressMin is the file size from which send reports its progress.
const sendProgressMin = 1 << 20

// send posts; stdout gets the message id (for scripts), stderr what a
// person watching wants to know.
func (c *SendCmd) send(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	text := c.Text
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return err
		}
		text = string(b)
	}
	// The request goes to the gateway on this machine through its admin
	// socket, or over HTTP to --url.
	do := (&http.Client{Timeout: 30 * time.Second}).Do
	url := strings.TrimRight(c.URL, "/") + "/api/send"
	if c.URL == "" {
		ac, err := c.connect(ctx, false)
		if err != nil {
			return err
		}
		defer ac.Close()
		do, url = ac.Do, "http://irisgate/api/send"
	}
	var (
		req *http.Request
		err error
	)
	if c.File == "" {
		body, _ := json.Marshal(map[string]string{"chat_id": c.To, "thread_id": c.Thread, "text": text})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
	} else {
		// A large file takes as long as it takes: no overall timeout.
		if c.URL != "" {
			do = (&http.Client{}).Do
		}
		var wait func()
		if req, wait, err = c.fileRequest(ctx, url, text, stderr); err != nil {
			return err
		}
		defer wait()
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	res, err := do(req)
	if err != nil {
		if c.URL == "" {
			return err
		}
		return fmt.Errorf("is the gateway running at %s? %w", c.URL, err)
	}
	defer res.Body.Close()
	var out struct {
		MessageID string `json:"message_id"`
		Media     []struct {
			MediaID  string `json:"media_id"`
			Filename string `json:"filename"`
			Size     int64  `json:"size"`
			SHA256   string `json:"sha256"`
		} `json:"media"`
		Error struct {
			Code, Message string
		} `json:"error"`
	}
	json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&out)
	if res.StatusCode != http.StatusOK {
		if out.Error.Code == "" {
			return fmt.Errorf("the gateway answered %s", res.Status)
		}
		err := fmt.Errorf("the gateway refused: %s (%s)", out.Error.Message, out.Error.Code)
		if res.StatusCode == http.StatusForbidden && c.Token == "" {
			return &admin.Hinted{Err: err, Hint: "give a delivery token with --token (IRISGATE_DELIVER_TOKEN), or run irisgate send without --url on the gateway's machine"}
		}
		return err
	}
	for _, m := range out.Media {
		fmt.Fprintf(stderr, "sent %s (%s, sha256 %s) as %s\n", m.Filename, humanBytes(m.Size), m.SHA256, m.MediaID)
	}
	fmt.Fprintln(stdout, out.MessageID)
	return nil
}

// fileRequest makes the multipart request that streams c.File: the form is
// written into a pipe as the HTTP client sends it, so no more than a
// buffer of the file is in memory. wait returns once the writer is done;
// call it after the response is in (the client closes the pipe).
func (c *SendCmd) fileRequest(ctx context.Context, url, caption string, stderr io.Writer) (*http.Request, func(), error) {
	f, err := os.Open(c.File)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	name := filepath.Base(c.File)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var src io.Reader = f
	if st.Size() >= sendProgressMin {
		src = &progress{r: f, total: st.Size(), name: name, w: stderr}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		pw.CloseWithError(writeForm(mw, [][2]string{{"chat_id", c.To}, {"thread_id", c.Thread}, {"text", caption}}, name, src))
	}()
	wait := func() {
		pr.CloseWithError(errors.New("the request is over")) // a writer the server stopped reading gives up
		<-done
	}
	return req, wait, nil
}

// writeForm writes the fields, then the file (the gateway wants the target
// before the bytes, to refuse a bad one before storing anything).
func writeForm(mw *multipart.Writer, fields [][2]string, filename string, file io.Reader) error {
	for _, kv := range fields {
		if kv[1] == "" {
			continue
		}
		if err := mw.WriteField(kv[0], kv[1]); err != nil {
			return err
		}
	}
	ct := mime.TypeByExtension(strings.ToLower(filepath.Ext(filename)))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := textproto.MIMEHeader{}
	quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(filename) // as multipart.CreateFormFile quotes
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+quoted+`"`)
	h.Set("Content-Type", ct)
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, file); err != nil {
		return err
	}
	return mw.Close()
}

// progress reports, every tenth of the file, how much of it was handed to
// the connection.
type progress struct {
	r     io.Reader
	w     io.Writer
	name  string
	total int64
	n     int64
	tenth int64
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if t := p.n * 10 / p.total; t > p.tenth {
		p.tenth = t
		fmt.Fprintf(p.w, "sending %s: %s of %s (%d%%)\n", p.name, humanBytes(p.n), humanBytes(p.total), p.n*100/p.total)
	}
	return n, err
}

// CronCmd manages scheduled jobs: through the running gateway's admin
// socket, or in the data directory when none runs (a gateway picks up
// changes within a second either way).
type CronCmd struct {
	Add    CronAddCmd  `cmd:"" help:"Add a job."`
	List   CronListCmd `cmd:"" help:"List jobs."`
	Pause  CronIDCmd   `cmd:"" help:"Pause a job."`
	Resume CronIDCmd   `cmd:"" help:"Resume a paused job."`
	Rm     CronIDCmd   `cmd:"" help:"Delete a job."`
	Run    CronIDCmd   `cmd:"" help:"Run a job now (resuming it if paused)."`
}

// CronAddCmd adds a job.
type CronAddCmd struct {
	dataFlag
	Schedule string `arg:"" help:"5-field cron expression (\"0 9 * * 1-5\"), \"every 30m\", a delay (\"30m\") or a time (\"2026-12-01T09:00\")."`
	Prompt   string `help:"Prompt run through the agent; its answer is posted ([SILENT] posts nothing). Give this or --text." xor:"what"`
	Text     string `help:"Fixed text to post instead of a prompt's answer." xor:"what"`
	To       string `help:"Channel to post into: its id or its name (irisgate channels lists them)." default:"default"`
	Thread   string `help:"Thread id inside the channel."`
	Name     string `help:"A name for the job."`
}

// Validate implements kong.Validatable.
func (c *CronAddCmd) Validate() error {
	if c.Prompt == "" && c.Text == "" {
		return errors.New("give --prompt (run through the agent) or --text (posted as is)")
	}
	return nil
}

// Run implements the command.
func (c *CronAddCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connect(ctx, true)
	if err != nil {
		return err
	}
	defer ac.Close()
	j, err := ac.AddJob(ctx, admin.JobSpec{Name: c.Name, Schedule: c.Schedule, Prompt: c.Prompt, Text: c.Text, ChatID: c.To, ThreadID: c.Thread})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "added %s %q into %s, next run %s\n", j.ID, j.Name, target(j), cron.When(j.NextRun))
	if !ac.Live() {
		fmt.Fprintf(o.Err, "no gateway is running on %s: the job runs once one does\n", ac.DataDir())
	}
	return nil
}

func target(j admin.Job) string {
	if j.ThreadID != "" {
		return j.ChatID + "/" + j.ThreadID
	}
	return j.ChatID
}

// CronListCmd lists jobs.
type CronListCmd struct{ dataFlag }

// Run implements the command.
func (c *CronListCmd) Run(o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connect(ctx, false)
	if err != nil {
		return err
	}
	defer ac.Close()
	jobs, err := ac.Jobs(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSCHEDULE\tCHANNEL\tSTATE\tLAST RUN\tNEXT RUN\tLAST ERROR")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, j.Schedule, target(j), j.State, cron.When(j.LastRun), cron.When(j.NextRun), j.LastErr)
	}
	return w.Flush()
}

// CronIDCmd acts on one job; which action is the command's name.
type CronIDCmd struct {
	dataFlag
	ID string `arg:"" help:"Job id (cron_…), as cron list shows it."`
}

// Run implements pause, resume, rm and run, and says what it did.
func (c *CronIDCmd) Run(kctx *kong.Context, o *cliIO) error {
	ctx := context.Background()
	ac, err := c.connect(ctx, false)
	if err != nil {
		return err
	}
	defer ac.Close()
	action := strings.Fields(kctx.Command())[1] // "cron pause <id>"
	j, err := ac.ActOnJob(ctx, action, c.ID)
	if err != nil {
		return err
	}
	job := fmt.Sprintf("%s %q", j.ID, j.Name)
	switch action {
	case cron.ActPause:
		fmt.Fprintf(o.Out, "paused %s: it will not run until resumed\n", job)
	case cron.ActResume:
		fmt.Fprintf(o.Out, "resumed %s, next run %s\n", job, cron.When(j.NextRun))
	case cron.ActRemove:
		fmt.Fprintf(o.Out, "removed %s\n", job)
	case cron.ActRun:
		if ac.Live() {
			fmt.Fprintf(o.Out, "%s runs now, into %s\n", job, target(j))
		} else {
			fmt.Fprintf(o.Out, "%s will run into %s as soon as a gateway starts on %s\n", job, target(j), ac.DataDir())
		}
	}
	return nil
}
