// Package cputime reads how much CPU time the process, or the calling OS
// thread, has used (user and system), so that a benchmark on a shared
// machine can report what its work costs rather than how long it waited for
// a CPU. Only tests import it. Process is implemented on Unix and Windows,
// Thread on Linux (no other system's package syscall offers a thread's CPU
// time); elsewhere a reading's ok is false and the benchmark reports no CPU
// figure.
package cputime
