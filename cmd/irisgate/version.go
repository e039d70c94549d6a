package main

import (
	"fmt"

	"github.com/irisgate/irisgate/internal/version"
)

// VersionCmd prints the version.
type VersionCmd struct{}

// Run implements the command.
func (VersionCmd) Run(o *cliIO) error {
	fmt.Fprintln(o.Out, versionLine())
	return nil
}

// versionLine is the version's long form, from the one reader of the build
// information (internal/version) that the banner and /healthz use too.
func versionLine() string { return version.Get().Line() }
