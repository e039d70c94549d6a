package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// VersionCmd prints the version.
type VersionCmd struct{}

// Run implements the command.
func (VersionCmd) Run(o *cliIO) error {
	fmt.Fprintln(o.Out, versionLine())
	return nil
}

// versionLine describes this binary from the build information Go
// records in it: the module's version (a tag, a pseudo-version for a
// commit, or "(devel)"), the commit it was built from and whether the
// tree had changes, and the Go that built it.
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "irisgate (no build information) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	return formatVersion(info)
}

func formatVersion(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var vcs []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		vcs = append(vcs, "commit "+rev)
	}
	if at != "" {
		vcs = append(vcs, at)
	}
	if modified {
		vcs = append(vcs, "modified")
	}
	line := "irisgate " + v
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	goVersion := info.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return line + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
