#!/usr/bin/env bash
# Runs Tandem on this machine: tandem-sampler as root, tandem-encoder as an
# unprivileged user (uid/gid 65534 by default), connected by a Unix socket.
# Profiles land in ./profiles as gzipped pprof files; set
# TANDEM_REMOTE_STORE_ADDRESS to also export OTLP to a receiver (and
# TANDEM_DEBUGINFO_ADDRESS to upload symbols to a Parca server).
# Ctrl-C stops both cleanly (sampler first, so it can flush to the encoder).
set -euo pipefail
cd "$(dirname "$0")/../.."

ENCODER_UID=${TANDEM_ENCODER_UID:-65534}
ENCODER_GID=${TANDEM_ENCODER_GID:-65534}
RUN_DIR=${TANDEM_RUN_DIR:-/run/tandem-local}
OUT_DIR=${TANDEM_OUTPUT_DIR:-$PWD/profiles}
DURATION=${TANDEM_PROFILING_DURATION:-10s}
SOCKET=$RUN_DIR/tandem.sock

if [[ $(id -u) -ne 0 ]]; then
	echo "make run needs root: the sampler loads eBPF programs (try: sudo make run)" >&2
	exit 1
fi

install -d -m 0750 -o "$ENCODER_UID" -g "$ENCODER_GID" "$RUN_DIR"
install -d -m 0755 -o "$ENCODER_UID" -g "$ENCODER_GID" "$OUT_DIR"

# /metrics, /healthz and /readyz on loopback (the encoder's default address).
HTTP_ADDRESS=${TANDEM_HTTP_ADDRESS:-127.0.0.1:7071}
encoder_args=(serve --socket "$SOCKET" --allowed-uid 0 --output-dir "$OUT_DIR" --profiling-duration "$DURATION" --http-address "$HTTP_ADDRESS")
if [[ -n ${TANDEM_REMOTE_STORE_ADDRESS:-} ]]; then
	encoder_args+=(--remote-store-address "$TANDEM_REMOTE_STORE_ADDRESS")
	[[ -n ${TANDEM_REMOTE_STORE_INSECURE:-} ]] && encoder_args+=(--remote-store-insecure)
fi
# Symbols go to a Parca server named by TANDEM_DEBUGINFO_ADDRESS; an OTLP
# receiver takes none, so without it upload is off.
if [[ -n ${TANDEM_DEBUGINFO_ADDRESS:-} ]]; then
	encoder_args+=(--debuginfo-address "$TANDEM_DEBUGINFO_ADDRESS")
elif [[ -n ${TANDEM_REMOTE_STORE_ADDRESS:-} ]]; then
	encoder_args+=(--debuginfo-upload-disable)
fi

# Each child runs in its own session so that Ctrl-C (SIGINT to the
# terminal's process group) reaches only this script, which then stops them
# in order.
setsid setpriv --reuid="$ENCODER_UID" --regid="$ENCODER_GID" --clear-groups --no-new-privs \
	./bin/tandem-encoder "${encoder_args[@]}" &
encoder_pid=$!
setsid ./bin/tandem-sampler --socket "$SOCKET" --encoder-uid "$ENCODER_UID" &
sampler_pid=$!
trap 'kill -KILL "$sampler_pid" "$encoder_pid" 2>/dev/null || true' EXIT

stop() {
	trap - INT TERM EXIT
	echo
	echo "stopping: sampler first (it flushes to the encoder), then the encoder"
	kill -TERM "$sampler_pid" 2>/dev/null || true
	wait "$sampler_pid" 2>/dev/null || true
	kill -TERM "$encoder_pid" 2>/dev/null || true
	wait "$encoder_pid" 2>/dev/null || true
	echo "profiles are in $OUT_DIR; open one with:"
	echo "  go tool pprof -http=127.0.0.1:8080 \$(ls -t $OUT_DIR/*.pb.gz | head -1)"
	exit 0
}
trap stop INT TERM

echo "tandem running: sampler pid $sampler_pid (root), encoder pid $encoder_pid (uid $ENCODER_UID)"
echo "profiles every $DURATION in $OUT_DIR (gzipped pprof); Ctrl-C to stop"
echo "encoder metrics and health: http://$HTTP_ADDRESS/metrics, /healthz, /readyz"
wait -n "$sampler_pid" "$encoder_pid" || true
echo "one of the processes exited; stopping the other" >&2
stop
