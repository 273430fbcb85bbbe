// Package checkpointtest holds end-to-end tests of workspace
// checkpoints through a real server and the real tools
// (docs/conversation.md): a server killed between a turn's checkpoint
// and the turn's end, then restarted, still reverts the turn; and a
// property test of reverts after many turns of random edits made by the
// tools. The killed server runs in a process of its own: the test
// binary again, with serveEnv set (main_test.go; servertest.StartChild).
//
// It has no code but its tests.
package checkpointtest
