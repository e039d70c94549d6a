package wire

import "github.com/irisgate/irisgate/core"

// The errors that end a connection before its dialect is known; every
// dialect renders them (Dialect.Refuse).
var (
	ErrHelloTimeout = core.NewKind("hello_timeout", core.CodeUnsupported, "no hello within the timeout")
	ErrHelloEvicted = core.NewKind("hello_evicted", core.CodeRateLimited, "too many connections are waiting to say hello: try again")
)
