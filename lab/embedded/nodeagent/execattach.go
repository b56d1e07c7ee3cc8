//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"io"
	"os/exec"

	"github.com/creack/pty"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/utils/exec"
)

// execAttached runs cmd in container id with kubectl exec's streams: with
// a TTY it runs runc on a pseudo-terminal whose size follows the client's
// resize events.
func execAttached(ctx context.Context, rt *runc, id string, cmd []string, attach api.AttachIO) error {
	if !attach.TTY() {
		var stdin io.Reader
		if attach.Stdin() != nil {
			stdin = attach.Stdin()
		}
		code, err := rt.exec(ctx, id, cmd, false, stdin, writerOrDiscard(attach.Stdout()), writerOrDiscard(attach.Stderr()))
		if err != nil {
			return err
		}
		if code != 0 {
			return exitCodeError(code)
		}
		return nil
	}
	args := append([]string{"--root", rt.root, "exec", "--tty", id}, cmd...)
	c := exec.CommandContext(ctx, "runc", args...)
	c.Env = append(c.Environ(), rt.marker)
	f, err := pty.Start(c)
	if err != nil {
		return fmt.Errorf("starting a terminal: %w", err)
	}
	defer f.Close()
	go func() {
		for size := range attach.Resize() {
			pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}()
	if attach.Stdin() != nil {
		go io.Copy(f, attach.Stdin())
	}
	if attach.Stdout() != nil {
		io.Copy(attach.Stdout(), f) // ends with EIO when the process exits
	}
	err = c.Wait()
	if code := exitCode(err); code > 0 {
		return exitCodeError(code)
	}
	return nil
}

// exitCodeError carries a command's exit code to kubectl exec (the
// kubelet API reports exit codes it finds as this error type).
func exitCodeError(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

func writerOrDiscard(w io.WriteCloser) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
