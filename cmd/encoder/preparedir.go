package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/logging"
)

// prepareDirConfig is what prepare-dir does to its directory.
type prepareDirConfig struct {
	Dir      string
	UID, GID int
	Mode     fs.FileMode
}

func newPrepareDirCommand(opts *logOptions) *cobra.Command {
	cfg := prepareDirConfig{UID: 65532, GID: 65532, Mode: 0o750}
	var mode string
	cmd := &cobra.Command{
		Use:   "prepare-dir DIR [--uid N --gid N --mode 0750]",
		Short: "give an existing directory to the encoder's uid (a pod's init step; needs CAP_CHOWN and CAP_FOWNER)",
		Long: `prepare-dir changes the owner and mode of one existing directory, itself and
nothing in it, so that the encoder running as --uid can write its pprof files
there. The Helm chart runs it as an init container before the encoder: the
kubelet creates a hostPath directory owned by root, mode 0755, and the
encoder (uid 65532, no capability) could not write to it. It needs root's
CAP_CHOWN and CAP_FOWNER and nothing else (the image has no shell for
chown). DIR must exist and not be a symbolic link.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.Usage(fmt.Errorf("prepare-dir takes one directory: %s", cmd.UseLine()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Dir = args[0]
			m, err := strconv.ParseUint(mode, 8, 32)
			if err != nil || m&^0o777 != 0 {
				return cli.Usage(fmt.Errorf("--mode=%q: want octal permission bits such as 0750", mode))
			}
			cfg.Mode = fs.FileMode(m)
			if cfg.UID < 0 || cfg.GID < 0 {
				return cli.Usage(fmt.Errorf("--uid=%d --gid=%d: want ids of 0 or more", cfg.UID, cfg.GID))
			}
			logger, err := logging.New(os.Stderr, opts.level, opts.format)
			if err != nil {
				return cli.Usage(err)
			}
			if err := prepareDir(cfg); err != nil {
				return err
			}
			logger.Info("prepared directory", "dir", cfg.Dir, "uid", cfg.UID, "gid", cfg.GID, "mode", fmt.Sprintf("%#o", cfg.Mode))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.UID, "uid", cfg.UID, "owner to give the directory: the encoder's uid (the chart's encoder.uid)")
	f.IntVar(&cfg.GID, "gid", cfg.GID, "group to give the directory: the encoder's gid")
	f.StringVar(&mode, "mode", "0750", "mode to give the directory, octal: the encoder writes, its group and root read")
	return cmd
}

// prepareDir gives cfg.Dir to cfg.UID:cfg.GID with cfg.Mode. The directory
// is opened once, without following a symbolic link and without needing
// permission on it (O_PATH: on a restart it already belongs to the
// encoder, mode 0750, and root without CAP_DAC_OVERRIDE could not open it
// to read); its owner and mode are then changed through that descriptor,
// so that nothing swapped in under the path is touched.
func prepareDir(cfg prepareDirConfig) error {
	fd, err := unix.Open(cfg.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return fmt.Errorf("prepare %s: it does not exist: create it first (the chart's hostPath volume is DirectoryOrCreate)", cfg.Dir)
		case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			return fmt.Errorf("prepare %s: not a directory (a symbolic link is not followed): name the directory itself", cfg.Dir)
		}
		return fmt.Errorf("prepare %s: open: %w", cfg.Dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchownat(fd, "", cfg.UID, cfg.GID, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("prepare %s: give it to %d:%d: %w (run as root with CAP_CHOWN, as the chart's init container does)", cfg.Dir, cfg.UID, cfg.GID, err)
	}
	// fchmod does not take an O_PATH descriptor; its /proc link names the
	// same directory.
	if err := os.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), cfg.Mode); err != nil {
		return fmt.Errorf("prepare %s: mode %#o: %w (run as root with CAP_FOWNER, as the chart's init container does)", cfg.Dir, cfg.Mode, err)
	}
	return nil
}
