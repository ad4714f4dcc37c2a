//go:build !noview

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/logging"
)

// defaultViewAddress is where `view` serves unless told otherwise.
const defaultViewAddress = "127.0.0.1:8080"

func newViewCommand(opts *logOptions) *cobra.Command {
	var cfg viewConfig
	cmd := &cobra.Command{
		Use:   "view [--http-address 127.0.0.1:PORT] PATH...",
		Short: "serve pprof's web UI (flame graph, top, graph, source) for pprof files, directories of them, or dumps",
		Long: `view serves pprof's web UI on a loopback address for the given pprof files
(such as those serve and replay write to --output-dir), directories of them
(every file in a directory, merged into one profile) and dumps (--record; each
aggregated as the pprof output would, into one profile). Several paths are
merged. No Go toolchain is needed: open the printed address in a browser
(on another machine, through 'ssh -L PORT:127.0.0.1:PORT').`,
		Args: needArgs("PATH (a pprof file, a directory of them, or a dump)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLoopback(cfg.address); err != nil {
				return cli.Usage(err)
			}
			switch cfg.symbolize {
			case "none", "local":
			default:
				return cli.Usage(fmt.Errorf("--symbolize %q: want none or local", cfg.symbolize))
			}
			logger, err := logging.New(os.Stderr, opts.level, opts.format)
			if err != nil {
				return cli.Usage(err)
			}
			cfg.paths, cfg.logger, cfg.out = args, logger, cmd.ErrOrStderr()
			return view(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.address, "http-address", defaultViewAddress, "loopback host:port to serve the web UI on (port 0: any free port)")
	cmd.Flags().StringVar(&cfg.symbolize, "symbolize", "none", "none: show the names the profiles hold (mangled C++ and Rust names demangled); local: let pprof also name unnamed native frames from the executables at their mapping paths on this machine (needs binutils)")
	return cmd
}

// viewConfig is what view needs.
type viewConfig struct {
	address   string
	symbolize string
	paths     []string
	logger    *slog.Logger
	out       io.Writer // where the address to open is printed
	// ready, when set, is called with the UI's base URL once it serves.
	ready func(url string)
}

// checkLoopback accepts host:port whose host is a loopback address or
// "localhost": the UI has no authentication.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http-address %q: %w (want 127.0.0.1:PORT)", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--http-address %q: the web UI has no authentication, so it serves on loopback only (127.0.0.1, ::1 or localhost); reach it from elsewhere through an SSH tunnel", addr)
}

// view loads the profiles and serves pprof's web UI until ctx ends.
func view(ctx context.Context, cfg viewConfig) error {
	if ctx == nil {
		ctx = context.Background()
	}
	p, err := loadProfiles(ctx, cfg.paths, cfg.logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.address)
	if err != nil {
		return fmt.Errorf("view: listen on --http-address %s: %w", cfg.address, err)
	}
	defer ln.Close()
	hostport := ln.Addr().String()
	url := "http://" + hostport + "/ui/"
	served := make(chan error, 1)
	// pprof demangles only inside its symbolization step; "remote" with
	// no remote source (fetchOnce names none) is that step with nothing to
	// fetch, so mangled names are demangled and nothing else changes.
	mode := "remote"
	if cfg.symbolize == "local" {
		mode = "local"
	}
	args := []string{"-http=" + hostport, "-no_browser", "-symbolize=" + mode, "tandem"}
	err = driver.PProf(&driver.Options{
		Flagset: newViewFlags(args),
		Fetch:   fetchOnce{p},
		UI:      viewUI{cfg.logger},
		HTTPServer: func(a *driver.HTTPServerArgs) error {
			srv := &http.Server{Handler: loopbackOnly(uiMux(a.Handlers)), ReadHeaderTimeout: 10 * time.Second}
			go func() { served <- srv.Serve(ln) }()
			fmt.Fprintf(cfg.out, "pprof web UI on %s (flame graph: %sflamegraph); Ctrl-C to stop\n", url, url)
			if cfg.ready != nil {
				cfg.ready(url)
			}
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
				return nil
			case err := <-served:
				return err
			}
		},
	})
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("view: %w", err)
	}
	return nil
}

// uiMux serves pprof's handlers under /ui/ (as pprof's own server does,
// so its relative links work) and redirects / there.
func uiMux(handlers map[string]http.Handler) http.Handler {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := handlers[r.URL.Path]
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	return mux
}

// loopbackOnly refuses clients that are not on this machine.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "permission denied: loopback clients only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fetchOnce hands pprof the profile view loaded (its one source). It
// names no source URL: pprof would take the profile for a remote one and
// save a copy under $HOME/pprof.
type fetchOnce struct{ p *profile.Profile }

func (f fetchOnce) Fetch(string, time.Duration, time.Duration) (*profile.Profile, string, error) {
	return f.p.Copy(), "", nil
}

// viewUI sends pprof's messages to the log.
type viewUI struct{ logger *slog.Logger }

func (u viewUI) ReadLine(string) (string, error) { return "", io.EOF }
func (u viewUI) Print(args ...any)               { u.logger.Debug(strings.TrimSpace(fmt.Sprint(args...))) }
func (u viewUI) PrintErr(args ...any) {
	u.logger.Info("pprof: " + strings.TrimSpace(fmt.Sprint(args...)))
}
func (u viewUI) IsTerminal() bool                    { return false }
func (u viewUI) WantBrowser() bool                   { return false }
func (u viewUI) SetAutoComplete(func(string) string) {}

// viewFlags is pprof's flag set, parsing the arguments view chose.
type viewFlags struct {
	fs    *flag.FlagSet
	args  []string
	extra []string
}

func newViewFlags(args []string) *viewFlags {
	fs := flag.NewFlagSet("pprof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &viewFlags{fs: fs, args: args}
}

func (f *viewFlags) Bool(n string, d bool, u string) *bool          { return f.fs.Bool(n, d, u) }
func (f *viewFlags) Int(n string, d int, u string) *int             { return f.fs.Int(n, d, u) }
func (f *viewFlags) Float64(n string, d float64, u string) *float64 { return f.fs.Float64(n, d, u) }
func (f *viewFlags) String(n, d, u string) *string                  { return f.fs.String(n, d, u) }
func (f *viewFlags) StringList(n, d, u string) *[]*string {
	l := &stringList{}
	if d != "" {
		l.v = []*string{&d}
	}
	f.fs.Var(l, n, u)
	return &l.v
}
func (f *viewFlags) ExtraUsage() string      { return strings.Join(f.extra, "\n") }
func (f *viewFlags) AddExtraUsage(eu string) { f.extra = append(f.extra, eu) }
func (f *viewFlags) Parse(usage func()) []string {
	if err := f.fs.Parse(f.args); err != nil {
		usage()
		return nil
	}
	return f.fs.Args()
}

type stringList struct{ v []*string }

func (l *stringList) String() string { return fmt.Sprint(len(l.v)) }
func (l *stringList) Set(s string) error {
	l.v = append(l.v, &s)
	return nil
}
