// Command podyaml prints the Helm chart's pod as the Pod podman plays
// (test/pod.PodYAML says what differs from the DaemonSet's template), for
// trying the pod on one machine: docs/kubernetes.md, "Try the pod on one machine".
package main
