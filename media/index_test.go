package media

import "github.com/irisgate/irisgate/store/storetest"

// The store contract's suite drives every method this package asks of a
// store: a store that passes it fills Index.
var _ Index = storetest.Store(nil)
