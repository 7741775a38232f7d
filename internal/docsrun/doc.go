// Package docsrun runs the shell blocks of sluice's documentation, so that
// every command README.md and docs/*.md show, and what it prints, is what
// the freshly built binaries do.
//
// A runnable block is a ```console block of "$ " commands, each followed
// by the lines it prints:
//
//	```console
//	$ sluice check examples/rls/config
//	examples/rls/config/edge.yaml: ok (rules, domain edge)
//	```
//
// Every other shell block (```sh, ```bash, …) must say why it is not run,
// in an HTML comment on the line before its fence, such as
// "<!-- not run: needs Envoy -->"; Parse refuses a shell block that does
// neither, so a new block cannot slip past the check.
//
// Block.Run runs the commands with bash in a given directory and compares
// their output, with two explicit normalisations: loopback ports
// (127.0.0.1:8080, localhost:8080) become free ports, and "…" in the docs
// matches any run of characters. A command ending with " &" is a server
// left running for the block's later commands (and killed when the block
// ends; a server shown without " &" never returns, and fails the check
// after the timeout). TestDocs in this package builds cmd/sluice and runs
// every block of the repository's docs, file by file and top to bottom, in
// one temporary directory holding a copy of examples/ (so a block may use
// the files an earlier block of the same run wrote; nothing is written
// into the repository).
package docsrun
