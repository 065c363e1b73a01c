// Package cputime reads how much CPU time the process, or the calling OS
// thread, has used (user and system), so that a benchmark on a shared
// machine can report what its work costs rather than how long it waited for
// a CPU. Only tests import it. Where a reading is not implemented, ok is
// false and the benchmark reports no CPU figure.
package cputime
