// Package version says which build of irisgate is running: the one place
// the serve banner, /healthz, the build-info metric and `irisgate version`
// read it from, so they never disagree.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// stamp is set by release builds that know better than the build info, e.g.
// a container built from a tarball without .git:
//
//	go build -ldflags "-X github.com/irisgate/irisgate/internal/version.stamp=v1.2.0" ./cmd/irisgate
var stamp string

// Info describes the running binary.
type Info struct {
	// Version is the module version (v1.2.0 from `go install …@v1.2.0`),
	// the stamp of a release build, or "devel" for a build from a checkout.
	Version string
	// Go is the toolchain that built the binary (go1.26.8).
	Go string
	// Revision is the VCS commit the binary was built from, when the build
	// recorded it (a build in a git checkout without -buildvcs=false).
	Revision string
	// Time is the commit's time (RFC 3339), when the build recorded it.
	Time string
	// Modified says the checkout had uncommitted changes.
	Modified bool
}

// String is the version as people read it: "v1.2.0", or
// "devel 1dd1f27c9a2b+dirty" for a build from a checkout.
func (i Info) String() string {
	s := i.Version
	if i.Version == "devel" && i.Revision != "" {
		s += " " + shortRev(i.Revision)
		if i.Modified {
			s += "+dirty"
		}
	}
	return s
}

// Get reads the build information once.
var Get = sync.OnceValue(func() Info { return fromBuildInfo(debug.ReadBuildInfo()) })

// String is Get().String().
func String() string { return Get().String() }

func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	i := Info{Version: "devel", Go: runtime.Version()}
	if ok {
		i.Go = bi.GoVersion
		// "(devel)" is what a build of the main module in its own checkout
		// reports; a pseudo-version (v0.0.0-2026…-abcdef) is what Go 1.24+
		// stamps from VCS, which is a version too.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if stamp != "" {
		i.Version = strings.TrimSpace(stamp)
	}
	return i
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// Line is the long form `irisgate version` prints: the version, the
// commit, its time and whether the tree had changes, and the Go and
// platform that built it.
func (i Info) Line() string {
	var vcs []string
	if i.Revision != "" {
		vcs = append(vcs, "commit "+shortRev(i.Revision))
	}
	if i.Time != "" {
		vcs = append(vcs, i.Time)
	}
	if i.Modified {
		vcs = append(vcs, "modified")
	}
	line := "irisgate " + i.Version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	return line + " " + i.Go + " " + runtime.GOOS + "/" + runtime.GOARCH
}
