//go:build !linux

package kernel

import "errors"

func landlockABI() int { return 0 }

func namespaces() error { return errors.New("not Linux") }
