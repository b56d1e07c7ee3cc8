package images_test

import (
	"testing"

	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/roles"
)

// Every program name the images link to the svclab binary is a role of
// it, and so are the names the images call those links by.
func TestRoles(t *testing.T) {
	table := roles.Table()
	names := append(images.SvclabLinks(), "agnhost-2", "httpd-foreground")
	for _, name := range names {
		if _, ok := table[name]; !ok {
			t.Errorf("the images link %s to svclab, but lab/roles has no role %q", name, name)
		}
	}
}
