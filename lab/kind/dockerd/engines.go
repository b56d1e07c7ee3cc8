package dockerd

import (
	"os"
	"path/filepath"
)

// Engine is a Docker engine a user may run, by the socket it listens on.
type Engine struct {
	// Name is what the user knows it as: "Docker Desktop", "colima".
	Name string
	// Host is its address, for DOCKER_HOST.
	Host string
}

// Engines are the engines Ensure looks for when DOCKER_HOST is unset, in
// this order: the machine's (/var/run/docker.sock: Docker Engine on Linux,
// Docker Desktop's optional link on macOS), then the user's own — Docker
// Desktop (macOS and Linux), colima, OrbStack, Rancher Desktop and rootless
// Docker (in runtimeDir, $XDG_RUNTIME_DIR). home and runtimeDir may be "".
func Engines(home, runtimeDir string) []Engine {
	out := []Engine{{Name: "the machine's Docker engine", Host: DefaultSocket}}
	sock := func(name string, elem ...string) {
		out = append(out, Engine{Name: name, Host: "unix://" + filepath.Join(elem...)})
	}
	if home != "" {
		sock("Docker Desktop", home, ".docker", "run", "docker.sock")
		sock("Docker Desktop", home, ".docker", "desktop", "docker.sock")
		sock("colima", home, ".colima", "default", "docker.sock")
		sock("colima", home, ".colima", "docker.sock")
		sock("OrbStack", home, ".orbstack", "run", "docker.sock")
		sock("Rancher Desktop", home, ".rd", "docker.sock")
	}
	if runtimeDir != "" {
		sock("rootless Docker", runtimeDir, "docker.sock")
	}
	return out
}

// userEngines is Engines for this process's user.
func userEngines() []Engine {
	home, _ := os.UserHomeDir()
	return Engines(home, os.Getenv("XDG_RUNTIME_DIR"))
}
