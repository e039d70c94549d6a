package gateway

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Search limits.
const (
	DefaultSearch = 20
	MaxSearch     = 100
)

// Search scopes.
const (
	ScopeAll  = "all"
	ScopeChat = "chat"
)

// SearchRequest is a search a person makes.
type SearchRequest struct {
	Query string
	Scope string    // all (default) | chat
	Lane  core.Lane // for scope chat; the default channel when absent
	Limit int
	// Before pages: the hits older than this one (a message id).
	Before string
}

// Search finds messages by their words, newest first, a page at a time
// (see store.SearchPageBefore). It returns the scope it searched.
func (g *Gateway) Search(ctx context.Context, req SearchRequest) (string, store.SearchPage, error) {
	switch {
	case req.Limit <= 0:
		req.Limit = DefaultSearch
	case req.Limit > MaxSearch:
		req.Limit = MaxSearch
	}
	var lane *core.Lane
	switch req.Scope {
	case "", ScopeAll:
		req.Scope = ScopeAll
	case ScopeChat:
		if _, err := g.resolveLane(ctx, &req.Lane); err != nil {
			return "", store.SearchPage{}, err
		}
		lane = &req.Lane
	default:
		return "", store.SearchPage{}, ErrSearchScope.New(quote(req.Scope))
	}
	page, err := g.st.SearchPageBefore(ctx, req.Query, lane, req.Before, req.Limit)
	return req.Scope, page, notFound(err, ErrUnknownBefore, quote(req.Before))
}
