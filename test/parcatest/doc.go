// Package parcatest is an in-process Parca-compatible profile store for
// tests: a ProfileStoreService server (generated from
// schema/parca/parca/profilestore/v1alpha1) that enforces what
// docs/parca-protocols.md says the real server enforces (schema metadata
// key and value, exact column types, required columns, the v1 two-message
// exchange, LZ4 or no IPC body compression) and decodes every record with
// arrow-go into rows that tests compare with the input stream. Expected
// rows are computed from the stream independently of encoder/arrow, from
// the reference's per-frame-type conventions. The same address serves a
// DebuginfoService (SymbolStore) that follows the server's upload decision
// table and symbolizes what it received as the server's symbolizer does:
// DWARF, else Go's pclntab, else the symbol tables with name@plt stubs from
// .rela.plt, after Parca's address normalization, giving up on an upload
// whose needed section is unreadable. It is imported only by _test.go
// files.
package parcatest
