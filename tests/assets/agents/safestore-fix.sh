#!/bin/sh
# A scripted agent for campaigns/safe-store (no model): writes a correct Store.Write (each
# component opened with openat(O_NOFOLLOW) relative to its parent's descriptor), the fix the
# article's one successful run reached. Expected outcome: met.
set -eu
echo "reading TASK.md ($(wc -l < TASK.md) lines); rewriting store.go"
cat > store.go <<'GO'
// Package safestore writes named files beneath a configured root directory.
package safestore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Store writes files beneath root.
type Store struct {
	root string
}

// New returns a Store that writes beneath root.
func New(root string) *Store {
	return &Store{root: root}
}

var errUnsafeName = errors.New("safestore: unsafe name")

// Write stores content under name, a slash-separated path relative to the root,
// creating the directories it needs. Every component is opened relative to the
// descriptor of its parent with O_NOFOLLOW, so neither a symlink already in the tree
// nor one swapped in while Write runs can lead the write outside the root.
func (s *Store) Write(name string, content []byte) error {
	parts, err := components(name)
	if err != nil {
		return err
	}
	dir, err := syscall.Open(s.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: s.root, Err: err}
	}
	for _, part := range parts[:len(parts)-1] {
		next, err := enter(dir, part)
		syscall.Close(dir)
		if err != nil {
			return &os.PathError{Op: "open", Path: name, Err: err}
		}
		dir = next
	}
	defer syscall.Close(dir)
	flags := syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Openat(dir, parts[len(parts)-1], flags, 0o600)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// components splits a relative name into its parts, rejecting absolute names, empty
// names and any ".." component (a dot inside a part, as in "v1..v2.txt", is fine).
func components(name string) ([]string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return nil, fmt.Errorf("%w: %q", errUnsafeName, name)
	}
	var parts []string
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%w: %q", errUnsafeName, name)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: %q", errUnsafeName, name)
	}
	return parts, nil
}

// enter makes the directory part inside dir if it is missing and opens it, refusing
// to follow a symlink.
func enter(dir int, part string) (int, error) {
	if err := syscall.Mkdirat(dir, part, 0o700); err != nil && err != syscall.EEXIST {
		return -1, err
	}
	flags := syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	return syscall.Openat(dir, part, flags, 0)
}
GO
echo "done: store.go rewritten"
