package main

import (
	"io/fs"

	"github.com/agentos/agentos/runtime/hooks"
)

func fsStat(fsys fs.FS, p string) (fs.FileInfo, error) { return fs.Stat(fsys, p) }

func hooksEvent(s string) hooks.Event { return hooks.Event(s) }
