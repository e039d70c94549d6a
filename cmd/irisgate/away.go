package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// PushFlags configure the push backends of serve.
type PushFlags struct {
	FCMServiceAccount string   `help:"Firebase service-account JSON key file: turns on FCM push." type:"existingfile" env:"IRISGATE_FCM_SERVICE_ACCOUNT" group:"Push"`
	NtfyServer        string   `help:"ntfy server URL (e.g. https://ntfy.sh): turns on ntfy push." env:"IRISGATE_NTFY_SERVER" group:"Push"`
	NtfyToken         string   `help:"ntfy access token." env:"IRISGATE_NTFY_TOKEN" group:"Push"`
	WebPush           bool     `help:"Web Push for browsers (VAPID keys are made on first start)." default:"true" negatable:"" env:"IRISGATE_WEBPUSH" group:"Push"`
	WebPushContact    string   `help:"Contact in the VAPID token (mailto: or https:)." env:"IRISGATE_WEBPUSH_CONTACT" group:"Push"`
	PushContent       string   `help:"What a push reveals: full, preview or ids." default:"preview" enum:"full,preview,ids" env:"IRISGATE_PUSH_CONTENT" group:"Push"`
	DeliverTokens     []string `help:"Tokens that may deliver messages from other hosts (POST /api/send, the mobile deliver frame)." env:"IRISGATE_DELIVER_TOKENS" group:"Push"`
}

func (p PushFlags) config() server.PushConfig {
	return server.PushConfig{FCMServiceAccount: p.FCMServiceAccount, NtfyServer: p.NtfyServer, NtfyToken: p.NtfyToken,
		WebPush: p.WebPush, WebPushSubscriber: p.WebPushContact, Content: p.PushContent}
}

// SendCmd posts into a channel through the running gateway.
type SendCmd struct {
	URL    string `help:"The gateway's HTTP address." default:"http://localhost:8787" env:"IRISGATE_HTTP_URL"`
	To     string `help:"Channel id to post into." required:""`
	Thread string `help:"Thread id inside the channel."`
	Text   string `help:"The text (- reads standard input)." xor:"what" required:""`
	File   string `help:"A file to send (needs the gateway's media support)." xor:"what" required:"" type:"existingfile"`
	Token  string `help:"Delivery token, when the gateway is not on this machine." env:"IRISGATE_DELIVER_TOKEN"`
}

// Run implements the command.
func (c *SendCmd) Run() error {
	if c.File != "" {
		return errors.New("sending files needs the gateway's media support, which this build does not have yet")
	}
	text := c.Text
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		if err != nil {
			return err
		}
		text = string(b)
	}
	body, _ := json.Marshal(map[string]string{"chat_id": c.To, "thread_id": c.Thread, "text": text})
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(c.URL, "/")+"/api/send", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("is the gateway running at %s? %w", c.URL, err)
	}
	defer res.Body.Close()
	var out struct {
		MessageID string `json:"message_id"`
		Error     struct {
			Code, Message string
		} `json:"error"`
	}
	json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&out)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the gateway refused: %s (%s)", out.Error.Message, out.Error.Code)
	}
	fmt.Println(out.MessageID)
	return nil
}

// CronCmd manages scheduled jobs in the data directory; a running gateway
// picks changes up within a second.
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
	Prompt   string `help:"Prompt run through the agent; its answer is posted ([SILENT] posts nothing)." xor:"what" required:""`
	Text     string `help:"Fixed text to post instead." xor:"what" required:""`
	To       string `help:"Channel id to post into." default:"default"`
	Thread   string `help:"Thread id inside the channel."`
	Name     string `help:"A name for the job."`
}

// Run implements the command.
func (c *CronAddCmd) Run() error {
	st, err := c.open()
	if err != nil {
		return err
	}
	defer st.Close()
	j, err := cron.Add(context.Background(), st, store.CronJob{Name: c.Name, Schedule: c.Schedule, Prompt: c.Prompt, Text: c.Text, ChatID: c.To, ThreadID: c.Thread}, time.Now())
	if err != nil {
		return err
	}
	fmt.Printf("added %s, next run %s\n", j.ID, j.NextRun.Format(time.DateTime))
	return nil
}

// CronListCmd lists jobs.
type CronListCmd struct{ dataFlag }

// Run implements the command.
func (c *CronListCmd) Run() error {
	st, err := c.open()
	if err != nil {
		return err
	}
	defer st.Close()
	jobs, err := st.CronJobs(context.Background())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSCHEDULE\tCHANNEL\tSTATE\tLAST RUN\tNEXT RUN\tLAST ERROR")
	for _, j := range jobs {
		state := "on"
		if !j.Enabled {
			state = "paused"
			if j.NextRun.IsZero() {
				state = "done"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, j.Schedule, j.ChatID, state, when(j.LastRun), when(j.NextRun), j.LastErr)
	}
	return w.Flush()
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// CronIDCmd acts on one job; which action is the command's name.
type CronIDCmd struct {
	dataFlag
	ID string `arg:"" help:"Job id (cron_…)."`
}

// Run implements pause, resume, rm and run.
func (c *CronIDCmd) Run(kctx *kong.Context) error {
	st, err := c.open()
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	action := strings.Fields(kctx.Command())[1] // "cron pause <id>"
	if action == "run" {
		return cron.RunNow(ctx, st, c.ID, time.Now())
	}
	if action == "rm" {
		return st.DeleteCronJob(ctx, c.ID)
	}
	j, err := st.CronJob(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("no job %s", c.ID)
	}
	switch action {
	case "pause":
		j.Enabled = false
	case "resume":
		next, _, err := cron.Next(j.Schedule, time.Now())
		if err != nil {
			return err
		}
		j.Enabled, j.NextRun = true, next
	}
	return st.PutCronJob(ctx, j)
}
