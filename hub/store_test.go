package hub

import "github.com/irisgate/irisgate/store/storetest"

// The store contract's suite drives the methods the hub asks of a store.
var _ Store = storetest.Store(nil)
