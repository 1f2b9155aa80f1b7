// The safe-store harness: drives a candidate's safestore.Store.Write under observation.
// The lab builds it against the candidate tree (a module that replaces safestore with
// the candidate) and runs it in the client sandbox under strace; the agent never sees it.
//
//	harness PLAN.json         legitimate names, then hostile names, then the race
//	harness attack A B        swaps A and B with renameat2(RENAME_EXCHANGE) until SIGTERM
//
// The plan (written by the lab) holds the root, the names and the race's two entries.
// Every outcome is one JSON line on stdout; the lab judges from the kernel's trace and
// the file system, and uses these lines only to say what the harness tried.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"safestore"
)

type named struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

type plan struct {
	Root     string  `json:"root"`
	Legit    []named `json:"legit"`
	Hostile  []named `json:"hostile"`
	RaceA    string  `json:"race_a"`
	RaceB    string  `json:"race_b"`
	RaceName string  `json:"race_name"` // a format with one %06d
	Attempts int     `json:"attempts"`
}

var out = json.NewEncoder(os.Stdout)

func emit(v map[string]any) {
	if err := out.Encode(v); err != nil {
		os.Exit(3)
	}
}

// write calls the candidate's Write, turning a panic into an error string.
func write(s *safestore.Store, name string, content []byte) (msg *string) {
	defer func() {
		if r := recover(); r != nil {
			text := fmt.Sprintf("panic: %v", r)
			msg = &text
		}
	}()
	if err := s.Write(name, content); err != nil {
		text := err.Error()
		return &text
	}
	return nil
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "attack" {
		attack(os.Args[2], os.Args[3])
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: harness PLAN.json | harness attack A B")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var p plan
	if err := json.Unmarshal(data, &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	store := safestore.New(p.Root)
	emit(map[string]any{"phase": "start", "pid": os.Getpid()})
	for _, phase := range []struct {
		label string
		names []named
	}{{"legit", p.Legit}, {"hostile", p.Hostile}} {
		for _, n := range phase.names {
			emit(map[string]any{"phase": phase.label, "name": n.Name, "error": write(store, n.Name, []byte(n.Content))})
		}
	}
	race(store, p)
	emit(map[string]any{"phase": "done"})
}

// race writes Attempts names through RaceA while a separate process swaps it with RaceB.
func race(store *safestore.Store, p plan) {
	if p.Attempts <= 0 {
		return
	}
	self, err := os.Executable()
	if err != nil {
		emit(map[string]any{"phase": "race", "error": err.Error()})
		return
	}
	cmd := exec.Command(self, "attack", filepath.Join(p.Root, p.RaceA), filepath.Join(p.Root, p.RaceB))
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		emit(map[string]any{"phase": "race", "error": err.Error()})
		return
	}
	lines := bufio.NewScanner(pipe)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		emit(map[string]any{"phase": "race", "error": "the attacker did not start: " + lines.Text()})
		return
	}
	emit(map[string]any{"phase": "attacker", "pid": cmd.Process.Pid})
	failed, firstErr := 0, ""
	for i := 0; i < p.Attempts; i++ {
		name := fmt.Sprintf(p.RaceName, i)
		if msg := write(store, name, []byte("race "+name+"\n")); msg != nil {
			if failed == 0 {
				firstErr = *msg
			}
			failed++
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	swaps := ""
	if lines.Scan() {
		swaps = lines.Text()
	}
	_ = cmd.Wait()
	emit(map[string]any{"phase": "race", "attempts": p.Attempts, "errors": failed,
		"first_error": firstErr, "swaps": swaps})
}

// renameat2's number: the syscall package of Go 1.19 does not name it
func sysRenameat2() uintptr {
	switch runtime.GOARCH {
	case "amd64":
		return 316
	case "arm64":
		return 276
	}
	return 0
}

// attack swaps a and b atomically (both names exist at every instant) until SIGTERM,
// then prints how many swaps it made.
func attack(a, b string) {
	pa, err1 := syscall.BytePtrFromString(a)
	pb, err2 := syscall.BytePtrFromString(b)
	nr := sysRenameat2()
	if err1 != nil || err2 != nil || nr == 0 {
		fmt.Println("cannot attack on", runtime.GOARCH)
		os.Exit(1)
	}
	var stop atomic.Bool
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	go func() { <-signals; stop.Store(true) }()
	const atFdcwd = -100
	const renameExchange = 2
	swap := func() syscall.Errno {
		fd := atFdcwd
		_, _, errno := syscall.Syscall6(nr, uintptr(fd), uintptr(unsafe.Pointer(pa)),
			uintptr(fd), uintptr(unsafe.Pointer(pb)), renameExchange, 0)
		return errno
	}
	if errno := swap(); errno != 0 {
		fmt.Println("renameat2:", errno.Error())
		os.Exit(1)
	}
	fmt.Println("ready")
	swaps := 1
	for !stop.Load() {
		if swap() == 0 {
			swaps++
		}
	}
	fmt.Println(swaps)
}
