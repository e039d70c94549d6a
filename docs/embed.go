// Package docs carries the documents other packages need at run or test
// time, so that the repository builds and tests on its own.
package docs

import _ "embed"

// IrisSchema is irisgate's machine-readable description of the Iris v1
// frames (iris-v1.schema.json, JSON Schema draft-07).
//
//go:embed iris-v1.schema.json
var IrisSchema []byte
