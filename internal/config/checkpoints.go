package config

// Checkpoints holds the settings of workspace checkpoints
// (docs/conversation.md, "Checkpoints and revert").
type Checkpoints struct {
	// CheckpointsOn saves the workspace's files (in a git directory under
	// the home) before a turn first runs a tool that may change them, so
	// that the turn can be reverted.
	CheckpointsOn bool
	// CheckpointGit is the git binary ("": git on PATH).
	CheckpointGit string
	// CheckpointMaxFileBytes: larger files are left out of checkpoints
	// (a revert neither restores nor deletes them).
	CheckpointMaxFileBytes int
	// CheckpointMaxNewFiles caps the new files of one checkpoint; past
	// it, the top-level directories with the most new files are left
	// out, largest first.
	CheckpointMaxNewFiles int
}

// Defaults of the checkpoint settings.
const (
	DefaultCheckpointMaxFileBytes = 2 << 20
	DefaultCheckpointMaxNewFiles  = 50_000
)

func defaultCheckpoints() Checkpoints {
	return Checkpoints{CheckpointsOn: true, CheckpointMaxFileBytes: DefaultCheckpointMaxFileBytes,
		CheckpointMaxNewFiles: DefaultCheckpointMaxNewFiles}
}

func init() {
	fields = append(fields,
		boolField("checkpoints", "save the workspace's files (into a git directory under the home, never the workspace's own .git) before a turn first runs a tool that may change them, so that the turn can be reverted; needs git", func(c *Config) *bool { return &c.CheckpointsOn }),
		strField("checkpoint-git", "git binary checkpoints run (default: git on PATH)", func(c *Config) *string { return &c.CheckpointGit }),
		intField("checkpoint-max-file-bytes", "files larger than this are left out of checkpoints: a revert neither restores nor deletes them", 1, func(c *Config) *int { return &c.CheckpointMaxFileBytes }),
		intField("checkpoint-max-new-files", "new files one checkpoint may add; past it the top-level directories with the most new files are left out (and a revert leaves them alone)", 1, func(c *Config) *int { return &c.CheckpointMaxNewFiles }),
	)
}
