package grade

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/svclab/svclab/lab/cluster"
)

// PodExecutor runs a command in a Pod's container, as kubectl exec does.
type PodExecutor interface {
	Exec(ctx context.Context, namespace, pod, container string, cmd []string, stdout, stderr io.Writer) error
}

// RESTPodExecutor uses the exec subresource: WebSocket first, SPDY when
// the server does not upgrade to it (kubectl's order).
type RESTPodExecutor struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// NewPodExecutor returns a RESTPodExecutor for c.
func NewPodExecutor(c cluster.Cluster) (*RESTPodExecutor, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name(), err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &RESTPodExecutor{Config: cfg, Client: cs}, nil
}

// Exec implements PodExecutor.
func (e *RESTPodExecutor) Exec(ctx context.Context, namespace, pod, container string, cmd []string, stdout, stderr io.Writer) error {
	req := e.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.Config, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr}); err != nil {
		return fmt.Errorf("running %q in Pod %s/%s: %w", cmd, namespace, pod, err)
	}
	return nil
}
