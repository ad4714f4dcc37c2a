package cli

import "errors"

// Exit statuses shared by tandem-sampler and tandem-encoder.
const (
	ExitOK      = 0
	ExitFailure = 1 // the work failed
	ExitUsage   = 2 // the command line is wrong: a flag, a value, a missing argument
)

// UsageError marks an error caused by the command line.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage marks err as a command-line error (nil stays nil).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return UsageError{Err: err}
}

// ExitError carries an exit status of its own, such as replay's status for
// lost samples.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }
func (e ExitError) Unwrap() error { return e.Err }

// Status is the exit status for err: ExitOK for nil, ExitUsage for a
// UsageError, the code of an ExitError, ExitFailure otherwise.
func Status(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// IsUsage reports whether err is (or wraps) a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}
