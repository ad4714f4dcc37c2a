// Package podtest runs Tandem's DaemonSet pod for real, with podman and
// runc, as make test does as root: the image make image builds is loaded
// into a podman store private to the test, the Helm chart is rendered and
// its pod template played as a Pod (podman has no DaemonSet), and the test
// checks what the pod does and what the kernel says about its containers.
// Its one piece of code, PodYAML, turns the chart's DaemonSet into the Pod
// podman plays (the podyaml command prints it, for trying the pod by hand).
package pod
