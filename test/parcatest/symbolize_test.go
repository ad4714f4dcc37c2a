package parcatest_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/testbin"
)

// cSource is a C program with two functions of its own and calls through
// the PLT; it prints the address of cLeaf and waits for stdin to close.
const cSource = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) unsigned long tandem_c_leaf(unsigned long x) {
	for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) unsigned long tandem_c_middle(unsigned long x) {
	return tandem_c_leaf(x) ^ (unsigned long)getpid();
}

int main(int argc, char **argv) {
	printf("%p\n", (void *)tandem_c_leaf);
	fflush(stdout);
	unsigned long x = tandem_c_middle(argc);
	getchar();
	return (int)(x & 1) + (argc > 5 ? atoi(argv[1]) : 0);
}
`

const goSource = `package main

import "fmt"

//go:noinline
func tandemGoLeaf(x int) int { return x*31 + 7 }

func main() { fmt.Println(tandemGoLeaf(3)) }
`

func store(t *testing.T, data []byte) (*parcatest.SymbolStore, string) {
	t.Helper()
	s := parcatest.NewSymbolStore()
	s.Set("0123456789abcdef", parcatest.Debuginfo{Data: data})
	return s, "0123456789abcdef"
}

func strip(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, err := debuginfo.Strip(&out, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// nobits returns b with the named section turned into SHT_NOBITS, as a
// stripper that drops it would leave it.
func nobits(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(b)
	shoff := binary.LittleEndian.Uint64(b[40:])
	for i, s := range f.Sections {
		if s.Name == name {
			binary.LittleEndian.PutUint32(out[shoff+uint64(i)*64+4:], uint32(elf.SHT_NOBITS))
			return out
		}
	}
	t.Fatalf("no section %s", name)
	return nil
}

// symbolAddr reads a symbol's address from the original file.
func symbolAddr(t *testing.T, b []byte, name string) uint64 {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no symbol %s", name)
	return 0
}

// pltStubs lists the PLT stubs objdump names in the executable (an oracle
// independent of the store's .rela.plt reading): address -> name@plt.
func pltStubs(t *testing.T, path string) map[uint64]string {
	t.Helper()
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skipf("no objdump to list PLT stubs: %v", err)
	}
	out, err := exec.Command(objdump, "-d", "-j", ".plt", path).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	stubs := map[uint64]string{}
	re := regexp.MustCompile(`^([0-9a-f]+) <([^>]+@plt)>:`)
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			stubs[a] = m[2]
		}
	}
	return stubs
}

func names(lines []parcatest.SymbolLine) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Function)
	}
	return out
}

// TestSymbolizeC: a C executable without debug info resolves from its
// symbol tables, whole or as debuginfo.Strip uploads it: its functions by
// name, its PLT stubs as name@plt. A copy whose .rela.plt was dropped
// (what Strip used to do) resolves nothing, as on a real Parca server.
func TestSymbolizeC(t *testing.T) {
	path := testbin.C(t, "", "csym", cSource, "-g0", "-O1")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stubs := pltStubs(t, path)
	if len(stubs) < 2 {
		t.Fatalf("objdump lists %d PLT stubs, want the libc calls", len(stubs))
	}
	stripped := strip(t, orig)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"whole file", orig}, {"stripped", stripped}} {
		t.Run(tc.name, func(t *testing.T) {
			s, id := store(t, tc.data)
			for _, fn := range []string{"tandem_c_leaf", "tandem_c_middle", "main"} {
				lines, err := s.Symbolize(id, parcatest.Mapping{}, symbolAddr(t, orig, fn)+2)
				if err != nil || len(lines) != 1 || lines[0].Function != fn {
					t.Errorf("%s: %v, %v", fn, names(lines), err)
				}
			}
			for addr, want := range stubs {
				lines, err := s.Symbolize(id, parcatest.Mapping{}, addr+4)
				if err != nil || len(lines) != 1 || lines[0].Function != want {
					t.Errorf("PLT stub %#x: %v, %v; want %s", addr, names(lines), err, want)
				}
			}
		})
	}
	s, id := store(t, nobits(t, stripped, ".rela.plt"))
	if lines, err := s.Symbolize(id, parcatest.Mapping{}, symbolAddr(t, orig, "tandem_c_leaf")); !errors.Is(err, parcatest.ErrLinerFailed) {
		t.Errorf("with .rela.plt dropped: %v, %v; want %v", names(lines), err, parcatest.ErrLinerFailed)
	}
}

// TestSymbolizeRunningProcess: the address a running process reports for
// its own function, with the mapping it lies in (from /proc/PID/maps),
// normalizes to that function (a position-independent executable, so the
// mapping's start and offset matter).
func TestSymbolizeRunningProcess(t *testing.T) {
	path := testbin.C(t, "", "cpie", cSource, "-g0", "-O1", "-pie", "-fPIE")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mappingOf(t, cmd.Process.Pid, addr)
	if !ok {
		t.Fatalf("no mapping of %s holds %#x", path, addr)
	}
	s, id := store(t, strip(t, orig))
	lines, err := s.Symbolize(id, m, addr+1)
	if err != nil || len(lines) != 1 || lines[0].Function != "tandem_c_leaf" {
		t.Errorf("runtime %#x in mapping %+v: %v, %v; want tandem_c_leaf", addr, m, names(lines), err)
	}
	if _, err := s.Symbolize(id, m, m.Limit); err == nil {
		t.Error("an address past the mapping was accepted")
	}
}

func mappingOf(t *testing.T, pid int, addr uint64) (parcatest.Mapping, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		limit, _ := strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseUint(f[2], 16, 64)
		if start <= addr && addr < limit {
			return parcatest.Mapping{Start: start, Limit: limit, Offset: off}, true
		}
	}
	return parcatest.Mapping{}, false
}

// TestSymbolizeDWARF: with debug info the DWARF liner answers, with the
// source file and line.
func TestSymbolizeDWARF(t *testing.T) {
	path := testbin.C(t, "", "cdwarf", cSource, "-g", "-O0")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{orig, strip(t, orig)} {
		s, id := store(t, data)
		lines, err := s.Symbolize(id, parcatest.Mapping{}, symbolAddr(t, orig, "tandem_c_middle")+8)
		if err != nil || len(lines) != 1 || lines[0].Function != "tandem_c_middle" || !strings.HasSuffix(lines[0].File, "cdwarf.c") || lines[0].Line < 10 || lines[0].Line > 12 {
			t.Errorf("tandem_c_middle: %+v, %v", lines, err)
		}
	}
}

// TestSymbolizeGo: a Go executable without DWARF resolves from its
// pclntab, whole or stripped; without the pclntab's contents the server
// gives up rather than falling back to the symbol table.
func TestSymbolizeGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	path := testbin.Go(t, "", "gosym", goSource, "-ldflags=-w")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stripped := strip(t, orig)
	for _, data := range [][]byte{orig, stripped} {
		s, id := store(t, data)
		lines, err := s.Symbolize(id, parcatest.Mapping{}, symbolAddr(t, orig, "main.tandemGoLeaf")+1)
		if err != nil || len(lines) != 1 || lines[0].Function != "main.tandemGoLeaf" || !strings.HasSuffix(lines[0].File, "main.go") || lines[0].Line != 6 {
			t.Errorf("main.tandemGoLeaf: %+v, %v", lines, err)
		}
	}
	s, id := store(t, nobits(t, stripped, ".gopclntab"))
	if _, err := s.Symbolize(id, parcatest.Mapping{}, symbolAddr(t, orig, "main.tandemGoLeaf")); !errors.Is(err, parcatest.ErrLinerFailed) {
		t.Errorf("without .gopclntab: %v, want %v", err, parcatest.ErrLinerFailed)
	}
}

// TestSymbolizeGivesUp: what the server cannot use.
func TestSymbolizeGivesUp(t *testing.T) {
	s := parcatest.NewSymbolStore()
	s.Set("notelf", parcatest.Debuginfo{Data: []byte("#!/bin/sh\n")})
	s.Set("pending", parcatest.Debuginfo{Uploading: true, UploadID: "u", Started: time.Now()})
	for _, tc := range []struct {
		id   string
		want error
	}{{"notelf", parcatest.ErrNotValidELF}, {"pending", parcatest.ErrNotUploadedYet}, {"unknown", parcatest.ErrNotUploadedYet}} {
		if _, err := s.Symbolize(tc.id, parcatest.Mapping{}, 0x1000); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.id, err, tc.want)
		}
	}
	if e, _ := s.Entry("notelf"); !e.Invalid {
		t.Error("a file that is not ELF was not marked invalid")
	}
}
