#!/bin/busybox sh
# The initramfs's /init: file systems (the root, the initramfs itself, is
# writable already: /tmp and /run are not mounted over, since the test's
# workload lives under its host path, a temporary directory), loopback, the modules listed in
# /tandem/modules (in load order), then the agent, which powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /tmp /run
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug
mount -t securityfs securityfs /sys/kernel/security
ip link set lo up
for m in $(cat /tandem/modules); do
	insmod "/lib/modules/$(uname -r)/$m" || echo "TANDEM-VM {\"name\":\"failed\",\"detail\":\"insmod $m failed\"}"
done
# The results disk appears once virtio_blk has probed it.
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
exec /tandem/agent
