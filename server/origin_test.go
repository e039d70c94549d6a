package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/store"
)

// Where a message comes from stays visible in every form it reaches a
// device: a cron post's model names its job ("cron: <job>"), a delivery's
// says "delivery", live (role cron) and in history, where both are
// assistant messages (history's schema knows no cron role).
func TestMessageOriginInModel(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	ctx := context.Background()

	res, err := http.Post("http://"+g.Addr+"/api/send", "application/json", bytes.NewBufferString(`{"chat_id":"default","text":"backup finished"}`))
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		MessageID string `json:"message_id"`
	}
	json.NewDecoder(res.Body).Decode(&sent)
	res.Body.Close()
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == sent.MessageID })
	if testgw.Str(t, m, "role") != "cron" || testgw.Str(t, m, "model") != "delivery" {
		t.Fatalf("a delivery arrives as %s", m.Raw)
	}

	j, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "standup", Schedule: "every 1h", Text: "Time for the standup"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cron.RunNow(ctx, g.App.Store, j.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	c := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "Time for the standup" })
	if testgw.Str(t, c, "role") != "cron" || testgw.Str(t, c, "model") != "cron: standup" {
		t.Fatalf("a cron post arrives as %s", c.Raw)
	}

	h, err := history(t, d, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range h.Messages {
		if m.Role != "assistant" {
			t.Fatalf("history lists %s as %s", m.Text, m.Role)
		}
		got[m.Text] = m.Model
	}
	if got["backup finished"] != "delivery" || got["Time for the standup"] != "cron: standup" {
		t.Fatalf("history's models: %v", got)
	}
}
