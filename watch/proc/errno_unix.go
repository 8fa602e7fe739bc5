//go:build unix

package proc

import "syscall"

// errESRCH is what reading a file of a process that exited between the
// open and the read returns.
var errESRCH error = syscall.ESRCH
