#!/usr/bin/env bash
# Runs Tandem on this machine: tandem-sampler as root, tandem-encoder as the
# dedicated system user "tandem" (created here if missing, as
# deploy/systemd/tandem.sysusers does; TANDEM_ENCODER_USER names another),
# connected by a Unix socket in a directory only root and that user can
# write. Not uid 65534 ("nobody"): it is shared by NFS squashing and many
# daemons, any of which could then take the socket.
# Profiles land in ./profiles as gzipped pprof files, readable and
# deletable by the user who ran sudo (the directory's group is theirs); set
# TANDEM_REMOTE_STORE_ADDRESS to also export OTLP to a receiver (and
# TANDEM_DEBUGINFO_ADDRESS to upload symbols to a Parca server).
# More flags go in TANDEM_SAMPLER_ARGS and TANDEM_ENCODER_ARGS, split on
# whitespace as the systemd units' variables are (e.g.
# TANDEM_SAMPLER_ARGS="--off-cpu-threshold=0.01 --tracers=python").
# An encoder that exits is restarted, as systemd and the pod do (the
# sampler keeps what it has not delivered and reconnects); a sixth exit
# within a minute stops the pair.
# Ctrl-C stops both cleanly (sampler first, so it can flush to the encoder)
# and removes the socket.
set -euo pipefail
cd "$(dirname "$0")/../.."

ENCODER_USER=${TANDEM_ENCODER_USER:-tandem}
RUN_DIR=${TANDEM_RUN_DIR:-/run/tandem-local}
OUT_DIR=${TANDEM_OUTPUT_DIR:-$PWD/profiles}
DURATION=${TANDEM_PROFILING_DURATION:-10s}
SOCKET=$RUN_DIR/tandem.sock
BIN_DIR=${TANDEM_BIN_DIR:-./bin}
read -r -a sampler_extra <<<"${TANDEM_SAMPLER_ARGS:-}"
read -r -a encoder_extra <<<"${TANDEM_ENCODER_ARGS:-}"

if [[ $(id -u) -ne 0 ]]; then
	echo "make run needs root: the sampler loads eBPF programs (try: sudo make run)" >&2
	exit 1
fi

# Create (or reuse) the encoder's system user, the way the systemd
# sysusers file does: no login shell, no home directory created.
if ! getent passwd "$ENCODER_USER" >/dev/null; then
	if [[ $ENCODER_USER != tandem ]]; then
		echo "TANDEM_ENCODER_USER=$ENCODER_USER: no such user; create it or leave TANDEM_ENCODER_USER unset for the system user tandem" >&2
		exit 1
	fi
	if command -v systemd-sysusers >/dev/null; then
		systemd-sysusers "$PWD/deploy/systemd/tandem.sysusers"
	else
		useradd --system --user-group --no-create-home --home-dir /var/lib/tandem \
			--shell /usr/sbin/nologin --comment "Tandem profiling encoder" tandem
	fi
	echo "created system user $ENCODER_USER for the encoder"
fi
ENCODER_UID=$(id -u "$ENCODER_USER")
ENCODER_GID=$(id -g "$ENCODER_USER")

# The socket's directory: owned by the encoder, writable by nobody else
# (the sampler refuses one that others could write: --socket-dir-check).
# An older make run left it to uid 65534: take it back.
install -d -m 0750 -o "$ENCODER_UID" -g "$ENCODER_GID" "$RUN_DIR"
chown "$ENCODER_UID:$ENCODER_GID" "$RUN_DIR"
chmod 0750 "$RUN_DIR"
# The profiles: written by the encoder, viewed and deleted by whoever ran
# sudo make run. The directory is the encoder's, its group that user's
# (setgid, so every file gets it), group-writable; the encoder writes its
# files group-readable. Run as root without sudo, the group is the
# encoder's. Files of an older make run (owner-only) are opened up too.
VIEWER_GID=${SUDO_GID:-$ENCODER_GID}
install -d -m 2770 -o "$ENCODER_UID" -g "$VIEWER_GID" "$OUT_DIR"
chown "$ENCODER_UID:$VIEWER_GID" "$OUT_DIR"
chmod 2770 "$OUT_DIR"
find "$OUT_DIR" -mindepth 1 -maxdepth 1 -type f -exec chgrp "$VIEWER_GID" {} + -exec chmod g+r {} +

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
# The encoder creates its files group-readable (0640) less the umask: keep
# the group's read, whatever umask sudo passed on.
umask 027
start_encoder() {
	setsid setpriv --reuid="$ENCODER_UID" --regid="$ENCODER_GID" --clear-groups --no-new-privs \
		"$BIN_DIR/tandem-encoder" "${encoder_args[@]}" ${encoder_extra[@]+"${encoder_extra[@]}"} &
	encoder_pid=$!
}
start_encoder
setsid "$BIN_DIR/tandem-sampler" --socket "$SOCKET" --encoder-uid "$ENCODER_UID" ${sampler_extra[@]+"${sampler_extra[@]}"} &
sampler_pid=$!
trap 'kill -KILL "$sampler_pid" "$encoder_pid" 2>/dev/null || true; rm -f "$SOCKET"' EXIT

stop() {
	trap - INT TERM EXIT
	echo
	echo "stopping: sampler first (it flushes to the encoder), then the encoder"
	kill -TERM "$sampler_pid" 2>/dev/null || true
	wait "$sampler_pid" 2>/dev/null || true
	kill -TERM "$encoder_pid" 2>/dev/null || true
	wait "$encoder_pid" 2>/dev/null || true
	rm -f "$SOCKET"
	echo "profiles are in $OUT_DIR; look at them all (merged) in a browser with:"
	echo "  ./bin/tandem-encoder view --http-address 127.0.0.1:8080 $OUT_DIR"
	exit 0
}
trap stop INT TERM

echo "tandem running: sampler pid $sampler_pid (root), encoder pid $encoder_pid (user $ENCODER_USER, uid $ENCODER_UID)"
echo "profiles every $DURATION in $OUT_DIR (gzipped pprof); Ctrl-C to stop"
echo "look at them (from another shell, any time): ./bin/tandem-encoder view --http-address 127.0.0.1:8080 $OUT_DIR"
echo "encoder metrics and health: http://$HTTP_ADDRESS/metrics, /healthz, /readyz"
# Supervise: the sampler exiting ends the pair; the encoder exiting is
# restarted (it replaces the stale socket itself), unless it keeps exiting.
restarts=()
while :; do
	status=0
	wait -n "$sampler_pid" "$encoder_pid" || status=$?
	if ! kill -0 "$sampler_pid" 2>/dev/null; then
		echo "the sampler exited (status $status); stopping the encoder" >&2
		stop
	fi
	if kill -0 "$encoder_pid" 2>/dev/null; then
		continue
	fi
	now=$SECONDS
	recent=()
	for t in "${restarts[@]}"; do
		if ((now - t < 60)); then recent+=("$t"); fi
	done
	restarts=("${recent[@]}" "$now")
	if ((${#restarts[@]} > 5)); then
		echo "the encoder exited (status $status) for the 6th time within a minute; stopping the sampler" >&2
		stop
	fi
	echo "the encoder exited (status $status); restarting it in 1 s (the sampler keeps what it has not delivered)" >&2
	sleep 1
	start_encoder
	echo "encoder restarted: pid $encoder_pid" >&2
done
