package images

import (
	"github.com/svclab/svclab/lab/images/agnhost"
	"github.com/svclab/svclab/lab/images/pause"
	"github.com/svclab/svclab/lab/images/webserver"
)

// Applet returns the program the svclab binary must run when it is
// invoked under name (the base name of argv[0]) inside one of the lab's
// images: "agnhost" and "agnhost-2" (agnhost image), "pause" (the pause
// image, served by the agnhost image), "nginx", "httpd" and
// "httpd-foreground" (web image). The function takes the arguments after
// the program name and returns the exit code. The proxier image's
// "kube-proxy" is the proxier's own entry point and not listed here.
//
// The svclab main function should check this before anything else
// (before installing signal handlers), so that these programs get the
// signals exactly as their upstream counterparts do.
func Applet(name string) (run func(args []string) int, ok bool) {
	switch name {
	case "agnhost", "agnhost-2":
		return agnhost.Main, true
	case "nginx":
		return func(args []string) int { return webserver.Main(webserver.FlavorNginx, args) }, true
	case "httpd", "httpd-foreground":
		return func(args []string) int { return webserver.Main(webserver.FlavorHTTPD, args) }, true
	case "pause":
		return pause.Main, true
	}
	return nil, false
}
