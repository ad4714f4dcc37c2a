// Package vmtest runs Tandem on another kernel than the host's: it boots
// a distribution kernel (Debian 12's, installed from apt) in qemu with an
// initramfs it builds (the static tandem-sampler and tandem-encoder, a
// static busybox, the test's workloads, the kernel modules the guest
// needs, and the guest agent of ./agent), and gets the run's results back.
//
// The guest reports progress as framed lines on the serial console (see
// Event) and writes its results as a tar archive onto a raw virtio disk,
// which the host reads after the VM powered off. Every phase has a hard
// limit, and the VM is killed when the test ends, however it ends.
//
// KVM is used when /dev/kvm works and the CPU has hardware virtualization;
// otherwise qemu emulates the CPU (TCG), which is slow but runs anywhere.
package vm
