package main

import (
	"io"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/alecthomas/kong"
)

// tomlLoader reads a TOML settings file for kong. Keys are flag names, with
// dashes or underscores; sections name subcommands ([serve] listen = …) or
// are left out.
func tomlLoader(r io.Reader) (kong.Resolver, error) {
	var values map[string]any
	if _, err := toml.NewDecoder(r).Decode(&values); err != nil {
		return nil, err
	}
	return tomlResolver(values), nil
}

type tomlResolver map[string]any

func (t tomlResolver) Validate(app *kong.Application) error { return nil }

// Resolve finds a flag's value. Kong applies resolvers after the
// environment, so a flag whose variable is set is skipped here to keep the
// documented precedence: flags, then environment, then file.
func (t tomlResolver) Resolve(ctx *kong.Context, parent *kong.Path, flag *kong.Flag) (any, error) {
	for _, env := range flag.Envs {
		if _, ok := os.LookupEnv(env); ok {
			return nil, nil
		}
	}
	keys := []string{flag.Name, strings.ReplaceAll(flag.Name, "-", "_")}
	if parent != nil && parent.Command != nil {
		if sec, ok := t[parent.Command.Name].(map[string]any); ok {
			for _, k := range keys {
				if v, ok := sec[k]; ok {
					return v, nil
				}
			}
		}
	}
	for _, k := range keys {
		if v, ok := t[k]; ok {
			return v, nil
		}
	}
	return nil, nil
}
