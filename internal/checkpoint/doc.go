// Package checkpoint owns workspace checkpoints (docs/conversation.md,
// "Checkpoints and revert"): snapshots of a workspace's files taken
// into a git directory of metis's own, the changes between two
// snapshots with their diffs, restoring a snapshot (after taking one of
// the files as they are, so that the restore can itself be undone), and
// the collection of snapshots nobody needs any more.
//
// The snapshots are made by the git binary (docs/dependencies.md says
// why), one git directory per workspace under the metis home
// (<home>/checkpoints/<hash of the workspace path>), used with
// --git-dir and --work-tree: the user's own .git is never read by git,
// never written, and never consulted for configuration; only its
// info/exclude file is copied, so that what the user ignores is not
// captured. Git runs with a scrubbed environment (no GIT_* variable of
// the server's, no system or global configuration, no hooks, no
// filters, no end-of-line conversion), so a snapshot holds the files'
// bytes exactly. What a snapshot leaves out (ignored files, files over
// the size limit, nested repositories, directories past the cap on new
// files) is recorded in it, and a restore never deletes a file that
// was left out.
//
// One lock per git directory (a mutex in the process and an flock on
// the directory's lock file) serializes every operation on it: the
// snapshots of sessions sharing a workspace, restores and collection.
//
// checkpoint imports the standard library and ulid only: it knows
// nothing of sessions, turns or events. The agent loop takes the
// snapshots of a turn, the session manager restores them.
package checkpoint
