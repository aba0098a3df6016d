// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/gctarget"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/version"
)

// EnvPrefix starts the environment variable of every server flag:
// NODEPULSE_ETCD_ENDPOINTS sets --etcd.endpoints (flagenv).
const EnvPrefix = "NODEPULSE"

// Service is one server process from its arguments to its exit.
type Service struct {
	// Name names the flag set and the logger ("collector").
	Name string
	// Flags is where the app registers its flags before Run.
	Flags *flag.FlagSet
	// GCPercent, when the app points it at its --runtime.gc-percent before
	// Run, is the GC target Run applies (gctarget.Apply); nil leaves Go's
	// own.
	GCPercent *int
	// Out is where --version prints (os.Stdout).
	Out io.Writer

	// Set by Run before it builds the app.
	Logger   *zap.Logger
	Registry *prometheus.Registry
	// GCTarget is the GC target Run set, 0 when it set none (GOGC set, or
	// Go's default kept).
	GCTarget int

	synopsis    string
	log         *logging.Config
	showVersion *bool
}

// New returns the Service of the program name, whose --help starts with
// synopsis and whose logger Run builds from *log once the flags (which the
// app registers on Flags) are parsed.
func New(name, synopsis string, log *logging.Config) *Service {
	s := &Service{Name: name, Flags: flag.NewFlagSet(name, flag.ContinueOnError), Out: os.Stdout, synopsis: synopsis, log: log}
	s.Flags.SetOutput(os.Stderr)
	s.showVersion = s.Flags.Bool("version", false, "print the version and exit")
	// Set here as well as by flagenv.Parse, so usage can be printed
	// before parsing (tests, and a caller's own --help).
	s.Flags.Usage = func() { flagenv.PrintUsage(s.Flags.Output(), s.Flags, EnvPrefix, synopsis) }
	return s
}

// Parse reads the environment, then args. It reports false when the
// process has nothing more to do: --help printed the usage, or --version or
// the version subcommand printed the version (with a nil error), or the
// arguments are wrong (with the error). Nothing is started before it
// returns true.
func (s *Service) Parse(args []string) (bool, error) {
	// Before the environment is read, so a bad NODEPULSE_* variable does
	// not keep "version" from answering.
	if len(args) > 0 && args[0] == "version" {
		return false, s.printVersion(args[1:])
	}
	if err := flagenv.Parse(s.Flags, EnvPrefix, s.synopsis, args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	if *s.showVersion {
		return false, s.printVersion(s.Flags.Args())
	}
	if s.Flags.NArg() > 0 {
		if s.Flags.Arg(0) == "version" {
			return false, s.printVersion(s.Flags.Args()[1:])
		}
		// A word that is not a flag is a mistake, not something to run
		// past: "monitor versoin" must not start a monitor.
		return false, fmt.Errorf("unexpected arguments %q (flags only, or the subcommand version; see --help)", s.Flags.Args())
	}
	return true, nil
}

func (s *Service) printVersion(extra []string) error {
	if len(extra) > 0 {
		return fmt.Errorf("version takes no arguments, got %q", extra)
	}
	_, err := fmt.Fprintln(s.Out, version.String())
	return err
}

// Run parses args (Parse); when there is a process to run, it builds the
// logger (routing grpc-go's logs through it), applies the GC target and
// creates the registry, then calls build for the app and runs it until
// ctx ends. The GC target is set before anything allocates much, and
// grpc-go's logger is replaced before any gRPC use, as grpclog requires.
func (s *Service) Run(ctx context.Context, args []string, build func() (run.Component, error)) error {
	if ok, err := s.Parse(args); !ok {
		return err
	}
	lg, err := logging.New(*s.log, s.Name)
	if err != nil {
		return err
	}
	defer func() { _ = lg.Sync() }()
	s.Logger = lg
	if s.GCPercent != nil {
		s.GCTarget = gctarget.Apply(lg, *s.GCPercent)
	}
	logging.RedirectGRPC(lg)
	s.Registry = admin.NewRegistry()
	app, err := build()
	if err != nil {
		return err
	}
	return app.Run(ctx)
}
