// Package symbolize names native frames in the unprivileged encoder, from
// the executables the sampler passes over as descriptors.
//
// For each executable it reads, once, a compact table:
//
//   - the ELF symbol tables (.symtab, else .dynsym) — function symbols only;
//   - PLT stubs from .rela.plt, named "name@plt" as perf and Parca name them
//     (64-bit x86-64 and arm64 executables);
//   - Go's pclntab (.gopclntab, Go 1.18 and later): function, file and line
//     for every Go frame, and the inlined calls at the address when the
//     binary keeps its go:func.* symbol (Go 1.20 and later).
//
// A stripped executable (no .symtab) gets the symbol table of its
// separate debug file, when the machine has one (DebugSearch): looked up
// by GNU build id under each debug directory (<dir>/.build-id/xx/yyyy.debug,
// where Debian's -dbgsym packages and Fedora's debuginfo put them), then by
// .gnu_debuglink next to the executable, in .debug/ there and under each
// debug directory at the executable's directory. A file found is used only
// when it is the executable's: the same class and machine, the same build
// id, and for a debuglink where either file has no build id the CRC32 the
// executable names (two equal build ids need no CRC). Its function
// symbols join the executable's own, so internal (static) functions are
// named. The search opens only regular files, read-only and without
// blocking, and the debug file is closed once its symbols are copied.
//
// DWARF line tables are not read, from executables or debug files: the
// executables that matter here ship without them (distribution binaries,
// release builds), Go binaries carry their lines in the pclntab, and
// parsing DWARF costs far more per file than the symbol tables (libc6-dbg's
// libc: 0.3 s and 36 MB against 4 ms, docs/benchmarks/symbols.md). C frames are named,
// not lined.
//
// Everything read is untrusted: the files come from any process on the
// node. Parsing runs only here, in the unprivileged encoder, with
// debug/elf for headers and bounds-checked readers of our own for the
// symbol and pclntab bytes; no read goes past the section it belongs to.
// A section larger than Config.MaxSectionBytes is skipped, a file whose
// parse takes longer than Config.ParseTimeout is given up on (and not
// tried again), and every failure is counted and logged once, never fatal.
//
// Memory is bounded: the parsed tables (the bytes they keep, as
// accounted by Table.Bytes) are held in an LRU of at most
// Config.CacheBytes. A table evicted for bytes is parsed again from its
// descriptor when next needed.
//
// So is what the descriptors hold on the node: at most Config.MaxFiles
// descriptors, of files of at most Config.MaxHeldBytes in all, are kept
// (past either, the least recently used is closed; its table stays when
// it reads nothing from the file, and the file is forgotten otherwise). A
// descriptor is what keeps a deleted file's disk space from being
// reclaimed, so the held descriptors are checked every
// Config.SweepInterval: the symbols of a file found deleted (link count 0)
// are read if they were not yet, its table is made independent of the
// file (Table.Detached: a Go pclntab is then read into memory, accounted
// in the cache), and its descriptor closed. A file still linked keeps its
// descriptor: the encoder cannot open a container's file by its path, and
// the descriptor is what a table evicted from the cache is read again
// from. A file whose symbols cannot be read keeps no descriptor.
// A Go pclntab is not copied into memory: a table keeps its function
// table (8 bytes per function) and reads the rest from the descriptor when
// a location is resolved (a few small reads), so a Go binary costs tens of
// KB, not its pclntab's megabytes; a file that shrank, or a descriptor
// closed since, names nothing more. While a table is built, the symbol,
// string and relocation tables are mapped read-only from the descriptor
// rather than read into the heap, and unmapped when it is done; a file
// truncated under that mapping is a fault Load recovers from
// (runtime/debug.SetPanicOnFault) and reports as an error, never a crash.
//
// Resolving is meant to happen once per distinct location, not per sample:
// the encoder's aggregator asks for each new native location once per
// dictionary generation and keeps the answer with the location.
package symbolize
