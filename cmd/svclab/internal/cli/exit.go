package cli

import "fmt"

// ExitError ends svclab with Code after the command printed why (a grade,
// a lint report, a conformance summary) or after a program it ran (kubectl,
// a command on a node) exited with Code: main prints nothing more.
type ExitError struct {
	Code int
	// Msg says what failed, for callers that print errors; empty: "exit
	// status Code".
	Msg string
}

func (e *ExitError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// ExitCode is the process's exit code.
func (e *ExitError) ExitCode() int { return e.Code }
