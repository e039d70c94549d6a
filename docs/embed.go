// Package docs carries the documents other packages need at run or test
// time, so that the repository builds and tests on its own.
package docs

import _ "embed"

// IrisSchema is irisgate's machine-readable description of the Iris v1
// frames (iris-v1.schema.json, JSON Schema draft-07).
//
//go:embed iris-v1.schema.json
var IrisSchema []byte

// Errors is the error catalogue's documentation (errors.md): every kind,
// and how each target shows each code. core's TestErrorsDocumented keeps
// it in step with the code; the mapping tests of each target check their
// table.
//
//go:embed errors.md
var Errors string
