package dockerd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// RuntimeName is the name of svclab's runc wrapper: the runtime svclab's
// dockerd runs containers with when the machine's capability bounding set
// lacks capabilities a privileged container asks for. It is the svclab
// binary called by that name (RuntimeMain; lab/roles runs it).
const RuntimeName = "svclab-runc"

// capNames are the Linux capabilities by number (capability.h).
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// Bounding reads the capability bounding set of this process
// (CapBnd in /proc/self/status).
func Bounding() (uint64, error) {
	return boundingOf("/proc/self/status")
}

func boundingOf(status string) (uint64, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapBnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("%s has no CapBnd line", status)
}

// LastCap reads the highest capability the kernel knows.
func LastCap() (int, error) {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// Missing lists the capabilities up to lastCap that bounding lacks: those a
// privileged container cannot get here.
func Missing(bounding uint64, lastCap int) []string {
	var out []string
	for i := 0; i <= lastCap && i < 64; i++ {
		if bounding&(1<<i) == 0 {
			if i < len(capNames) {
				out = append(out, capNames[i])
			} else {
				out = append(out, fmt.Sprintf("CAP_%d", i))
			}
		}
	}
	return out
}

// capSets are the capability lists of an OCI process.
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// DropCapabilities removes the capabilities in drop from the capability
// lists of an OCI process object (a process.json, or config.json's
// "process") and reports whether it changed anything. Everything else is
// kept as it was, numbers included.
func DropCapabilities(process map[string]any, drop []string) bool {
	caps, ok := process["capabilities"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for _, set := range capSets {
		list, ok := caps[set].([]any)
		if !ok {
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(list), func(v any) bool {
			s, _ := v.(string)
			return slices.Contains(drop, s)
		})
		if len(kept) != len(list) {
			caps[set], changed = kept, true
		}
	}
	return changed
}

// filterFile drops capabilities from an OCI file: a bundle's config.json
// (process is its "process" object) or an exec's process.json (the process
// itself).
func filterFile(path string, isConfig bool, drop []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	process := doc
	if isConfig {
		p, ok := doc["process"].(map[string]any)
		if !ok {
			return nil
		}
		process = p
	}
	if !DropCapabilities(process, drop) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".svclab-tmp"
	if err := os.WriteFile(tmp, out, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// runtimeFiles finds the OCI files a runc command line reads: the bundle's
// config.json for create and run, the process file for exec.
func runtimeFiles(args []string) (config, process string) {
	cmd := ""
	bundle := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func(name string) (string, bool) {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
			if a == name && i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		if v, ok := value("--bundle"); ok {
			bundle = v
			continue
		}
		if v, ok := value("-b"); ok {
			bundle = v
			continue
		}
		if v, ok := value("--process"); ok {
			process = v
			continue
		}
		if v, ok := value("-p"); ok && cmd == "exec" {
			process = v
			continue
		}
		// The global flags before the command take values (--root DIR):
		// the command is the first of the commands that matter.
		if cmd == "" && slices.Contains([]string{"create", "run", "exec"}, a) {
			cmd = a
		}
	}
	switch cmd {
	case "create", "run":
		if bundle == "" {
			bundle, _ = os.Getwd()
		}
		return filepath.Join(bundle, "config.json"), ""
	case "exec":
		return "", process
	}
	return "", ""
}

// RuntimeMain is the main function of RuntimeName, the runc wrapper: it
// removes the capabilities this machine's bounding set lacks from the
// container or process runc is asked to start, then runs runc with the
// same arguments (args, those after argv[0]). It returns the exit code
// when it cannot.
func RuntimeMain(args []string) int {
	runc, err := exec.LookPath("runc")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: runc is not installed: %v\n", RuntimeName, err)
		return 1
	}
	if err := filterForHost(args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", RuntimeName, err)
		return 1
	}
	err = syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "%s: running runc: %v\n", RuntimeName, err)
	return 1
}

func filterForHost(args []string) error {
	config, process := runtimeFiles(args)
	if config == "" && process == "" {
		return nil
	}
	bounding, err := Bounding()
	if err != nil {
		return err
	}
	last, err := LastCap()
	if err != nil {
		return err
	}
	drop := Missing(bounding, last)
	if len(drop) == 0 {
		return nil
	}
	if config != "" {
		return filterFile(config, true, drop)
	}
	return filterFile(process, false, drop)
}
