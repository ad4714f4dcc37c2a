#!/bin/sh
# Boots a real systemd for TestSystemdUnits. Run as the first process of a
# new PID and mount namespace (unshare --pid --fork --mount), it installs
# the shipped units the way an administrator would and execs systemd as
# PID 1 of that namespace.
#
# Nothing here may touch the host: /run is a fresh tmpfs, and /etc,
# /usr/local/bin and /var/lib are overlays whose writes land in that tmpfs.
# SYSTEMD_UNIT_PATH holds only the Tandem units and empty stand-ins for the
# targets they order against, so no part of a normal boot (tmpfiles,
# sysctl, udev, ...) starts.
#
# Input (environment): TANDEM_BIN (directory with tandem-sampler and
# tandem-encoder), TANDEM_UNITS (deploy/systemd), ENCODER_ARGS and
# SAMPLER_ARGS (written to /etc/default/tandem-*), WATCHDOG_SEC.
set -eu
mount -t tmpfs -o mode=0755 tandem-test-run /run
T=/run/tandem-test
mkdir -p "$T/hostproc" "$T/logs" "$T/units"
# The sampler must see the host's processes, as it does in production;
# this systemd's own /proc shows only its namespace.
mount --rbind /proc "$T/hostproc"
mount -t proc proc /proc
for d in /etc /usr/local/bin /var/lib; do
	n=$(echo "$d" | tr / _)
	mkdir -p "$T/overlay/$n/upper" "$T/overlay/$n/work"
	mount -t overlay "tandem$n" -o "lowerdir=$d,upperdir=$T/overlay/$n/upper,workdir=$T/overlay/$n/work" "$d"
done

# What docs/systemd.md tells an administrator to do.
install -m 0755 "$TANDEM_BIN/tandem-sampler" "$TANDEM_BIN/tandem-encoder" /usr/local/bin/
install -m 0644 "$TANDEM_UNITS/tandem-encoder.socket" "$TANDEM_UNITS/tandem-encoder.service" \
	"$TANDEM_UNITS/tandem-sampler.service" "$T/units/"
mkdir -p /etc/sysusers.d /etc/default
install -m 0644 "$TANDEM_UNITS/tandem.sysusers" /etc/sysusers.d/tandem.conf
systemd-sysusers /etc/sysusers.d/tandem.conf
printf 'TANDEM_ENCODER_ARGS="%s"\n' "$ENCODER_ARGS" >/etc/default/tandem-encoder
printf 'TANDEM_SAMPLER_ARGS="%s"\n' "$SAMPLER_ARGS" >/etc/default/tandem-sampler

# Test-only drop-ins: logs to files (there is no journal here), a short
# watchdog so that pings are seen within the test, and the host's /proc
# for the sampler.
for u in tandem-encoder tandem-sampler; do
	mkdir -p "$T/units/$u.service.d"
	printf '[Service]\nStandardOutput=append:%s/logs/%s.log\nStandardError=inherit\n' "$T" "$u" \
		>"$T/units/$u.service.d/50-test-log.conf"
done
printf '[Service]\nWatchdogSec=%s\n' "$WATCHDOG_SEC" >"$T/units/tandem-encoder.service.d/60-test-watchdog.conf"
printf '[Service]\nBindReadOnlyPaths=%s/hostproc:/proc\n' "$T" >"$T/units/tandem-sampler.service.d/60-test-host-proc.conf"
for target in tandem-test sysinit basic sockets network-online multi-user shutdown; do
	printf '[Unit]\nDescription=%s (empty: this system runs only Tandem)\n' "$target" >"$T/units/$target.target"
done
exec env container=tandem-test SYSTEMD_UNIT_PATH="$T/units" /lib/systemd/systemd --system --unit=tandem-test.target
