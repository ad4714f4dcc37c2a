# Tandem stream schema: everything that crosses the sampler -> encoder socket
# and everything a dump file holds.
#
# Each message below travels as the payload of one ipc frame; the frame's type
# byte says which message it is (see ipc/doc.go and docs/ipc-format.md), so
# there is no top-level union here.
#
# Evolution rules (protocol major version 1):
#   * Fields are only ever added, with the next ordinal. Nothing is renamed in
#     a way that changes meaning, removed, or retyped.
#   * Enums only gain values. A reader must treat a value it does not know as
#     "unknown", never fail on it.
#   * A change a reader of the previous major version cannot safely ignore
#     bumps Hello.majorVersion; the encoder refuses a major it does not speak
#     with an error naming both versions.
#
# String-table convention: fields documented as "string index" are indices
# into the enclosing Batch's `strings` list, whose element 0 is always the
# empty string. Index 0 therefore means "absent". In layouts 0 and 1 the
# tables are local to one batch; in layout 2 (protocol 1.4) they are the
# connection's dictionary (DictionaryChunk), and the indices are its ids.

@0xd5b6f3a1c2e4f708;

using Go = import "/go.capnp";
$Go.package("wire");
$Go.import("github.com/tandem-profiler/tandem/schema/internal/wire");

# Hello is the first frame of every connection and every dump. It describes
# the sampler session that produced the stream.
struct Hello {
  majorVersion @0 :UInt16;        # Incompatible protocol generation; 1 today.
  minorVersion @1 :UInt16;        # Additive revisions within the major.
  samplerVersion @2 :Text;        # Build version of tandem-sampler.
  nodeName @3 :Text;              # --node, or the host name.
  kernelRelease @4 :Text;         # uname -r of the sampled machine.
  bootId @5 :Text;                # /proc/sys/kernel/random/boot_id.
  samplingFrequencyHz @6 :UInt32; # perf CPU-clock frequency per CPU.
  tracers @7 :List(Text);         # Enabled interpreter unwinders, e.g. "python".
  sessionId @8 :Data;             # 16 random bytes naming this sampler run;
                                  # sequence numbers are scoped to it.
  startTimeUnixNano @9 :Int64;    # When the sampler started.
  offCpuThreshold @10 :UInt32;    # Off-CPU sampling probability * 2^32-1; 0 = off.
}

# Origin says what produced a sample, and so what its value means.
# Values match the upstream tracer's libpf.Origin.
enum Origin {
  unknown @0;
  cpuSampling @1;  # perf CPU-clock sample; value is a count (1).
  offCpu @2;       # scheduler switch-out; value is nanoseconds off CPU.
  probe @3;        # kprobe/uprobe hit; value is a count (1).
}

# FrameKind is the unwinder that produced a frame. Values match the upstream
# tracer's libpf.FrameType with the error bit (0x80) cleared; the error bit
# travels in Frame.error.
enum FrameKind {
  unknown @0;
  cpython @1;
  php @2;
  native @3;
  kernel @4;
  hotspot @5;
  ruby @6;
  perl @7;
  v8 @8;
  phpJit @9;
  dotnet @10;
  go @11;
  beam @12;
  luajit @13;
}

# Mapping is an executable file mapping a frame belongs to.
struct Mapping {
  fileName @0 :UInt32;     # String index: base name of the file ("libc.so.6").
  path @1 :UInt32;         # String index: full path when known, else 0.
  gnuBuildId @2 :UInt32;   # String index: hex .note.gnu.build-id, else 0.
  goBuildId @3 :UInt32;    # String index: Go build id for Go binaries, else 0.
  fileIdHi @4 :UInt64;     # Upper 64 bits of the 128-bit file id (htlhash).
  fileIdLo @5 :UInt64;     # Lower 64 bits of the file id.
  start @6 :UInt64;        # File virtual address where the mapping starts.
  end @7 :UInt64;          # File virtual address where the mapping ends.
  fileOffset @8 :UInt64;   # Offset of the mapping in the file.
}

# Frame is one entry of a stack, described without reference to any output
# format.
struct Frame {
  kind @0 :FrameKind;
  error @1 :Bool;             # The unwinder failed here; addressOrLine holds
                              # its error code. kind=unknown + error is the
                              # abort marker.
  addressOrLine @2 :UInt64;   # Native/kernel: file VA (return addresses already
                              # decremented by one). Interpreted: bytecode index
                              # or 0; the line is in sourceLine.
  mapping @3 :UInt32;         # 1-based index into Batch.mappings; 0 = none.
  functionName @4 :UInt32;    # String index, set where the tracer symbolized.
  sourceFile @5 :UInt32;      # String index.
  sourceLine @6 :UInt32;      # 0 = unknown.
  sourceColumn @7 :UInt32;    # 0 = unknown (v8 only).
  functionOffset @8 :UInt32;  # Line offset from the function start, if known.
}

# KeyValue is a pair of string indices.
struct KeyValue {
  key @0 :UInt32;
  value @1 :UInt32;
}

# Process carries the labels of one process that only root reads cheaply.
struct Process {
  pid @0 :UInt32;
  comm @1 :UInt32;            # String index: /proc/PID/comm, trimmed.
  executablePath @2 :UInt32;  # String index: readlink /proc/PID/exe.
  containerId @3 :UInt32;     # String index: from /proc/PID/cgroup, else 0.
  systemdUnit @4 :UInt32;     # String index: unit from the cgroup path, else 0.
  serviceName @5 :UInt32;     # String index: APM service name, else 0.
  envVars @6 :List(KeyValue); # Requested environment variables (--include-env-var).
}

# Sample is one observation of a thread's stack.
struct Sample {
  timestampUnixNano @0 :Int64;
  origin @1 :Origin;
  value @2 :Int64;            # 1 for counts; nanoseconds for offCpu.
  process @3 :UInt32;         # Index into Batch.processes.
  tid @4 :UInt32;
  cpu @5 :UInt32;
  threadName @6 :UInt32;      # String index: the thread's comm.
  stack @7 :UInt32;           # Index of the stack (see Batch.stackEnds).
  labels @8 :List(KeyValue);  # Go pprof labels (the "labels" tracer).
}

# Batch is a group of samples with the tables they reference. It is the unit
# of sequencing, acknowledgement and resend.
struct Batch {
  sequence @0 :UInt64;        # Per session, strictly increasing from 1; shared
                              # with LossReport.
  strings @1 :List(Text);     # String table; element 0 is "".
  mappings @2 :List(Mapping);
  frames @3 :List(Frame);
  stackFrames @4 :List(UInt32); # Frame indices of all stacks, concatenated,
                                # each stack leaf first (kernel frames first).
  stackEnds @5 :List(UInt32);   # Stack i is stackFrames[stackEnds[i-1]:stackEnds[i]]
                                # (stackEnds[-1] = 0).
  processes @6 :List(Process);
  samples @7 :List(Sample);

  # Protocol 1.2: the packed layout. Decoding millions of samples per
  # second through per-element accessors is too slow, so the big tables
  # travel as arrays of fixed-size little-endian records in Data fields.
  #   layout 0 (1.0, 1.1): strings, frames, stackFrames, stackEnds,
  #     processes and samples are the lists above.
  #   layout 1 (1.2): those lists stay empty (so a 1.0/1.1 reader rejects
  #     every such batch: its string 0 is missing) and the tables are in
  #     the fields below. mappings (a few dozen) stay a list.
  # A reader rejects a layout it does not know. docs/ipc-format.md draws
  # the records.
  layout @8 :UInt16;
  stringBytes @9 :Data;       # Layout 1: strings 0..n-1 concatenated, UTF-8
                              # (string 0 is "", so it adds nothing).
  stringEnds @10 :Data;       # Layout 1: n little-endian uint32, the end of
                              # string i in stringBytes; non-decreasing, and
                              # stringEnds[0] = 0.
  packedFrames @11 :Data;     # Layout 1: one 34-byte record per frame, all
                              # little-endian: addressOrLine u64, mapping u32,
                              # functionName u32, sourceFile u32, sourceLine
                              # u32, sourceColumn u32, functionOffset u32,
                              # kind u8, flags u8 (bit 0: error; the other
                              # bits are reserved and must be 0).
  packedStackFrames @12 :Data; # Layout 1: stackFrames as little-endian uint32s.
  packedStackEnds @13 :Data;   # Layout 1: stackEnds as little-endian uint32s.
  packedProcesses @14 :Data;   # Layout 1: one 24-byte record per process:
                               # pid, comm, executablePath, containerId,
                               # systemdUnit, serviceName, each u32.
  packedEnvVars @15 :Data;     # Layout 1: every process's envVars as 12-byte
                               # records: process index u32, key u32, value
                               # u32; process indices non-decreasing, a
                               # process's pairs in order.
  packedSamples @16 :Data;     # Layout 1: one 38-byte record per sample:
                               # timestampUnixNano i64, value i64, process
                               # u32, tid u32, cpu u32, threadName u32,
                               # stack u32, origin u16.
  packedLabels @17 :Data;      # Layout 1: every sample's labels as 12-byte
                               # records: sample index u32, key u32, value
                               # u32; sample indices non-decreasing, a
                               # sample's pairs in order.

  # Protocol 1.4: layout 2, dictionary references. The strings, mappings,
  # frames and stacks live in the connection's dictionary, which
  # DictionaryChunk frames extend; a layout-2 batch carries only its
  # processes and samples (the packed fields above) and every string,
  # frame and stack reference in them is a dictionary id. The string,
  # mapping, frame and stack fields (lists and packed) stay empty, so a
  # 1.0-1.3 reader rejects the batch (its string 0 is missing, and 1.2-1.3
  # readers reject layout 2 by number).
  generation @18 :UInt64;      # Layout 2: the dictionary generation its ids
                               # refer to; must be the connection's current one.

  # Protocol 1.5: trace links. The trace span that was running on a
  # sample's thread, when the tracer found one (an OpenTelemetry eBPF
  # Instrumentation span map, or an Elastic APM agent's thread-local
  # buffer). Layouts 1 and 2 only. A sample without a link has no record,
  # so links cost nothing when absent; a 1.4 reader ignores the field
  # (it drops the links and keeps the samples).
  packedLinks @19 :Data;       # One 28-byte record per linked sample: sample
                               # index u32 LE, trace id (16 bytes), span id
                               # (8 bytes), the ids in the tracer's byte
                               # order (W3C order); sample indices strictly
                               # increasing, neither id all zero.
}

# DictionaryChunk extends the connection's (or dump's) dictionary: the
# payload of a FrameDictionary frame (protocol 1.4). Not sequenced, not
# acknowledged: on every connection the sampler writes each chunk a batch
# needs before that batch, so the receiver's dictionary holds exactly what
# was written on that connection. Entries are appended and never change
# within a generation; a chunk of a higher generation starts a new,
# empty dictionary (stringBase 1, the other bases 0).
struct DictionaryChunk {
  generation @0 :UInt64;       # 1 and up; never decreases on a connection.
  stringBase @1 :UInt32;       # Id of this chunk's first string: the
                               # receiver's current string count (string 0,
                               # "", is in every generation, so a
                               # generation's first chunk has 1).
  mappingBase @2 :UInt32;      # Current mapping count (mapping ids are
                               # 1-based in frames: 0 = none).
  frameBase @3 :UInt32;        # Current frame count.
  stackBase @4 :UInt32;        # Current stack count.
  stringBytes @5 :Data;        # The new strings, concatenated, UTF-8.
  stringEnds @6 :Data;         # One little-endian uint32 per new string: its
                               # end in stringBytes; non-decreasing, the last
                               # equal to the length of stringBytes.
  mappings @7 :List(Mapping);  # New mappings; string fields are dictionary ids.
  packedFrames @8 :Data;       # New frames, 34-byte records as in
                               # Batch.packedFrames; string and mapping
                               # fields are dictionary ids.
  packedStackFrames @9 :Data;  # Frame ids (dictionary) of the new stacks,
                               # concatenated, leaf first, uint32 LE.
  packedStackEnds @10 :Data;   # One uint32 LE per new stack: its end in this
                               # chunk's packedStackFrames.
}

# ExecutableNotice announces an executable file the tracer saw, for symbol
# upload. On a socket the file descriptor travels with the frame as
# SCM_RIGHTS ancillary data; a dump records the notice without it.
struct ExecutableNotice {
  fileIdHi @0 :UInt64;
  fileIdLo @1 :UInt64;
  fileName @2 :Text;          # Base name.
  path @3 :Text;              # Full path as the process mapped it.
  gnuBuildId @4 :Text;
  goBuildId @5 :Text;
  debuglinkFileName @6 :Text; # .gnu_debuglink target, if any.
  pid @7 :UInt32;             # A process that mapped it.
  hasDescriptor @8 :Bool;     # A descriptor is attached to this frame.
  isVdso @9 :Bool;            # The descriptor is a memfd copy of the vdso.
}

# LossStage says where data was dropped.
enum LossStage {
  unknown @0;
  samplerQueue @1;      # The sampler's bounded queue was full (oldest dropped).
  resendBuffer @2;      # Unacknowledged data evicted before the encoder acked it.
  executableQueue @3;   # Executable notices (descriptors closed).
  classification @4;    # A trace could not be converted.
  encoder @5;           # Dropped inside the encoder (recorded in dumps only).
}

struct Loss {
  stage @0 :LossStage;
  reason @1 :Text;
  samples @2 :UInt64;
  bytes @3 :UInt64;
  descriptors @4 :UInt64;
}

# LossReport tells the encoder what was dropped since the previous report.
struct LossReport {
  sequence @0 :UInt64;        # Shares the batch sequence space.
  losses @1 :List(Loss);
}

# Goodbye is the last frame of a clean shutdown.
struct Goodbye {
  reason @0 :Text;
  lastSequence @1 :UInt64;    # Highest sequence sent in this session.
}

# SamplerStats carries the sampler's own counters and gauges to the encoder,
# which exports them (the sampler serves no HTTP). Best effort: not
# sequenced, not acknowledged, never resent; the sampler sends one every
# --stats-interval and keeps only the latest one that is waiting. Each
# message holds every metric's current value, so a lost one costs nothing.
# Added in protocol 1.1; a 1.0 encoder skips the frame type.
struct SamplerStats {
  timeUnixNano @0 :Int64;       # When the values were read.
  metrics @1 :List(SamplerMetric);
}

# SamplerMetric is one sampler metric as its Prometheus registry has it.
struct SamplerMetric {
  name @0 :Text;                # Prometheus name, e.g. "tandem_ipc_client_evicted_samples_total".
  labels @1 :List(MetricLabel); # Sorted by name.
  value @2 :Float64;
  counter @3 :Bool;             # Cumulative since the sampler started; false: a gauge.
}

struct MetricLabel {
  name @0 :Text;
  value @1 :Text;
}
