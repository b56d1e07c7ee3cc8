package nodeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// CLI is the real Docker: the docker command line against the daemon at
// Host ("" for the command's default, DOCKER_HOST).
type CLI struct{ Host string }

var _ Docker = CLI{}

func (c CLI) cmd(ctx context.Context, args ...string) *exec.Cmd {
	if c.Host != "" {
		args = append([]string{"-H", c.Host}, args...)
	}
	return exec.CommandContext(ctx, "docker", args...)
}

func (c CLI) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := c.cmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", args[0], err, lastLines(msg, 10))
	}
	return stdout.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c CLI) ImageLabel(ctx context.Context, image, label string) (string, bool, error) {
	out, err := c.run(ctx, "", "image", "inspect", "--format", "{{json .Config.Labels}}", image)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return "", false, nil
		}
		return "", false, err
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &labels); err != nil {
		return "", true, nil
	}
	return labels[label], true, nil
}

func (c CLI) Load(ctx context.Context, archive string) error {
	_, err := c.run(ctx, "", "load", "--quiet", "--input", archive)
	return err
}

func (c CLI) Save(ctx context.Context, image, path string) error {
	_, err := c.run(ctx, "", "save", "--output", path, image)
	return err
}

func (c CLI) Run(ctx context.Context, args ...string) error {
	_, err := c.run(ctx, "", append([]string{"run", "--detach"}, args...)...)
	return err
}

func (c CLI) Exec(ctx context.Context, container, stdin string, argv ...string) (string, error) {
	args := []string{"exec"}
	if stdin != "" {
		args = append(args, "--interactive")
	}
	return c.run(ctx, stdin, append(append(args, container), argv...)...)
}

func (c CLI) Commit(ctx context.Context, container, image string, changes ...string) error {
	args := []string{"commit"}
	for _, ch := range changes {
		args = append(args, "--change", ch)
	}
	_, err := c.run(ctx, "", append(args, container, image)...)
	return err
}

func (c CLI) RemoveContainer(ctx context.Context, container string) error {
	_, err := c.run(ctx, "", "rm", "--force", "--volumes", container)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "no such container") {
		return nil
	}
	return err
}

func (c CLI) RemoveImage(ctx context.Context, image string) error {
	_, err := c.run(ctx, "", "rmi", image)
	return err
}

func (c CLI) PruneImages(ctx context.Context, label string) error {
	_, err := c.run(ctx, "", "image", "prune", "--force", "--filter", "label="+label)
	return err
}

func (c CLI) Containers(ctx context.Context, label string) (map[string]string, error) {
	out, err := c.run(ctx, "", "ps", "--all", "--filter", "label="+label, "--format", `{{.ID}} {{.Label "`+label+`"}}`)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		if id != "" {
			m[id] = v
		}
	}
	return m, nil
}

// pidAlive says whether the process whose pid is written in s runs.
func pidAlive(s string) bool {
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// KubeBin is the real Kube: svclab-kube at Path.
type KubeBin struct{ Path string }

func (k KubeBin) ImagesList(ctx context.Context, version string) ([]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.Path, "kubeadm", "config", "images", "list", "--kubernetes-version", version)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w: %s", err, lastLines(strings.TrimSpace(stderr.String()), 5))
	}
	list := strings.Fields(stdout.String())
	if len(list) == 0 {
		return nil, errors.New("kubeadm config images list named no image")
	}
	return list, nil
}
