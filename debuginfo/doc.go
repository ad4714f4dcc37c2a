// Package debuginfo uploads the symbols of the executables the sampler
// passes over (as descriptors) to Parca's DebuginfoService, unprivileged,
// following parca-agent's client flow (docs/parca-protocols.md §2.5):
//
//   - the build id is the executable key (schema.KeyOf, which every
//     profile format uses too): the GNU build id, else the file id
//     (BUILD_ID_TYPE_HASH);
//   - ShouldInitiateUpload, then InitiateUpload with the file id as hash and
//     the payload size, then the chunked gRPC Upload stream or an HTTP PUT
//     to a signed URL, then MarkUploadFinished;
//   - a bounded do-not-retry cache keyed by file id: permanent after a
//     success or a definitive "no", five minutes while the server reports
//     another upload in progress or refuses a precondition, nothing on
//     transport errors (the next notice of the file retries).
//
// By default the payload is not the executable but a copy written by Strip:
// the ELF header, the PT_LOAD (unchanged) and PT_NOTE program headers,
// every section header, and only the contents of debug, symbol, string, Go
// and note sections.
//
// Uploader.Submit never blocks: a bounded queue feeds a fixed number of
// workers, and whatever does not fit is dropped and counted. The Uploader
// owns every descriptor handed to Submit and closes each exactly once,
// whatever happens to the upload (dropped, skipped, failed, done, or Close
// while queued). Uploader is safe for concurrent use; after Close, Submit
// closes what it is given and returns false.
//
// Metrics (tandem_encoder_debuginfo_*) are registered on the Registerer
// given to New. Strip parses untrusted input with debug/elf and bounds
// checks; it never panics and never writes more than about twice its input.
package debuginfo
