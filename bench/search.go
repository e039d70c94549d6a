package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// The search scenario fills the store with SearchMessages messages of
// synthetic text (a Zipf-distributed vocabulary, some words accented) over
// channels and threads, then a device sends a mix of searches over its
// WebSocket, one at a time, and the round trips are timed.

const (
	searchVocabSize = 50_000
	searchChannels  = 20
	searchThreads   = 3 // per channel
)

// searchKinds are the queries of the mix, in the order they rotate.
var searchKinds = []string{"common word", "medium word", "rare word", "two words", "3-letter prefix", "word + prefix",
	"accent folded", "scope chat", "no match"}

func runSearch(ctx context.Context, o *Options) (r Result) {
	n := o.SearchMessages
	r.Title = fmt.Sprintf("(f) Search: full-text search over %s messages", commas(int64(n)))
	g, err := startGateway(o, "search", nullAgent{}, nil)
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()

	lanes, scoped, err := searchLanes(ctx, g)
	if err != nil {
		r.Err = err
		return r
	}
	rnd := rand.New(rand.NewSource(1))
	vocab := searchVocab(rnd, searchVocabSize)
	zipf := rand.NewZipf(rnd, 1.07, 2, uint64(len(vocab)-1))
	text := func() string {
		w := make([]string, 5+rnd.Intn(36))
		for i := range w {
			w[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(w, " ")
	}
	o.progress("search: filling %s messages", commas(int64(n)))
	// Most messages are imported in one transaction (indexed in one go at
	// its end); the last ones go in the way live messages do, a
	// transaction each, so the index also has the small recent segments
	// it has in use.
	live := min(2000, n/10)
	start := time.Now()
	i := 0
	ts := time.Now().Add(-time.Duration(n) * time.Second).UnixMilli()
	next := func() core.Message {
		i++
		return core.Message{ID: fmt.Sprintf("m_bench%08d", i), Lane: lanes[rnd.Intn(len(lanes))], Role: []string{core.RoleUser, core.RoleAssistant}[i%2],
			Text: text(), TS: ts + int64(i)*1000}
	}
	if _, err := g.db.ImportMessages(ctx, func() (core.Message, bool) {
		if i >= n-live || ctx.Err() != nil {
			return core.Message{}, false
		}
		return next(), true
	}); err != nil {
		r.Err = fmt.Errorf("filling: %w", err)
		return r
	}
	importTime := time.Since(start)
	liveStart := time.Now()
	for i < n && ctx.Err() == nil {
		m := next()
		if err := g.app.Store.Write(ctx, func(tx store.Tx) error { return tx.InsertMessage(m, false) }); err != nil {
			r.Err = fmt.Errorf("filling: %w", err)
			return r
		}
	}
	liveTime := time.Since(liveStart)
	if ctx.Err() != nil {
		r.Err = ctx.Err()
		return r
	}
	indexBytes, _ := g.db.SearchIndexBytes(ctx)
	dbBytes := fileSize(filepath.Join(g.dir, server.DBFile))

	queries := o.SearchQueries
	mix := searchMix(rnd, vocab, scoped, queries+queries/10)
	o.progress("search: %d queries", queries)
	dev, err := dialRaw(ctx, g.url, "searcher")
	if err != nil {
		r.Err = err
		return r
	}
	defer dev.close()
	answers := make(chan searchAnswer, 1)
	dev.serve(func(b []byte) {
		if string(frameType(b)) != irisv1.TypeSearchResults && string(frameType(b)) != irisv1.TypeError {
			return
		}
		// The answer is timed from here: decoding it is the app's work.
		at := time.Now()
		var env irisv1.Envelope
		var res irisv1.SearchResults
		if json.Unmarshal(b, &env) != nil || env.Type == irisv1.TypeError || json.Unmarshal(env.Payload, &res) != nil {
			answers <- searchAnswer{id: env.ID, at: at, err: true}
			return
		}
		answers <- searchAnswer{id: env.ID, at: at, hits: len(res.Hits)}
	})
	byKind := map[string][]time.Duration{}
	var all, inStore []time.Duration
	var hits, errs int
	for k, q := range mix {
		p, _ := json.Marshal(q.req)
		t0 := time.Now()
		id, err := dev.send(ctx, irisv1.TypeSearch, "", p)
		if err != nil {
			r.Err = err
			return r
		}
		var a searchAnswer
		select {
		case a = <-answers:
		case <-dev.done:
			r.Err = fmt.Errorf("connection ended: %v", dev.err)
			return r
		case <-ctx.Done():
			r.Err = ctx.Err()
			return r
		case <-time.After(30 * time.Second):
			r.Err = fmt.Errorf("no search.results within 30s")
			return r
		}
		d := a.at.Sub(t0)
		if a.id != id || a.err {
			errs++
		}
		if k < queries/10 {
			continue // warming the caches
		}
		all = append(all, d)
		byKind[q.kind] = append(byKind[q.kind], d)
		hits += a.hits
		// The same query in the store alone, without the socket and JSON.
		lane := (*core.Lane)(nil)
		if q.req.Scope == gateway.ScopeChat {
			lane = &core.Lane{ChatID: q.req.ChatID}
		}
		t1 := time.Now()
		g.db.Search(ctx, q.req.Query, lane, q.req.Limit)
		inStore = append(inStore, time.Since(t1))
	}
	slices.Sort(all)
	slices.Sort(inStore)
	p50, p95 := pct(all, 0.50), pct(all, 0.95)

	r.setup("%s messages of 5–40 words from a %s-word Zipf vocabulary (1 word in 20 accented), spread over %d channels", commas(int64(n)), commas(searchVocabSize), searchChannels)
	r.setup("and %d threads each; %s imported in one transaction (indexed at its end), the last %s inserted one by one.", searchThreads, commas(int64(n-live)), commas(int64(live)))
	r.setup("Then one device sends %d searches (limit 20) one at a time over its WebSocket, rotating through: %s;", queries, strings.Join(searchKinds, ", "))
	r.setup("%d more first, untimed, to warm the caches. Timed: request sent → search.results read.", queries/10)
	r.fig("search p50", ms(p50), "", nil)
	r.fig("search p95", ms(p95), "< 20 ms", ptr(p95 < 20*time.Millisecond))
	r.fig("search max", ms(all[len(all)-1]), "", nil)
	r.fig("in the store alone p50 / p95", ms(pct(inStore, 0.50))+" / "+ms(pct(inStore, 0.95)), "", nil)
	r.fig("search index size", fmt.Sprintf("%s (%.0f bytes a message)", mib(float64(indexBytes)), float64(indexBytes)/float64(n)), "", nil)
	r.fig("database file (messages and index)", mib(float64(dbBytes)), "", nil)
	r.fig("fill", fmt.Sprintf("import %s; one by one %s", perSec(rate(int64(n-live), importTime)), perSec(rate(int64(live), liveTime))), "", nil)
	r.check("searches answered with an error", fmt.Sprint(errs), "0", errs == 0)
	var kinds []string
	for _, k := range searchKinds {
		d := byKind[k]
		slices.Sort(d)
		if len(d) > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %s", k, ms(pct(d, 0.95))))
		}
	}
	r.note("p95 by kind: %s.", strings.Join(kinds, ", "))
	r.note("%.1f hits a search on average (at most 20).", float64(hits)/float64(max(len(all), 1)))
	r.Notes = append(r.Notes, g.logs.summary()...)
	return r
}

type searchAnswer struct {
	id   int64
	at   time.Time // when the frame was read
	hits int
	err  bool
}

type searchQuery struct {
	kind string
	req  irisv1.Search
}

// searchLanes makes the channels and threads and returns every lane and
// the channels (for scope chat).
func searchLanes(ctx context.Context, g *gw) ([]core.Lane, []string, error) {
	for i := range searchChannels {
		if err := g.app.GW.CreateChannel(ctx, gateway.Caller{}, fmt.Sprintf("search %d", i), core.KindChannel, ""); err != nil {
			return nil, nil, err
		}
	}
	chs, err := g.app.Store.Channels(ctx)
	if err != nil {
		return nil, nil, err
	}
	var lanes []core.Lane
	var chans []string
	for _, c := range chs {
		if c.Kind != core.KindChannel {
			continue
		}
		chans = append(chans, c.ChatID)
		lanes = append(lanes, c.Lane())
		for j := range searchThreads {
			if err := g.app.GW.CreateChannel(ctx, gateway.Caller{}, fmt.Sprintf("thread %d", j), core.KindThread, c.ChatID); err != nil {
				return nil, nil, err
			}
		}
	}
	chs, err = g.app.Store.Channels(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range chs {
		if c.Kind == core.KindThread {
			lanes = append(lanes, c.Lane())
		}
	}
	return lanes, chans, nil
}

// searchVocab makes n distinct pronounceable words, the most frequent
// (and shortest) first; one in twenty has an accented vowel.
func searchVocab(r *rand.Rand, n int) []string {
	cons := []string{"b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "ch", "sh"}
	vows := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	accents := map[byte]string{'a': "á", 'e': "é", 'i': "ï", 'o': "ö", 'u': "ü"}
	seen := map[string]bool{}
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		for range 1 + r.Intn(4) {
			b.WriteString(cons[r.Intn(len(cons))])
			b.WriteString(vows[r.Intn(len(vows))])
		}
		if r.Intn(3) == 0 {
			b.WriteString(cons[r.Intn(len(cons))])
		}
		w := b.String()
		if seen[w] {
			continue
		}
		seen[w] = true
		if r.Intn(20) == 0 {
			for i := 0; i < len(w); i++ {
				if a, ok := accents[w[i]]; ok {
					w = w[:i] + a + w[i+1:]
					break
				}
			}
		}
		out = append(out, w)
	}
	// Frequent words are short, as in natural language (Zipf's law of
	// abbreviation): the most common ones are the shortest.
	slices.SortStableFunc(out, func(a, b string) int { return len([]rune(a)) - len([]rune(b)) })
	return out
}

// searchMix makes count queries rotating through searchKinds.
func searchMix(r *rand.Rand, vocab []string, chans []string, count int) []searchQuery {
	pick := func(lo, hi int) string { return vocab[lo+r.Intn(hi-lo)] }
	var accented []string
	for _, w := range vocab[:5000] {
		if strings.ContainsAny(w, "áéïöü") {
			accented = append(accented, w)
		}
	}
	fold := strings.NewReplacer("á", "a", "é", "e", "ï", "i", "ö", "o", "ü", "u")
	prefix := func(w string, n int) string {
		rs := []rune(w)
		return string(rs[:min(n, len(rs))])
	}
	out := make([]searchQuery, count)
	for i := range out {
		k := searchKinds[i%len(searchKinds)]
		q := irisv1.Search{Limit: 20}
		switch k {
		case "common word":
			q.Query = pick(0, 50)
		case "medium word":
			q.Query = pick(500, 5000)
		case "rare word":
			q.Query = pick(20_000, len(vocab))
		case "two words":
			q.Query = pick(0, 200) + " " + pick(500, 5000)
		case "3-letter prefix":
			q.Query = prefix(pick(100, 5000), 3)
		case "word + prefix":
			q.Query = pick(200, 2000) + " " + prefix(pick(1000, 20_000), 4)
		case "accent folded":
			q.Query = fold.Replace(accented[r.Intn(len(accented))])
		case "scope chat":
			q.Query, q.Scope, q.ChatID = pick(200, 5000), gateway.ScopeChat, chans[r.Intn(len(chans))]
		case "no match":
			q.Query = fmt.Sprintf("qxz%dwv", r.Intn(1_000_000))
		}
		out[i] = searchQuery{kind: k, req: q}
	}
	return out
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}
