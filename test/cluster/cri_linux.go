package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRI connects to containerd's CRI service, as the kubelet does.
func (c *Cluster) CRI() (runtimeapi.RuntimeServiceClient, func() error, error) {
	conn, err := grpc.NewClient("unix://"+c.ContainerdAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to containerd's CRI: %w", err)
	}
	return runtimeapi.NewRuntimeServiceClient(conn), conn.Close, nil
}

// ContainerPID returns the host pid of a container's first process.
func (c *Cluster) ContainerPID(ctx context.Context, containerID string) (int, error) {
	rt, closeFn, err := c.CRI()
	if err != nil {
		return 0, err
	}
	defer closeFn()
	st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: true})
	if err != nil {
		return 0, fmt.Errorf("container status %s: %w", containerID, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		return 0, fmt.Errorf("container %s: no pid in its CRI status (%v)", containerID, err)
	}
	return info.Pid, nil
}

// removeSandboxes stops and removes every pod sandbox (its containers,
// its network and network namespace) and every container left.
func (c *Cluster) removeSandboxes(ctx context.Context) error {
	rt, closeFn, err := c.CRI()
	if err != nil {
		return err
	}
	defer closeFn()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range sbs.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox of %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox of %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
		}
	}
	cs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list containers: %w", err))...)
	}
	for _, ct := range cs.Containers {
		if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ct.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", ct.Metadata.Name, err))
		}
	}
	return errors.Join(errs...)
}
