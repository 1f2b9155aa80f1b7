#!/bin/sh
# A scripted agent failing as the article's third repetition did: a lexical prefix check
# (filepath.Join then HasPrefix) that misses absolute names and follows a symlinked parent.
# Expected outcome: failed (S1 and S3).
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
	root := filepath.Clean(s.root)
	path := filepath.Clean(filepath.Join(root, name))
	if !strings.HasPrefix(path, root+string(filepath.Separator)) {
		return errors.New("safestore: name escapes the root")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, content, 0o600)
}
GO
echo "done: lexical containment"
