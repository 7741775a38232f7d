// Package watch reports changes to the content of files and directories by
// polling, for both servers' hot reload: sluice serve watches its config
// and the files it names (rules files, API keys, JWT keys), sluice rls its
// rules directory. Polling content hashes, not modification times, sees an
// edit that keeps size and mtime, ignores a touch, and works the same on
// every filesystem, Kubernetes ConfigMap symlink swaps included.
//
// A file that cannot be read is skipped until it can (a file being
// replaced vanishes for a moment; that is not a change). A directory's
// fingerprint is that of its YAML files (names and contents, as
// rules.LoadDir selects them) and includes what could not be read, so a
// directory that becomes unreadable is one change, reported once.
package watch
