package cluster

import (
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/event"
)

// Subject layout of the log: metis.evt.<tree>.<session>.<family>, where
// tree is the root session of the delegation tree and family is c
// (catalog) or s (streaming).
const (
	subjectPrefix = "metis.evt."
	// AllSubjects is the stream's subject space.
	AllSubjects = "metis.evt.>"
	// AllCatalog selects the catalog family of every tree (the
	// projection's filter).
	AllCatalog = "metis.evt.*.*.c"

	familyCatalog   = "c"
	familyStreaming = "s"

	// ownerToken is the session token of the ownership marker a new
	// owner publishes on its tree's catalog subjects (see Fence). It can
	// never be a session id: ids are prefixed ULIDs.
	ownerToken = "_owner"
	// deletionToken is the session token of a deletion record the
	// owner publishes on its tree's catalog subjects (see
	// Fence.PublishDeletion); like ownerToken it is never a session id.
	deletionToken = "_deleted"
)

// Subject returns the subject an event of session (in tree) is
// published on.
func Subject(tree, session string, f event.Family) string {
	fam := familyCatalog
	if f == event.Streaming {
		fam = familyStreaming
	}
	return subjectPrefix + tree + "." + session + "." + fam
}

// TreeFilter selects every event of a delegation tree.
func TreeFilter(tree string) string { return subjectPrefix + tree + ".>" }

// SessionFilter selects every event of one session of a tree.
func SessionFilter(tree, session string) string {
	return subjectPrefix + tree + "." + session + ".*"
}

// CatalogFilter selects the catalog events of a tree (and its ownership
// markers, which readers skip).
func CatalogFilter(tree string) string { return subjectPrefix + tree + ".*." + familyCatalog }

// StreamingFilter selects the streaming events of a tree: those the
// log still holds, since each expires with its TTL.
func StreamingFilter(tree string) string { return subjectPrefix + tree + ".*." + familyStreaming }

func ownerSubject(tree string) string {
	return subjectPrefix + tree + "." + ownerToken + "." + familyCatalog
}

func deletionSubject(tree string) string {
	return subjectPrefix + tree + "." + deletionToken + "." + familyCatalog
}

// ValidToken reports whether s can be one token of a subject: a tree or
// session id. Ids are "prefix_ULID"; this only refuses what would break
// the subject layout (empty, dots, wildcards, whitespace, control
// characters) or collide with the ownership marker.
func ValidToken(s string) error {
	if s == "" {
		return fmt.Errorf("cluster: empty subject token")
	}
	if s == ownerToken || s == deletionToken {
		return fmt.Errorf("cluster: subject token %q is reserved", s)
	}
	if strings.ContainsAny(s, ".*> \t\r\n") {
		return fmt.Errorf("cluster: subject token %q has a reserved character", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("cluster: subject token %q has a control character", s)
		}
	}
	return nil
}

// parseSubject splits a log subject into tree, session and whether it is
// a catalog subject.
func parseSubject(subj string) (tree, session string, catalog bool, err error) {
	rest, ok := strings.CutPrefix(subj, subjectPrefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", false, fmt.Errorf("cluster: not a log subject: %q", subj)
	}
	switch parts[2] {
	case familyCatalog:
		catalog = true
	case familyStreaming:
	default:
		return "", "", false, fmt.Errorf("cluster: not a log subject: %q", subj)
	}
	return parts[0], parts[1], catalog, nil
}
