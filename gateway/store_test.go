package gateway

import "github.com/irisgate/irisgate/store/storetest"

// The store contract's suite drives every method this package asks of a
// store: a store that passes it fills Store.
var _ Store = storetest.Store(nil)
