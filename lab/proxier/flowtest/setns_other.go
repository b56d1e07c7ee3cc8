//go:build !linux

package flowtest

import (
	"errors"
	"os"
)

// setns refuses: network namespaces are Linux's. This stub lets the
// module build elsewhere (macOS, where svclab runs the kind backend); the
// tests that use it need root on Linux anyway.
func setns(*os.File) error {
	return errors.Join(errors.New("network namespaces need Linux"), errors.ErrUnsupported)
}
