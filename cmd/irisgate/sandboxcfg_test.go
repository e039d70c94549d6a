package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkInsideDataWarns: a working directory inside the data directory,
// where tools never go, is said at start-up; beside it or holding it (the
// defaults' layout) is fine.
func TestWorkInsideDataWarns(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	for work, bad := range map[string]bool{
		filepath.Join(data, "workspace"): true, data: true,
		filepath.Join(base, "workspace"): false, base: false,
	} {
		if why := workInsideData(work, data); (why != "") != bad || bad && !strings.Contains(why, "--workdir") {
			t.Errorf("workdir %s, data %s: %q", work, data, why)
		}
	}
}

// TestContribUnitKeepsWorkOutOfData: the systemd unit's working directory
// lies beside its data directory, and systemd makes both.
func TestContribUnitKeepsWorkOutOfData(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "contrib", "irisgate.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	var state []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			if k, v, ok := strings.Cut(strings.Trim(v, `"`), "="); ok {
				env[k] = v
			}
		}
		if v, ok := strings.CutPrefix(line, "StateDirectory="); ok {
			state = strings.Fields(v)
		}
	}
	data, work := env["IRISGATE_DATA"], env["IRISGATE_WORKDIR"]
	if data == "" || work == "" || workInsideData(work, data) != "" {
		t.Fatalf("the unit's data %q and working directory %q", data, work)
	}
	for _, d := range []string{data, work} {
		if rel, ok := strings.CutPrefix(d, "/var/lib/"); !ok || !strings.Contains(" "+strings.Join(state, " ")+" ", " "+rel+" ") {
			t.Errorf("%s is not one of the unit's StateDirectory= %v", d, state)
		}
	}
}
