package server_test

import (
	"fmt"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

type searchPage struct {
	Hits    []hit `json:"hits"`
	HasMore bool  `json:"has_more"`
	Total   int   `json:"total"`
}

// search.results says how many messages match (total, up to 1,000) and
// whether there are more (has_more); before_message_id fetches the page
// after a hit. 150 messages with a word, asked for 50 at a time, come in
// three pages, the first saying "of 150", each message once, newest first.
func TestSearchPagesAndTotal(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = okAgent{} })
	a := g.Dial(t, "phone")
	var sent []string
	for i := range 150 {
		sent = append(sent, send(t, a, def, fmt.Sprintf("walrus sighting %d", i)))
	}
	for range 150 {
		a.Expect("agent.idle", nil)
	}
	page := func(p map[string]any) searchPage {
		t.Helper()
		f := a.MustDo("search", client.Lane{}, p)
		var r searchPage
		if err := f.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var got []string
	before := ""
	for n := 0; n < 3; n++ {
		p := map[string]any{"query": "walrus", "scope": "chat", "chat_id": "default", "limit": 50}
		if before != "" {
			p["before_message_id"] = before
		}
		r := page(p)
		if len(r.Hits) != 50 || r.Total != map[bool]int{true: 150, false: 0}[n == 0] || r.HasMore != (n < 2) {
			t.Fatalf("page %d: %d hits, total %d, has_more %v", n, len(r.Hits), r.Total, r.HasMore)
		}
		got = append(got, hitIDs(r.Hits)...)
		before = r.Hits[49].MessageID
	}
	for i, id := range got {
		if id != sent[149-i] {
			t.Fatalf("hit %d is %s, want %s", i, id, sent[149-i])
		}
	}
	if r := page(map[string]any{"query": "sighting 7"}); r.Total != 1 || r.HasMore || len(r.Hits) != 1 {
		t.Fatalf("a single hit: %+v", r)
	}
	_, err := a.Do("search", client.Lane{}, map[string]any{"query": "walrus", "before_message_id": "m_gone"})
	wantCode(t, err, "not_found")
}
