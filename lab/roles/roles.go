package roles

import (
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/images/agnhost"
	"github.com/svclab/svclab/lab/images/pause"
	"github.com/svclab/svclab/lab/images/webserver"
	"github.com/svclab/svclab/lab/kind/dockerd"
	proxierrun "github.com/svclab/svclab/lab/proxier/run"
)

// A Role is a program the svclab binary stands in for.
type Role struct {
	// Main runs the program with the arguments after argv[0] and returns
	// its exit code.
	Main func(args []string) int
	// LongRunning programs (a cluster's processes, the programs of pods)
	// run with embedded.DefaultGOGC, memory over CPU, unless GOGC says
	// otherwise.
	LongRunning bool
}

// Table is every role by its argv[0] name.
func Table() map[string]Role {
	nginx := func(args []string) int { return webserver.Main(webserver.FlavorNginx, args) }
	httpd := func(args []string) int { return webserver.Main(webserver.FlavorHTTPD, args) }
	return map[string]Role{
		// svclab's Docker engine (kind backend) runs containers through
		// it where the capability bounding set needs it.
		dockerd.RuntimeName: {Main: dockerd.RuntimeMain},

		// An embedded cluster's own processes.
		embedded.SupervisorArg0:   {Main: embedded.SupervisorMain, LongRunning: true},
		embedded.NodeAgentArg0:    {Main: embedded.NodeAgentMain, LongRunning: true},
		embedded.LoadBalancerArg0: {Main: embedded.LoadBalancerMain, LongRunning: true},

		// The programs of the lab's pod images (lab/images links them to
		// the svclab binary): the proxier image's kube-proxy, the agnhost
		// image's agnhost (agnhost-2 too) and pause (registry.k8s.io/pause),
		// the web image's nginx and httpd.
		"kube-proxy":       {Main: proxierrun.Main, LongRunning: true},
		"agnhost":          {Main: agnhost.Main, LongRunning: true},
		"agnhost-2":        {Main: agnhost.Main, LongRunning: true},
		"pause":            {Main: pause.Main, LongRunning: true},
		"nginx":            {Main: nginx, LongRunning: true},
		"httpd":            {Main: httpd, LongRunning: true},
		"httpd-foreground": {Main: httpd, LongRunning: true},
	}
}

// Dispatch runs the role the process was started as (the base name of
// argv[0]) and exits with its code. It returns when argv[0] names no role:
// the process is svclab itself (or a test binary).
func Dispatch() {
	role, ok := Table()[filepath.Base(os.Args[0])]
	if !ok {
		return
	}
	if role.LongRunning && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(embedded.DefaultGOGC)
	}
	os.Exit(role.Main(os.Args[1:]))
}
