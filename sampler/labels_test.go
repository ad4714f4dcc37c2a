package sampler

import "testing"

func TestParseCgroup(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const id2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	tests := []struct {
		name    string
		content string
		want    cgroupLabels
	}{
		{"empty", "", cgroupLabels{}},
		{"root v2", "0::/\n", cgroupLabels{}},
		{"systemd service v2", "0::/system.slice/foo.service\n", cgroupLabels{SystemdUnit: "foo.service"}},
		{"user service", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/bar.service\n",
			cgroupLabels{SystemdUnit: "bar.service"}},
		{"user manager itself", "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n",
			cgroupLabels{SystemdUnit: "user@1000.service"}},
		{"session scope has no service", "0::/user.slice/user-0.slice/session-3.scope\n", cgroupLabels{}},
		{"escaped unit name kept verbatim", `0::/system.slice/systemd-fsck@dev-disk-by\x2duuid-1.service` + "\n",
			cgroupLabels{SystemdUnit: `systemd-fsck@dev-disk-by\x2duuid-1.service`}},
		{"docker cgroupfs v1", "12:memory:/docker/" + id + "\n11:cpu:/docker/" + id + "\n",
			cgroupLabels{ContainerID: id}},
		{"docker systemd v2", "0::/system.slice/docker-" + id + ".scope\n", cgroupLabels{ContainerID: id}},
		{"containerd kubernetes systemd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope\n",
			cgroupLabels{ContainerID: id}},
		{"cri-o", "0::/kubepods.slice/kubepods-pod1.slice/crio-" + id + ".scope\n", cgroupLabels{ContainerID: id}},
		{"cri-o conmon is not the container", "0::/kubepods.slice/kubepods-pod1.slice/crio-conmon-" + id + ".scope\n", cgroupLabels{}},
		{"kubernetes cgroupfs", "0::/kubepods/burstable/pod0f1e2d3c-aaaa-bbbb-cccc-000000000000/" + id + "\n",
			cgroupLabels{ContainerID: id}},
		{"podman", "0::/machine.slice/libpod-" + id + ".scope/container\n", cgroupLabels{ContainerID: id}},
		{"nested: innermost wins", "0::/docker/" + id + "/docker/" + id2 + "\n", cgroupLabels{ContainerID: id2}},
		{"not hex", "0::/docker/" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg" + "\n", cgroupLabels{}},
		{"short id", "0::/docker/0123456789ab\n", cgroupLabels{}},
		{"hybrid: name=systemd wins for the unit", "9:name=systemd:/system.slice/sshd.service\n4:memory:/process_api/01e6\n0::/\n",
			cgroupLabels{SystemdUnit: "sshd.service"}},
		{"hybrid: container and unit", "9:name=systemd:/system.slice/docker-" + id + ".scope\n0::/system.slice/containerd.service\n",
			cgroupLabels{ContainerID: id}},
		{"garbage lines", "nonsense\n::\n0:\n", cgroupLabels{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseCgroup(tt.content); got != tt.want {
				t.Errorf("parseCgroup(%q) = %+v, want %+v", tt.content, got, tt.want)
			}
		})
	}
}
