// Command residency is a measurement aid: it says which parts of a running
// Go program's own binary are resident in its memory (the file-backed RSS
// that /proc/PID/status calls RssFile), by package, from
// /proc/PID/pagemap's present bits and the binary's symbol table.
//
//	residency [-top 30] [-by package|module] PID
//
// For each mapping of the executable it prints the resident and mapped
// size, then the resident bytes of text (and of other symbols) summed by
// package: a page counts for every symbol that overlaps it, so a page
// shared by two packages counts for both. Pages with no symbol (the
// pclntab, type links) are summed under their ELF section. It needs root
// (or the process's own uid) to read pagemap. It is not part of Tandem.
package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type mapping struct {
	start, end, offset uint64
	perms, path        string
}

func main() {
	top := flag.Int("top", 30, "packages to list per mapping")
	by := flag.String("by", "package", "group symbols by package or module")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatal("usage: residency [-top N] [-by package|module] PID")
	}
	pid := flag.Arg(0)
	exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
	if err != nil {
		log.Fatalf("read the executable of %s: %v", pid, err)
	}
	maps, err := readMaps(pid, exe)
	if err != nil {
		log.Fatal(err)
	}
	pm, err := os.Open(filepath.Join("/proc", pid, "pagemap"))
	if err != nil {
		log.Fatalf("open pagemap (needs root): %v", err)
	}
	defer pm.Close()
	f, err := elf.Open(filepath.Join("/proc", pid, "exe"))
	if err != nil {
		log.Fatalf("read %s: %v", exe, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		log.Fatalf("symbols of %s: %v", exe, err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })

	page := uint64(os.Getpagesize())
	var totalRes uint64
	for _, m := range maps {
		present, err := presentPages(pm, m, page)
		if err != nil {
			log.Fatal(err)
		}
		// The mapping's virtual addresses are the binary's (a Go
		// executable is not position-independent).
		groups := map[string]uint64{}
		var res uint64
		for i, p := range present {
			if !p {
				continue
			}
			res += page
			lo := m.start + uint64(i)*page
			hi := lo + page
			names := map[string]bool{}
			k := sort.Search(len(syms), func(k int) bool { return syms[k].Value+syms[k].Size > lo })
			for ; k < len(syms) && syms[k].Value < hi; k++ {
				if syms[k].Size == 0 {
					continue
				}
				names[group(syms[k].Name, *by)] = true
			}
			if len(names) == 0 {
				names["("+sectionOf(f, lo)+")"] = true
			}
			for n := range names {
				groups[n] += page
			}
		}
		totalRes += res
		fmt.Printf("%s %s: %d KiB resident of %d KiB mapped\n", m.perms, filepath.Base(m.path), res>>10, (m.end-m.start)>>10)
		type kv struct {
			k string
			v uint64
		}
		var list []kv
		for k, v := range groups {
			list = append(list, kv{k, v})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v || list[i].v == list[j].v && list[i].k < list[j].k })
		for i, e := range list {
			if i == *top {
				break
			}
			fmt.Printf("  %8d KiB  %s\n", e.v>>10, e.k)
		}
	}
	fmt.Printf("total: %d KiB of %s resident\n", totalRes>>10, filepath.Base(exe))
}

func readMaps(pid, exe string) ([]mapping, error) {
	f, err := os.Open(filepath.Join("/proc", pid, "maps"))
	if err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[5] != exe {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		s, _ := strconv.ParseUint(se[0], 16, 64)
		e, _ := strconv.ParseUint(se[1], 16, 64)
		o, _ := strconv.ParseUint(fs[2], 16, 64)
		out = append(out, mapping{start: s, end: e, offset: o, perms: fs[1], path: fs[5]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mapping of %s in /proc/%s/maps", exe, pid)
	}
	return out, sc.Err()
}

// presentPages reads the pagemap entries of m: bit 63 is "present in RAM".
func presentPages(pm io.ReaderAt, m mapping, page uint64) ([]bool, error) {
	n := (m.end - m.start) / page
	buf := make([]byte, 8*n)
	if _, err := pm.ReadAt(buf, int64(m.start/page*8)); err != nil {
		return nil, fmt.Errorf("read pagemap: %w", err)
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0
	}
	return out, nil
}

func sectionOf(f *elf.File, addr uint64) string {
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s.Name
		}
	}
	return "no section"
}

// group is a symbol's package (or module): the import path before the
// first dot after the last slash, for methods, generic instantiations,
// type equality functions and itabs alike.
func group(sym, by string) string {
	for _, p := range []string{"type:.eq.", "type:.hash.", "go:itab.*", "go:itab.", "type:*", "type:"} {
		if strings.HasPrefix(sym, p) && len(sym) > len(p) {
			sym = sym[len(p):]
			break
		}
	}
	if i := strings.IndexAny(sym, "[,"); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/')
	pkg := sym
	if i := strings.IndexByte(sym[slash+1:], '.'); i >= 0 {
		pkg = sym[:slash+1+i]
	}
	if by == "module" {
		parts := strings.Split(pkg, "/")
		n := 1 // the standard library: its top directory
		switch {
		case parts[0] == "github.com" || parts[0] == "gitlab.com" || parts[0] == "golang.org" || parts[0] == "vendor":
			n = 3
		case strings.Contains(parts[0], "."):
			n = 2
		}
		pkg = strings.Join(parts[:min(n, len(parts))], "/")
	}
	return pkg
}
