package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/irisgate/irisgate/sandbox"
	"github.com/irisgate/irisgate/server"
)

// SandboxFlags set the walls around the agent's tools.
type SandboxFlags struct {
	Sandbox string   `help:"Walls around the terminal tool's commands: auto (the strongest this kernel offers), landlock (Landlock and seccomp without namespaces) or off (every command that is not read-only asks)." default:"auto" enum:"auto,landlock,off" env:"IRISGATE_SANDBOX" group:"Agent"`
	ToolEnv []string `help:"Names of environment variables the tools get besides PATH, HOME, LANG and TERM (nothing else of the gateway's environment reaches them)." env:"IRISGATE_TOOL_ENV" group:"Agent"`

	// What the tools never see, set by serve: the data directory (but its
	// media, whose files the agent is told to open) and the config file.
	dataDir, configFile string
	// mediaDir is --media-dir: the media the agent is told to open, when
	// they are not in the data directory.
	mediaDir string
}

// sandbox builds the tools' sandbox and says at start-up which wall holds
// (and when the working directory lies inside the data directory, which
// no tool may enter).
func (f *SandboxFlags) sandbox(log *slog.Logger, workdir string) (*sandbox.Sandbox, error) {
	want, err := sandbox.ParseWall(f.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("--sandbox: %w", err)
	}
	cfg := sandbox.Config{Env: f.ToolEnv, Want: want}
	if f.dataDir != "" {
		cfg.Hide = append(cfg.Hide, f.dataDir)
		if f.mediaDir == "" {
			cfg.Expose = append(cfg.Expose, filepath.Join(f.dataDir, server.MediaDir))
		}
	}
	if f.mediaDir != "" {
		cfg.Expose = append(cfg.Expose, f.mediaDir)
	}
	if f.configFile != "" {
		cfg.Hide = append(cfg.Hide, f.configFile)
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		return nil, err
	}
	if why := workInsideData(workdir, f.dataDir); why != "" {
		log.Warn("the agent's tools cannot work: "+why, "workdir", workdir, "data", f.dataDir)
	}
	if sb.Wall() == sandbox.None {
		log.Warn("tool sandbox: none", "detail", sb.Describe())
	} else {
		log.Info("tool sandbox: "+sb.Wall().String(), "detail", sb.Describe())
	}
	return sb, nil
}

// workInsideData says why the working directory is unusable when it lies
// inside the data directory: every command and file tool there is
// refused, the data directory being what tools never see.
func workInsideData(workdir, data string) string {
	if workdir == "" || data == "" {
		return ""
	}
	w, d := sandbox.ResolveExisting(abs(workdir)), sandbox.ResolveExisting(abs(data))
	if rel, err := filepath.Rel(d, w); err == nil && filepath.IsLocal(rel) || w == d {
		return fmt.Sprintf("the working directory %s lies inside the data directory %s, which tools never enter: every command and file they try there is refused. Give --workdir (IRISGATE_WORKDIR) a directory outside it", w, d)
	}
	return ""
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
