#!/bin/sh
# A scripted agent failing as two of the article's repetitions did: it validates the parent
# with EvalSymlinks before the directory exists, so legitimate nested writes are rejected.
# Expected outcome: failed (S1 and S4).
set -eu
echo "reading TASK.md ($(wc -l < TASK.md) lines); rewriting store.go"
cat > store.go <<'GO'
// Package safestore writes named files beneath a configured root directory.
package safestore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Store writes files beneath root.
type Store struct {
	root string
}

// New returns a Store that writes beneath root.
func New(root string) *Store {
	return &Store{root: root}
}

// Write stores content under name, a slash-separated path relative to the root,
// creating the directories it needs.
func (s *Store) Write(name string, content []byte) error {
	if filepath.IsAbs(name) {
		return errors.New("safestore: absolute name")
	}
	path := filepath.Join(s.root, name)
	root, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return err
	}
	// resolves the parent before it exists: a new nested directory is an error
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return err
	}
	if parent != root && !strings.HasPrefix(parent, root+string(filepath.Separator)) {
		return errors.New("safestore: name escapes the root")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, content, 0o600)
}
GO
echo "done: parents resolved with EvalSymlinks"
