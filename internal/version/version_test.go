package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		name  string
		bi    *debug.BuildInfo
		ok    bool
		stamp string
		want  string
	}{
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true, "", "v1.2.0"},
		{"checkout with vcs info", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "1dd1f27c9a2b3c4d5e6f"}, {Key: "vcs.modified", Value: "true"}}}, true, "", "devel 1dd1f27c9a2b+dirty"},
		{"checkout without vcs info", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "", "devel"},
		{"stamped release build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "v1.3.0\n", "v1.3.0"},
		{"no build info", nil, false, "", "devel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := stamp
			stamp = c.stamp
			defer func() { stamp = old }()
			i := fromBuildInfo(c.bi, c.ok)
			if got := i.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			if !strings.HasPrefix(i.Go, "go") {
				t.Errorf("Go = %q, want a toolchain version", i.Go)
			}
		})
	}
	// The test binary itself has build info.
	if i := Get(); i.Version == "" || i.Go == "" {
		t.Errorf("Get() = %+v, want a version and a Go version", i)
	}
}

func TestLine(t *testing.T) {
	i := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261102100000-1a2b3c4d5e6f+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.time", Value: "2026-11-02T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}, true)
	want := "irisgate v0.0.0-20261102100000-1a2b3c4d5e6f+dirty (commit 1a2b3c4d5e6f, 2026-11-02T10:00:00Z, modified) go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	if got := i.Line(); got != want {
		t.Fatalf("version line\n%q, want\n%q", got, want)
	}
	if got := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true).Line(); !strings.HasPrefix(got, "irisgate v1.2.0 go1.26.8 ") {
		t.Fatalf("a tagged build: %q", got)
	}
}
