package mneme

import "errors"

// ErrNoGPU is matched (errors.Is) by every error that means this machine has
// no usable GPU: no CUDA driver, or a driver that sees no device. Whichever
// part of mneme finds out (the cuda package, a replay worker answering over
// the tuning protocol), the commands report it the same way, with exit code 6.
var ErrNoGPU = errors.New("no GPU")

// InputError is a problem with what the user handed in (flags, files,
// databases, configurations), as opposed to a failure of the machine:
// fixing the input fixes it. The commands report it with exit code 2.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BadInput marks err as an InputError; nil stays nil.
func BadInput(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

// ErrOutOfResources is matched (errors.Is) by every error that means the
// machine lacks the memory (host or device) an operation needs, as opposed
// to bad input or a failure: the commands report it with exit code 7.
var ErrOutOfResources = errors.New("out of resources")
