package server

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/metis-agent/metis/internal/checkpoint"
)

// Workspace checkpoints (docs/conversation.md, "Checkpoints and
// revert"): the store under <home>/checkpoints, the server's loud word
// when git is missing, and the collection of checkpoints nobody needs.

// CheckpointDir is the directory under the home holding one git
// directory per workspace.
const CheckpointDir = "checkpoints"

// openCheckpoints opens the checkpoint store unless checkpoints are
// turned off. Without git it returns nil and why: the server then says
// at start, in its ready line and at each turn that may change files,
// that turns cannot be reverted.
func (s *Server) openCheckpoints(ctx context.Context) (*checkpoint.Store, string) {
	if !s.Config.CheckpointsOn {
		s.Log.Info("workspace checkpoints are off (--checkpoints=false): turns cannot be reverted")
		return nil, ""
	}
	cs, err := checkpoint.Open(ctx, checkpoint.Options{Dir: filepath.Join(s.Config.Home, CheckpointDir), Git: s.Config.CheckpointGit,
		MaxFileBytes: int64(s.Config.CheckpointMaxFileBytes), MaxNewFiles: s.Config.CheckpointMaxNewFiles, Logger: s.Log})
	if err != nil {
		why := err.Error()
		if !errors.Is(err, checkpoint.ErrUnavailable) {
			why = "checkpoints unavailable: " + why
		}
		s.Log.Warn("workspace checkpoints are OFF: turns cannot be reverted", "reason", why)
		return nil, why
	}
	s.checkpoints = cs
	return cs, ""
}

// checkpointNote is the ready line's word on checkpoints.
func (s *Server) checkpointNote() string {
	switch {
	case s.checkpoints != nil:
		return "; checkpoints on (" + s.checkpoints.GitVersion() + ")"
	case s.checkpointsWhy != "":
		return "; checkpoints OFF: " + s.checkpointsWhy
	}
	return "; checkpoints off"
}

// checkpointGCInterval is how often checkpoints are collected.
const checkpointGCInterval = time.Hour

// checkpointGrace keeps every checkpoint younger than this: a turn's
// row may not name it yet.
const checkpointGrace = time.Hour

// checkpointGCLoop collects checkpoints every checkpointGCInterval,
// the first time a minute after the start.
func (s *Server) checkpointGCLoop(ctx context.Context) {
	defer s.bg.Done()
	wait := time.Minute
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = checkpointGCInterval
		s.collectCheckpoints(ctx)
	}
}

// collectCheckpoints removes the checkpoints no session needs: a
// turn's once no turn row of the store names it (its session was
// removed by retention), a revert's undo once it is older than
// --retention (the event naming it is gone); every checkpoint younger
// than checkpointGrace stays.
func (s *Server) collectCheckpoints(ctx context.Context) {
	if s.checkpoints == nil {
		return
	}
	named, err := s.Store.CheckpointIDs(ctx)
	if err != nil {
		s.Log.Error("collect checkpoints", "err", err)
		return
	}
	now := time.Now()
	st, err := s.checkpoints.GC(ctx, func(_ string, r checkpoint.Ref) bool {
		switch {
		case now.Sub(r.Created) < checkpointGrace:
			return true
		case r.Kind == checkpoint.KindRevert:
			return now.Sub(r.Created) < s.Config.Retention
		}
		return named[r.ID]
	})
	if err != nil && ctx.Err() == nil {
		s.Log.Error("collect checkpoints", "err", err)
	}
	if st.Removed > 0 || st.DirsRemoved > 0 {
		s.Log.Info("collected checkpoints", "removed", st.Removed, "kept", st.Kept, "workspaces", st.Workspaces,
			"dirs_removed", st.DirsRemoved, "bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter)
	}
}
