package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair with the kernel's /dev/ptmx, so the
// progress bar sees a real terminal on its stderr.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal on this machine: %v", err)
	}
	var unlock int32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, m.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlocking the pty: %v", e)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

func TestProgressBar(t *testing.T) {
	if bar := newProgressBar(&bytes.Buffer{}, "x", 1<<30); bar != nil {
		t.Error("a bar on a stderr that is not a terminal")
	}
	master, slave := openPTY(t)
	if bar := newProgressBar(slave, "small.pickle", progressMinBytes-1); bar != nil {
		t.Error("a bar for a file under the size threshold")
	}
	bar := newProgressBar(slave, "big.pickle", 256<<20)
	if bar == nil {
		t.Fatal("no bar on a terminal for a 256 MiB file")
	}
	bar.Add64(128 << 20)
	time.Sleep(150 * time.Millisecond) // past the bar's 100 ms throttle
	bar.Add64(1 << 20)
	out := make([]byte, 4096)
	master.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := master.Read(out)
	got := string(out[:n])
	for _, want := range []string{"loading big.pickle", "MiB", "/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal shows %q, want it to contain %q", got, want)
		}
	}
}
