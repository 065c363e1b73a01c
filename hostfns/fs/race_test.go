//go:build unix

package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRaceSwap swaps a directory component between a real directory and a
// symlink to an outside directory (absolute and relative targets), and a final
// component between a regular file and a symlink to an outside file, while
// many Reads and Writes run. No Read may return a secret and nothing outside
// may change. Run with -race.
func TestRaceSwap(t *testing.T) {
	fx := newFixture(t)
	swap := filepath.Join(fx.data, "swap")
	must(t, os.Mkdir(swap, 0o755))
	must(t, os.WriteFile(filepath.Join(swap, "f"), []byte("inside"), 0o644))
	// The outside twin of swap/f, so that a leak would find a file to read.
	must(t, os.WriteFile(filepath.Join(fx.outside, "f"), []byte(secretOutside), 0o644))
	target := filepath.Join(fx.data, "target")
	must(t, os.WriteFile(target, []byte("inside"), 0o644))
	fx.before = snapshot(t, fx.tmp)

	duration := 1500 * time.Millisecond
	if testing.Short() {
		duration = 300 * time.Millisecond
	}
	stop := make(chan struct{})
	var swappers sync.WaitGroup
	var dirSwaps, fileSwaps atomic.Int64

	swappers.Add(2)
	go func() { // directory component
		defer swappers.Done()
		targets := []string{fx.outside, "../outside"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.Rename(swap, swap+".real"); err != nil {
				t.Error(err)
				return
			}
			// A concurrent Write may have recreated swap (MkdirAll) in the
			// meantime: clear it out of the way (it is inside) and retry.
			if err := retryOverExisting(swap, func() error { return os.Symlink(targets[i%2], swap) }); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
			if err := os.Remove(swap); err != nil {
				t.Error(err)
				return
			}
			if err := retryOverExisting(swap, func() error { return os.Rename(swap+".real", swap) }); err != nil {
				t.Error(err)
				return
			}
			dirSwaps.Add(1)
			runtime.Gosched()
		}
	}()
	go func() { // final component, always present, swapped by rename
		defer swappers.Done()
		link, file := target+".link", target+".file"
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.Symlink(filepath.Join(fx.outside, "secret.txt"), link); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(link, target); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
			if err := os.WriteFile(file, []byte("inside"), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(file, target); err != nil {
				t.Error(err)
				return
			}
			fileSwaps.Add(1)
			runtime.Gosched()
		}
	}()

	var workers sync.WaitGroup
	var reads, readOK, writes, writeOK atomic.Int64
	deadline := time.Now().Add(duration)
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			ctx := t.Context()
			readPaths := []string{"swap/f", fx.data + "/swap/f", "target", fx.data + "/target"}
			writePaths := []string{
				fmt.Sprintf("swap/w%d", w),
				fmt.Sprintf("swap/d%d/deeper/w", w),
				"swap/f",
				"target",
			}
			for i := 0; time.Now().Before(deadline); i++ {
				p := readPaths[i%len(readPaths)]
				data, err := fx.roots.Read(ctx, p)
				reads.Add(1)
				if err == nil {
					readOK.Add(1)
					if string(data) != "inside" {
						t.Errorf("Read(%q) = %q", p, data)
						return
					}
				}
				noSecret(t, "Read("+p+")", data)
				p = writePaths[i%len(writePaths)]
				_, err = fx.roots.Write(ctx, p, []byte("inside"))
				writes.Add(1)
				if err == nil {
					writeOK.Add(1)
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	swappers.Wait()

	t.Logf("%d reads (%d ok), %d writes (%d ok), %d directory swaps, %d file swaps",
		reads.Load(), readOK.Load(), writes.Load(), writeOK.Load(), dirSwaps.Load(), fileSwaps.Load())
	if readOK.Load() == 0 || writeOK.Load() == 0 || dirSwaps.Load() == 0 || fileSwaps.Load() == 0 {
		t.Fatal("the race never exercised both outcomes")
	}
	fx.checkOutsideUnchanged(t)
	if d := tempFiles(t, fx.tmp); len(d) > 0 {
		t.Fatalf("temporary files left behind: %v", d)
	}
}

// retryOverExisting runs place until it does not fail because something
// exists at name, removing that something between tries.
func retryOverExisting(name string, place func() error) error {
	for try := 0; ; try++ {
		err := place()
		if err == nil || try == 1000 || !(os.IsExist(err) || errors.Is(err, syscall.ENOTEMPTY)) {
			return err
		}
		os.RemoveAll(name) // may race with a Write filling it: just try again
	}
}
