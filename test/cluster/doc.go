// Package cluster brings a real single-node Kubernetes cluster up on this
// machine and takes it down again, for the cluster test (TestCluster) and
// make cluster-up: etcd, kube-apiserver (audit log, Pod Security admission,
// Node and RBAC authorization), kube-controller-manager, kube-scheduler,
// containerd with runc, a kubelet, kube-proxy (nftables) for the
// `kubernetes` Service, and CNI's bridge plugin on a bridge of its own.
// The Kubernetes binaries come from tools/kubernetes' cache (make tools).
//
// Everything the cluster writes is under Config.Dir. containerd, the
// kubelet and kube-proxy run in a mount namespace of their own in which
// the sysctl files they would write (vm.overcommit_memory, kernel.panic,
// net.ipv4.ip_forward, ...) are covered by files of the cluster's, so the
// host's values never change, and whose mounts (volumes, container root
// filesystems, network namespace files) disappear with the namespace.
// Every address is on loopback or on the cluster's bridge.
//
// Up runs one phase at a time, each with a hard limit, and fails naming
// the phase, the limit and the end of the component's log. Down stops
// every process, removes every pod sandbox through CRI, the bridge, the
// cgroups and nftables tables the cluster made, and then compares the
// host with what Up recorded before it started: any process, mount,
// network namespace, link, nftables or iptables rule, cgroup or sysctl
// that differs is an error. Up records its state in Dir, so Down also
// works from another process (make cluster-down).
//
// A Cluster is not safe for concurrent Up and Down; its accessors are.
package cluster
