// Command podyaml prints the Helm chart's pod as the Pod podman plays
// (podtest.PodYAML says what differs from the DaemonSet's template), for
// trying the pod on one machine: README, "Try the pod on one machine".
package main
