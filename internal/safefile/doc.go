// Package safefile reads small configuration files that a user (or a
// process running as the user) may have replaced with something else: a
// FIFO, a device, a symlink to one, or a huge file. It reads regular
// files only, up to a size limit, and never blocks on opening.
//
// safefile imports the standard library only.
package safefile
