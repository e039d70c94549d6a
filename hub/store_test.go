package hub

import "github.com/irisgate/irisgate/store/storetest"

// The store contract's suite drives the methods the hub asks of a store.
var _ ProofStore = storetest.Store(nil)
