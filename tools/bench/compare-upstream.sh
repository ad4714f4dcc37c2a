#!/usr/bin/env bash
# compare-upstream.sh: Tandem's pair (tandem-sampler as root + tandem-encoder
# as uid 65534, joined by a Unix socket) against the upstream OpenTelemetry
# eBPF profiler agent (one process), on the same workload, both exporting
# OTLP/profiles to the same local receiver (tools/bench/otlpsink).
#
#   sudo tools/bench/compare-upstream.sh
#
# Settings (environment):
#   DURATION=60     seconds each profiler runs
#   STEADY_FROM=10  start of the steady-state window (seconds after start)
#   RUNS=2          runs per configuration (alternated: tandem, upstream, ...)
#   HZ=19           samples per second per CPU, both profilers
#   INTERVAL=5s     export interval, both (upstream -reporter-interval, its
#                   default; tandem-encoder --profiling-duration)
#   PORT=14317      port of the OTLP sink on 127.0.0.1
#   UPSTREAM_VERSION=<from go.mod>  upstream module version to build
#   CONFIGS="tandem upstream"       which configurations to run; tandem_unconfined
#                   is the pair with --confine=false on both processes
#   KEEP=1          keep the work directory (logs, per-run files)
#   BIN_DIR=DIR     use the binaries found there instead of building them
#   SYMBOLIZE_NATIVE=off  tandem-encoder --symbolize-native (off: upstream's work)
#   SAMPLER_ARGS=, ENCODER_ARGS=  extra flags (word-split) for tandem-sampler
#                   and tandem-encoder serve, e.g. SAMPLER_ARGS="--flush-interval 5s"
#   ENCODER_ENV=    environment for tandem-encoder only, e.g. ENCODER_ENV="GOGC=50"
#
# Everything is built in a temporary directory: Tandem from this working tree
# (vendor mode + the rlimit overlay, as `make build`); upstream's `main`
# package from a temporary copy of its module source with only rlimit/rlimit.go
# replaced by _overlay/rlimit.go.txt (the same memlock tolerance Tandem's
# sampler gets). Nothing is written to the repository.
#
# Workload, identical for every run and restarted for each: a Python program
# spinning in a few functions, and `sha256sum /dev/zero`.
#
# Measured per process, from /proc/PID/stat (utime+stime, 10 ms ticks) and
# /proc/PID/status, and /usr/bin/time -v for the whole lifetime:
#   cpu_total   user+sys over the whole life, shutdown included (time -v)
#   cpu@10/@end user+sys at STEADY_FROM and at DURATION
#   steady      (cpu@end - cpu@10) / (DURATION - STEADY_FROM), in ms of CPU per s
#   sched       the same from /proc/PID/task/*/schedstat (run time in ns, summed
#               over the threads alive at the end: no 10 ms tick rounding)
#   cs          context switches per second in the same window (voluntary +
#               involuntary, summed over the threads): wake-ups, which
#               depend less on the neighbours' load than CPU time does
#   hwm         peak RSS (VmHWM) just before the stop
#   rss         settled RSS (VmRSS) just before the stop, and its two parts:
#   anon        anonymous memory (RssAnon: heap, stacks, runtime)
#   file        file-backed pages (RssFile: mostly the binary's own text and
#               read-only data, clean page cache the kernel can drop)
# plus what the sink received and, for Tandem, the socket traffic the sampler
# logs at exit (ipc_client_sent_bytes_total, sampler_batch_samples_total).
#
# This is a measurement harness: `make test` never runs it.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPO=$PWD

DURATION=${DURATION:-60}
STEADY_FROM=${STEADY_FROM:-10}
RUNS=${RUNS:-2}
HZ=${HZ:-19}
INTERVAL=${INTERVAL:-5s}
PORT=${PORT:-14317}
CONFIGS=${CONFIGS:-"tandem upstream"}
UPSTREAM_VERSION=${UPSTREAM_VERSION:-$(awk '$1=="go.opentelemetry.io/ebpf-profiler"{print $2; exit}' go.mod)}
ENCODER_UID=${TANDEM_ENCODER_UID:-65534}
ENCODER_GID=${TANDEM_ENCODER_GID:-65534}
GO=${GO:-go}

if [[ $(id -u) -ne 0 ]]; then
	echo "compare-upstream.sh needs root: both profilers load eBPF programs" >&2
	exit 1
fi
for tool in /usr/bin/time setpriv python3 sha256sum; do
	command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
if (( DURATION <= STEADY_FROM )); then
	echo "DURATION ($DURATION) must exceed STEADY_FROM ($STEADY_FROM)" >&2
	exit 1
fi

WORK=$(mktemp -d /tmp/tandem-compare.XXXXXX)
chmod 0711 "$WORK" # the encoder (uid $ENCODER_UID) must reach its socket
PIDS=()      # our background processes, /usr/bin/time wrappers included
PROFILERS=() # the profilers themselves (children of the wrappers): stopped first
cleanup() {
	local p
	for p in "${PROFILERS[@]}" "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ -n ${KEEP:-} ]]; then
		echo "work directory kept: $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# --- build -------------------------------------------------------------------

# BIN_DIR: take whichever of tandem-sampler, tandem-encoder, otlpsink and
# ebpf-profiler it holds instead of building them (e.g. binaries of a
# specific commit; the versions are logged).
mkdir -p "$WORK/bin"
for b in tandem-sampler tandem-encoder otlpsink ebpf-profiler; do
	if [[ -n ${BIN_DIR:-} && -x $BIN_DIR/$b ]]; then
		cp "$BIN_DIR/$b" "$WORK/bin/$b"
		log "using prebuilt $BIN_DIR/$b"
	fi
done

if [[ ! -x $WORK/bin/tandem-sampler || ! -x $WORK/bin/tandem-encoder || ! -x $WORK/bin/otlpsink ]]; then
	log "building tandem-sampler, tandem-encoder and otlpsink from $REPO ($(git describe --always --dirty 2>/dev/null || echo unknown))"
	make -s prepare >/dev/null
	(
		# the flags of `make build`
		eval "$(make -s --no-print-directory build-env)"
		export GOFLAGS CGO_ENABLED
		$GO build -ldflags "$LDFLAGS" -o "$WORK/bin/tandem-sampler" ./cmd/sampler
		# as the image's encoder (deploy/container/build-static.sh)
		$GO build -tags="$IMAGE_ENCODER_TAGS" -ldflags "$LDFLAGS" -o "$WORK/bin/tandem-encoder" ./cmd/encoder
		$GO build -o "$WORK/bin/otlpsink" ./tools/bench/otlpsink
	)
fi

if [[ ! -x $WORK/bin/ebpf-profiler && " $CONFIGS " == *" upstream "* ]]; then
	log "building the upstream agent go.opentelemetry.io/ebpf-profiler@$UPSTREAM_VERSION"
	UPSTREAM_SRC=$(GOFLAGS= GOWORK=off $GO mod download -json "go.opentelemetry.io/ebpf-profiler@$UPSTREAM_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	[[ -d $UPSTREAM_SRC ]] || { echo "cannot find the upstream module source" >&2; exit 1; }
	cp -r "$UPSTREAM_SRC" "$WORK/upstream"
	chmod -R u+w "$WORK/upstream"
	cp "$REPO/_overlay/rlimit.go.txt" "$WORK/upstream/rlimit/rlimit.go"
	# as upstream's Makefile builds its agent: no cgo, osusergo and netgo
	(cd "$WORK/upstream" && GOFLAGS= GOWORK=off CGO_ENABLED=0 $GO build -trimpath -tags osusergo,netgo -o "$WORK/bin/ebpf-profiler" .)
	rm -rf "$WORK/upstream"
fi
chmod 0755 "$WORK/bin" "$WORK/bin/"*
log "tandem-sampler $("$WORK/bin/tandem-sampler" --version 2>&1 | head -1)"

# As make run (deploy/local/run-pair.sh) with a remote store and no
# debuginfo address: symbol upload off. The telemetry endpoint is disabled
# so that the run does not depend on a free port 7071.
ENCODER_EXTRA=(--http-address=)
if "$WORK/bin/tandem-encoder" serve --help 2>&1 | grep -q -- --debuginfo-upload-disable; then
	ENCODER_EXTRA+=(--debuginfo-upload-disable)
fi
# The same work on both sides: upstream names no native (C, C++, Rust)
# frames, it leaves them to the backend; the encoder's own native
# symbolization (--symbolize-native, default auto for OTLP) parses every
# sampled executable's symbol tables. SYMBOLIZE_NATIVE=auto measures that.
if "$WORK/bin/tandem-encoder" serve --help 2>&1 | grep -q -- --symbolize-native; then
	ENCODER_EXTRA+=("--symbolize-native=${SYMBOLIZE_NATIVE:-off}")
fi

# --- workload ----------------------------------------------------------------

cat >"$WORK/busy.py" <<'PY'
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def middle(n):
    return leaf(n) + leaf(n // 2)

def outer():
    while True:
        middle(2000)
        other(300)

def other(n):
    return sorted(str(i) for i in range(n))

outer()
PY
PYTHON=$(command -v python3)

start_workload() {
	"$PYTHON" "$WORK/busy.py" &
	WL_PY=$!
	sha256sum /dev/zero >/dev/null &
	WL_SHA=$!
	PIDS+=("$WL_PY" "$WL_SHA")
}
stop_workload() {
	kill -TERM "$WL_PY" "$WL_SHA" 2>/dev/null || true
	wait "$WL_PY" "$WL_SHA" 2>/dev/null || true
}

# --- measurement helpers -----------------------------------------------------

TICK=$(getconf CLK_TCK)
# cpu_s PID: user+sys seconds (threads that exited included).
cpu_s() { awk -v t="$TICK" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$1/stat"; }
# sched_ns PID: run time of the threads alive now, in ns (schedstat).
sched_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END{printf "%.0f", s}'; } # %d: mawk caps at 2^31
# ctxsw PID: context switches of the threads alive now.
ctxsw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/{s += $2} END{printf "%d", s}'; }
# status_mb PID FIELD: a /proc/PID/status field in MB.
status_mb() { awk -v f="$2:" '$1==f{printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
# time_cpu FILE: user+sys seconds from /usr/bin/time -v.
time_cpu() { awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.2f", u + s}' "$1"; }
time_maxrss() { awk -F': ' '/Maximum resident/{printf "%.1f", $2 / 1024}' "$1"; }
# child_of PID: the single child of PID (the process /usr/bin/time runs).
child_of() {
	local c i
	for i in $(seq 100); do
		c=$(cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{print $1}')
		[[ -n $c ]] && { echo "$c"; return; }
		sleep 0.05
	done
	echo "no child of $1" >&2
	return 1
}
# alive PID LOG: fail with the log's tail when PID has exited.
alive() {
	kill -0 "$1" 2>/dev/null && return
	echo "process $1 exited early; end of $2:" >&2
	tail -20 "$2" >&2
	exit 1
}
json_field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

RESULTS=$WORK/results.tsv
printf 'config\trun\tprocess\tcpu_total_s\tcpu_at_%ss\tcpu_at_%ss\tsteady_ms_per_s\tpeak_rss_mb\tsettled_rss_mb\tsettled_anon_mb\tsettled_file_mb\tsched_ms_per_s\tcs_per_s\n' \
	"$STEADY_FROM" "$DURATION" >"$RESULTS"
TRAFFIC=$WORK/traffic.tsv
printf 'config\trun\tload_before\tload_after\tsink_requests\tsink_samples\tsink_wire_B_per_sample\tsink_proto_B_per_sample\tsocket_samples\tsocket_batches\tbatch_B_per_sample\tsocket_B_per_sample\n' >"$TRAFFIC"

# sleep_until OFFSET: sleep until OFFSET seconds after T0 (the profiler's start).
sleep_until() {
	local left
	left=$(awk -v t0="$T0" -v off="$1" -v now="$EPOCHREALTIME" 'BEGIN{d = t0 + off - now; printf "%.3f", (d > 0 ? d : 0)}')
	sleep "$left"
}

# measure NAME:PID...: samples the processes STEADY_FROM and DURATION seconds
# after T0; fills C10/CEND/HWM/RSS keyed by name.
declare -A C10 CEND HWM RSS ANON FILE S10 SEND X10 XEND
measure() {
	local np name pid
	sleep_until "$STEADY_FROM"
	for np in "$@"; do
		name=${np%%:*} pid=${np#*:}
		C10[$name]=$(cpu_s "$pid") S10[$name]=$(sched_ns "$pid") X10[$name]=$(ctxsw "$pid")
	done
	sleep_until "$DURATION"
	for np in "$@"; do
		name=${np%%:*} pid=${np#*:}
		CEND[$name]=$(cpu_s "$pid") SEND[$name]=$(sched_ns "$pid") XEND[$name]=$(ctxsw "$pid")
		HWM[$name]=$(status_mb "$pid" VmHWM)
		RSS[$name]=$(status_mb "$pid" VmRSS)
		ANON[$name]=$(status_mb "$pid" RssAnon)
		FILE[$name]=$(status_mb "$pid" RssFile)
	done
}

record() { # record CONFIG RUN NAME TIMEFILE
	local steady sched cs d=$((DURATION - STEADY_FROM))
	steady=$(awk -v a="${C10[$3]}" -v b="${CEND[$3]}" -v d=$d 'BEGIN{printf "%.1f", (b - a) * 1000 / d}')
	sched=$(awk -v a="${S10[$3]}" -v b="${SEND[$3]}" -v d=$d 'BEGIN{printf "%.2f", (b - a) / 1e6 / d}')
	cs=$(awk -v a="${X10[$3]}" -v b="${XEND[$3]}" -v d=$d 'BEGIN{printf "%.1f", (b - a) / d}')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(time_cpu "$4")" "${C10[$3]}" "${CEND[$3]}" \
		"$steady" "${HWM[$3]}" "${RSS[$3]}" "${ANON[$3]}" "${FILE[$3]}" "$sched" "$cs" >>"$RESULTS"
}

start_sink() { # start_sink STATSFILE
	"$WORK/bin/otlpsink" -listen "127.0.0.1:$PORT" -stats "$1" >"$1.log" 2>&1 &
	SINK=$!
	PIDS+=("$SINK")
	for _ in $(seq 100); do
		grep -q listening "$1.log" 2>/dev/null && return
		sleep 0.05
	done
	echo "otlpsink did not start: $(cat "$1.log")" >&2
	exit 1
}
stop_sink() {
	kill -INT "$SINK"
	wait "$SINK" || true
}

run_tandem_unconfined() { # run_tandem_unconfined RUN
	CFG=tandem_unconfined CONFINE_ARGS=--confine=false run_tandem "$1"
}

run_tandem() { # run_tandem RUN
	local cfg=${CFG:-tandem}
	local d=$WORK/$cfg-$1 load0 sp ep
	mkdir -p "$d"
	install -d -m 0750 -o "$ENCODER_UID" -g "$ENCODER_GID" "$d/run"
	start_sink "$d/sink.json"
	start_workload
	sleep 2
	load0=$(loadavg)
	T0=$EPOCHREALTIME # the pair's clock starts with the encoder
	/usr/bin/time -v -o "$d/encoder.time" \
		setpriv --reuid="$ENCODER_UID" --regid="$ENCODER_GID" --clear-groups --no-new-privs \
		env ${ENCODER_ENV:-} "$WORK/bin/tandem-encoder" serve --socket "$d/run/tandem.sock" --allowed-uid 0 \
		--remote-store-address "127.0.0.1:$PORT" --remote-store-insecure \
		--profiling-duration "$INTERVAL" "${ENCODER_EXTRA[@]}" ${ENCODER_ARGS:-} ${CONFINE_ARGS:-} >"$d/encoder.log" 2>&1 &
	local et=$!
	PIDS+=("$et")
	ep=$(child_of "$et")
	PROFILERS+=("$ep")
	for _ in $(seq 100); do [[ -S $d/run/tandem.sock ]] && break; sleep 0.05; done
	/usr/bin/time -v -o "$d/sampler.time" \
		"$WORK/bin/tandem-sampler" --socket "$d/run/tandem.sock" --encoder-uid "$ENCODER_UID" \
		--profiling-cpu-sampling-frequency "$HZ" ${SAMPLER_ARGS:-} ${CONFINE_ARGS:-} >"$d/sampler.log" 2>&1 &
	local st=$!
	PIDS+=("$st")
	sp=$(child_of "$st")
	PROFILERS=("$sp" "${PROFILERS[@]}")
	log "$cfg run $1: sampler pid $sp, encoder pid $ep, load $load0"
	sleep 1
	alive "$ep" "$d/encoder.log"
	alive "$sp" "$d/sampler.log"
	measure "sampler:$sp" "encoder:$ep"
	# as make run stops: sampler first (it flushes to the encoder), then the encoder.
	kill -TERM "$sp"
	wait "$st" || true
	kill -TERM "$ep"
	wait "$et" || true
	stop_workload
	stop_sink
	PIDS=() PROFILERS=() # all waited for: never signal a recycled pid
	record "$cfg" "$1" sampler "$d/sampler.time"
	record "$cfg" "$1" encoder "$d/encoder.time"
	traffic "$cfg" "$1" "$load0" "$d/sink.json" "$(final_metric "$d" sampler_batch_samples_total)" \
		"$(final_metric "$d" sampler_batch_batches_total)" "$(final_metric "$d" sampler_batch_bytes_total)" \
		"$(final_metric "$d" ipc_client_sent_bytes_total)"
}

run_upstream() { # run_upstream RUN
	local d=$WORK/upstream-$1 load0 up
	mkdir -p "$d"
	start_sink "$d/sink.json"
	start_workload
	sleep 2
	load0=$(loadavg)
	T0=$EPOCHREALTIME
	/usr/bin/time -v -o "$d/agent.time" \
		"$WORK/bin/ebpf-profiler" -collection-agent "127.0.0.1:$PORT" -disable-tls \
		-samples-per-second "$HZ" -reporter-interval "$INTERVAL" >"$d/agent.log" 2>&1 &
	local at=$!
	PIDS+=("$at")
	up=$(child_of "$at")
	PROFILERS+=("$up")
	log "upstream run $1: agent pid $up, load $load0"
	sleep 1
	alive "$up" "$d/agent.log"
	measure "agent:$up"
	kill -TERM "$up"
	wait "$at" || true
	stop_workload
	stop_sink
	PIDS=() PROFILERS=()
	record upstream "$1" agent "$d/agent.time"
	traffic upstream "$1" "$load0" "$d/sink.json" 0 0 0 0
}

# final_metric DIR NAME: a counter from the sampler's "final metrics" log line.
final_metric() {
	local v
	v=$(grep 'final metrics' "$1/sampler.log" | grep -o "$2=[0-9.e+]*" | tail -1 | cut -d= -f2)
	awk -v v="${v:-0}" 'BEGIN{printf "%d", v}'
}

# traffic CONFIG RUN LOAD0 SINKJSON SAMPLES BATCHES BATCHBYTES SOCKETBYTES
# batch_B_per_sample: batch payloads + one 8-byte frame header per batch;
# socket_B_per_sample: every byte the sampler wrote (hello, executable
# notices, goodbye included).
traffic() {
	local req smp wire proto
	req=$(json_field "$4" requests) smp=$(json_field "$4" samples)
	wire=$(json_field "$4" wire_bytes) proto=$(json_field "$4" proto_bytes)
	awk -v c="$1" -v r="$2" -v l0="$3" -v l1="$(loadavg)" -v req="$req" -v smp="$smp" -v wire="$wire" -v proto="$proto" \
		-v ss="$5" -v nb="$6" -v bb="$7" -v sb="$8" 'BEGIN{
		printf "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c, r, l0, l1, req, smp,
			smp ? sprintf("%.1f", wire / smp) : "-", smp ? sprintf("%.1f", proto / smp) : "-",
			ss ? ss : "-", ss ? nb : "-", ss ? sprintf("%.1f", (bb + 8 * nb) / ss) : "-",
			ss ? sprintf("%.1f", sb / ss) : "-"}' >>"$TRAFFIC"
}

# --- runs --------------------------------------------------------------------

log "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $($GO version | cut -d' ' -f3)"
log "settings: DURATION=${DURATION}s STEADY_FROM=${STEADY_FROM}s RUNS=$RUNS HZ=$HZ INTERVAL=$INTERVAL upstream $UPSTREAM_VERSION sampler+=[${SAMPLER_ARGS:-}] encoder+=[${ENCODER_ENV:-} ${ENCODER_ARGS:-}] ${ENCODER_EXTRA[*]}"
for run in $(seq "$RUNS"); do
	for cfg in $CONFIGS; do
		"run_$cfg" "$run"
		sleep 3 # let the kernel release the previous profiler's maps
	done
done

echo
echo "# per process (CPU in seconds; steady in ms of CPU per second; RSS in MB)"
column -t -s $'\t' "$RESULTS"
echo
echo "# per configuration: pair totals (sampler + encoder) against the single upstream process"
awk -F'\t' 'NR>1{k=$1"\t"$2; if(!(k in seen)){seen[k]=1; order[++n]=k}
	tot[k]+=$4; s10[k]+=$5; se[k]+=$6; st[k]+=$7; hwm[k]+=$8; rss[k]+=$9; anon[k]+=$10; file[k]+=$11; sch[k]+=$12; cs[k]+=$13}
	END{print "config\trun\tcpu_total_s\tsteady_ms_per_s\tsum_peak_rss_mb\tsum_settled_rss_mb\tsum_anon_mb\tsum_file_mb\tsched_ms_per_s\tcs_per_s";
	for(i=1;i<=n;i++){k=order[i]; printf "%s\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\n", k, tot[k], st[k], hwm[k], rss[k], anon[k], file[k], sch[k], cs[k]}}' "$RESULTS" |
	column -t -s $'\t'
echo
echo "# traffic (sink: what reached the OTLP receiver; socket: sampler -> encoder, frame headers and executable notices included)"
column -t -s $'\t' "$TRAFFIC"
