package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/proxier/deploy"
	"github.com/svclab/svclab/lab/proxierctl"
	"github.com/svclab/svclab/lab/scenario"
)

// Options configure a session.
type Options struct {
	// Faults are the fault implementations (nil: faults.Registry()).
	Faults *scenario.Registry
	// Progress receives the steps of Start (nil: none).
	Progress cluster.Progress
	// SettleTimeout bounds each wait for the workloads (default 3m).
	SettleTimeout time.Duration
	Log           *slog.Logger
	// Svclab is the command line that runs svclab against the session's
	// backend (the binary and its --state-dir), so that commands such as
	// "svclab node exec NODE -- sysctl ..." in solutions and wrong fixes
	// work; RunCommands adds --name with the cluster's name to node
	// commands. Nil: svclab is not on the PATH of those commands.
	Svclab []string
}

func (o *Options) defaults() {
	if o.Faults == nil {
		o.Faults = faults.Registry()
	}
	o.Progress = cluster.OrNop(o.Progress)
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Session is one scenario set up on one cluster.
type Session struct {
	Scenario *scenario.Scenario
	Cluster  cluster.Cluster
	// Baseline is what the rightFix checks compare with, recorded right
	// after the faults were injected.
	Baseline *grade.Baseline
	Grader   *grade.Grader
	opts     Options
	apply    *applier
	// guard is the cluster-wide state that Teardown puts back (nil: none
	// recorded).
	guard *guard
	// generation is the life of Cluster the session was set up on
	// (cluster.Generation).
	generation string
	// partial is set when only the first injected faults went in (the
	// next one failed); Teardown then reverts only those.
	partial  bool
	injected int
	// answers are the learner's answers to the answer checks, by check
	// id, for the grades that bring none of their own (grade.WithAnswers).
	answersMu sync.Mutex
	answers   map[string]string
}

// Generation is the life of the cluster the session was set up on
// (cluster.Generation): when the cluster's is another, the cluster was
// deleted and created again, and what the session set up is gone. It is
// empty for a session resumed from a state saved before it was kept, and
// for one from Attach (which is only for Teardown).
func (s *Session) Generation() string { return s.generation }

// SetAnswer records the learner's answer to the answer check id ("" takes
// it back).
func (s *Session) SetAnswer(id, text string) error {
	if err := ValidateAnswer(s.Scenario, id, text); err != nil {
		return err
	}
	s.answersMu.Lock()
	defer s.answersMu.Unlock()
	if s.answers == nil {
		s.answers = map[string]string{}
	}
	if text == "" {
		delete(s.answers, id)
	} else {
		s.answers[id] = text
	}
	return nil
}

// Answers returns a copy of the recorded answers.
func (s *Session) Answers() map[string]string {
	s.answersMu.Lock()
	defer s.answersMu.Unlock()
	return maps.Clone(s.answers)
}

// ValidateAnswer checks that sc has an answer check id and that text may
// be its answer.
func ValidateAnswer(sc *scenario.Scenario, id, text string) error {
	for _, c := range sc.Checks {
		if c.ID == id && c.Answer != nil {
			if len(text) > scenario.MaxAnswerLength {
				return fmt.Errorf("the answer is %d bytes long; keep it under %d", len(text), scenario.MaxAnswerLength)
			}
			if !utf8.ValidString(text) {
				return errors.New("the answer is not UTF-8 text")
			}
			return nil
		}
	}
	return fmt.Errorf("scenario %s asks no question %q", sc.ID, id)
}

// ReferenceAnswers are the right answers the scenario gives for its answer
// checks, by check id.
func ReferenceAnswers(sc *scenario.Scenario) map[string]string {
	out := map[string]string{}
	for _, c := range sc.Checks {
		if c.Answer != nil {
			out[c.ID] = c.Answer.Reference
		}
	}
	return out
}

// EnsureCluster returns the cluster named name, creating it with the
// scenario's shape when p has none; created says which. An existing
// cluster must have at least the shape's nodes and its node labels; one
// that is dead (its API or a node does not answer) is deleted and created
// again — the caller holds its claim, so nobody else is using it.
func EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (c cluster.Cluster, created bool, err error) {
	c, err = p.Get(ctx, name)
	switch {
	case err == nil:
		if err := checkShape(ctx, c, shape); err != nil {
			return nil, false, err
		}
		dead := alive(ctx, c)
		if dead == nil {
			return c, false, nil
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		done := cluster.OrNop(progress).Start(fmt.Sprintf("Cluster %s does not answer (%v): deleting it to create it again", name, dead))
		err = p.Delete(ctx, name)
		done(err)
		if err != nil && !errors.Is(err, cluster.ErrNotFound) {
			return nil, false, fmt.Errorf("cluster %s does not answer (%v), and deleting it failed: %w", name, dead, err)
		}
	case !errors.Is(err, cluster.ErrNotFound):
		return nil, false, err
	}
	labels := map[string]map[string]string{}
	for short, l := range shape.NodeLabels {
		labels[scenario.NodeName(name, short)] = l
	}
	c, err = p.Create(ctx, cluster.CreateOptions{Name: name, Workers: shape.Nodes - 1, NodeLabels: labels, ProxyMode: shape.Mode(), Progress: progress})
	if err != nil {
		return nil, false, fmt.Errorf("creating cluster %s: %w", name, err)
	}
	return c, true, nil
}

// aliveTimeout bounds the check that a cluster answers.
const aliveTimeout = 15 * time.Second

// alive says why c is dead (nil: it lives): its API server must be ready
// and every node must run a command.
func alive(ctx context.Context, c cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	cs, err := c.Client()
	if err != nil {
		return err
	}
	if err := cluster.APIReady(ctx, cs); err != nil {
		return fmt.Errorf("its API server: %w", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := c.NodeExec(ctx, n.Name, []string{"true"}, cluster.Stdio{}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// checkShape tells whether c can run a scenario of shape.
func checkShape(ctx context.Context, c cluster.Cluster, shape scenario.ClusterShape) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	have := map[string]cluster.Node{}
	for _, n := range nodes {
		have[n.Name] = n
	}
	for _, short := range shape.NodeNames() {
		n, ok := have[scenario.NodeName(c.Name(), short)]
		if !ok {
			return fmt.Errorf("cluster %s has %d nodes; the scenario needs %d (%s): use another cluster or let svclab create one", c.Name(), len(nodes), shape.Nodes, strings.Join(shape.NodeNames(), ", "))
		}
		for k, v := range shape.NodeLabels[short] {
			if n.Labels[k] != v {
				return fmt.Errorf("node %s of cluster %s lacks the label %s=%s that the scenario needs", n.Name, c.Name(), k, v)
			}
		}
	}
	return nil
}

// ErrWrongBackend is returned for a scenario the cluster's backend cannot
// run (Scenario.Cluster.EmbeddedOnly).
var ErrWrongBackend = errors.New("the scenario cannot run on this backend")

// Backend names the backend of c: what its Backend method says,
// "embedded" for clusters without one.
func Backend(c cluster.Cluster) string {
	if b, ok := c.(interface{ Backend() string }); ok {
		return b.Backend()
	}
	return "embedded"
}

// CheckBackend refuses a scenario the cluster's backend cannot run, saying
// why in the learner's words.
func CheckBackend(s *scenario.Scenario, c cluster.Cluster) error {
	if s.Cluster.EmbeddedOnly == "" || Backend(c) == "embedded" {
		return nil
	}
	return fmt.Errorf("%w: scenario %s runs on embedded clusters only: %s", ErrWrongBackend, s.ID, s.Cluster.EmbeddedOnly)
}

// Start sets the scenario up on c: it prepares the nodes, removes what an
// earlier run of the scenario left, applies the setup manifests, waits for
// the application, injects the faults, waits for them to take effect and
// records the baseline.
func Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, opts Options) (*Session, error) {
	opts.defaults()
	if err := CheckBackend(s, c); err != nil {
		return nil, err
	}
	ses := &Session{Scenario: s, Cluster: c, opts: opts}
	var err error
	if ses.generation, err = cluster.Generation(c); err != nil {
		return nil, err
	}
	cs, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %s: %w", c.Name(), err)
	}
	if ses.apply, err = newApplier(c); err != nil {
		return nil, err
	}
	if ses.Grader, err = grade.New(c, opts.Log); err != nil {
		return nil, err
	}
	mode, err := proxyMode(ctx, c)
	if err != nil {
		return nil, err
	}
	actions := []cluster.Action{
		{Name: "Removing what an earlier run left", Run: func(ctx context.Context) error { return remove(ctx, ses.apply, s, true) }},
		{Name: "Recording the cluster-wide state to restore afterwards", Run: func(ctx context.Context) error {
			ses.guard, err = recordGuard(ctx, cs)
			return err
		}},
	}
	// The switch comes after the guard has recorded the cluster's own
	// mode, which the scenario's end puts back.
	var switchTo string
	if ses.Scenario, switchTo = inMode(s, mode); switchTo != "" {
		actions = append(actions, cluster.Action{
			Name: fmt.Sprintf("Switching kube-proxy from %s to %s mode, the scenario's (its end switches back)", mode, switchTo),
			Run:  func(ctx context.Context) error { return faults.SetProxyMode(ctx, c, switchTo) },
		})
	}
	err = cluster.RunActions(ctx, opts.Progress, append(actions, []cluster.Action{
		{Name: "Applying the setup manifests", Run: func(ctx context.Context) error {
			for _, m := range s.Manifests {
				for _, o := range m.Objects {
					if err := ses.apply.apply(ctx, m.File, o); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		{Name: "Waiting for the application to be ready", Run: func(ctx context.Context) error {
			if err := settle(ctx, cs, s, true, opts.SettleTimeout); err != nil {
				return err
			}
			// The faults break a working dataplane: one that has
			// programmed the application (a proxier stopped before its
			// first sync of the Service would leave no rules at all
			// instead of the old ones the scenario speaks of).
			return waitDataplane(ctx, c, cs)
		}},
		{Name: "Injecting the faults", Run: func(ctx context.Context) error {
			for i := range s.Faults {
				if err := faults.Inject(ctx, c, opts.Faults, s.Faults[i:i+1]); err != nil {
					ses.partial = true
					return err
				}
				ses.injected = i + 1
			}
			return nil
		}},
		{Name: "Waiting for the faults to take effect", Run: func(ctx context.Context) error {
			if err := settle(ctx, cs, s, false, opts.SettleTimeout); err != nil {
				return err
			}
			if err := faults.Settle(ctx, c, opts.Faults, s.Faults); err != nil {
				return err
			}
			return waitDataplane(ctx, c, cs)
		}},
		{Name: "Recording the state the grader compares with", Run: func(ctx context.Context) error {
			ses.Baseline, err = ses.Grader.Record(ctx, s)
			return err
		}},
	}...))
	if err != nil {
		return ses, fmt.Errorf("setting up scenario %s on cluster %s: %w", s.ID, c.Name(), err)
	}
	return ses, nil
}

// waitDataplane waits for the dataplane to follow the API: the proxiers'
// sync (waitProgrammed), then the lab's load balancer, when a LoadBalancer
// Service is there for it to act on.
func waitDataplane(ctx context.Context, c cluster.Cluster, cs kubernetes.Interface) error {
	nodes, err := waitProxiers(ctx, c, cs, proxierStartTimeout)
	if err != nil {
		return err
	}
	if err := waitProgrammed(ctx, c, cs, nodes); err != nil {
		return err
	}
	lc, ok := c.(cluster.LoadBalancerCluster)
	if !ok {
		return nil
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	for _, svc := range svcs.Items {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			return lc.WaitLoadBalancer(ctx)
		}
	}
	return nil
}

// proxierStartTimeout bounds the wait for proxiers that were just
// (re)started: a proxier switching modes first removes the other mode's
// rules, which takes seconds on a busy machine.
const proxierStartTimeout = 45 * time.Second

// waitProxiers waits until the proxier of every running kube-proxy Pod
// answers and has programmed its rules once: a DaemonSet rollout is done
// when the containers run, before the proxiers in them have synced (the
// DaemonSet has no readiness probe, as kubeadm's has none). Nodes without
// a running kube-proxy Pod (a proxier taken off the node, one that keeps
// crashing) are not waited for; neither is a proxier that has not synced
// by the timeout: the grader then sees what a learner would. It returns
// the nodes whose proxiers have synced.
func waitProxiers(ctx context.Context, c cluster.Cluster, cs kubernetes.Interface, timeout time.Duration) ([]string, error) {
	pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector})
	if err != nil {
		return nil, fmt.Errorf("listing the kube-proxy Pods: %w", err)
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && podReady(&p) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var synced []string
	for _, node := range nodes {
		err := wait.PollUntilContextCancel(wctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			last, err := proxierctl.LastSync(ctx, c, node)
			return err == nil && !last.IsZero(), nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			slog.DebugContext(ctx, "a proxier has not synced yet; going on", "node", node, "timeout", timeout)
			return synced, nil
		}
		synced = append(synced, node)
	}
	return synced, nil
}

// inMode is scenario s as it runs on a cluster whose kube-proxy runs in
// mode: a scenario that names no mode runs in the cluster's; one written
// for the other mode switches kube-proxy to its own first (switchTo; ""
// when there is nothing to switch).
func inMode(s *scenario.Scenario, mode string) (run *scenario.Scenario, switchTo string) {
	if s.Cluster.ProxyMode == "" {
		if run, err := s.WithProxyMode(mode); err == nil {
			return run, ""
		}
	}
	if want := s.Cluster.Mode(); want != mode {
		return s, want
	}
	return s, ""
}

// proxyMode is the mode kube-proxy runs in on c, as its first node's
// proxier says. A proxier that is restarting (the end of an earlier
// scenario) answers within seconds.
func proxyMode(ctx context.Context, c cluster.Cluster) (string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		return "", fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	var got string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = proxierctl.Mode(ctx, c, nodes[0].Name)
		return err == nil, nil
	})
	if err != nil {
		if got, err = proxierctl.Mode(ctx, c, nodes[0].Name); err != nil {
			return "", fmt.Errorf("asking kube-proxy on node %s which mode it runs (is kube-proxy running there? kubectl -n kube-system get pods -l %s): %w", nodes[0].Name, deploy.Selector, err)
		}
	}
	return got, nil
}

// Grade grades the scenario once.
func (s *Session) Grade(ctx context.Context) *grade.Report {
	if grade.AnswersFrom(ctx) == nil {
		ctx = grade.WithAnswers(ctx, s.Answers())
	}
	return s.Grader.Grade(ctx, s.Scenario, s.Baseline)
}

// GradeUntilPassed grades until every check passes or timeout runs out
// and returns the last report. The dataplane follows a fix within seconds,
// not at once.
func (s *Session) GradeUntilPassed(ctx context.Context, timeout time.Duration) *grade.Report {
	deadline := time.Now().Add(timeout)
	for {
		rep := s.Grade(ctx)
		if rep.Passed || time.Now().After(deadline) || ctx.Err() != nil {
			return rep
		}
		select {
		case <-ctx.Done():
			return rep
		case <-time.After(time.Second):
		}
	}
}

// Solve runs the scenario's reference solution (RunCommands) and waits
// for the workloads to settle.
func (s *Session) Solve(ctx context.Context, kubeBin string, out io.Writer) error {
	return s.SolveWith(ctx, kubeBin, s.Scenario.Solution, out)
}

// SolveWith runs the commands of a right fix (the reference solution or
// another of the scenario's solutions), gives the reference answers to the
// answer checks and waits for what the commands started.
func (s *Session) SolveWith(ctx context.Context, kubeBin string, cmds []string, out io.Writer) error {
	if err := s.RunCommands(ctx, kubeBin, cmds, out); err != nil {
		return err
	}
	for id, text := range ReferenceAnswers(s.Scenario) {
		fmt.Fprintf(out, "answer to %s: %s\n", id, text)
		if err := s.SetAnswer(id, text); err != nil {
			return err
		}
	}
	cs, err := s.Cluster.Client()
	if err != nil {
		return err
	}
	if err := settle(ctx, cs, s.Scenario, true, s.opts.SettleTimeout); err != nil {
		return fmt.Errorf("after the solution: %w", err)
	}
	return nil
}

// RunCommands runs shell commands as a learner would, each with bash, with
// kubectl on the PATH (svclab-kube's kubectl, KUBECONFIG pointing at the
// cluster), writing the commands and their output to out. It stops at the
// first command that fails.
func (s *Session) RunCommands(ctx context.Context, kubeBin string, cmds []string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "svclab-solve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kc, err := s.Cluster.Kubeconfig()
	if err != nil {
		return fmt.Errorf("the kubeconfig of cluster %s: %w", s.Cluster.Name(), err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %s kubectl \"$@\"\n", shellQuote(kubeBin))
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(wrapper), 0o755); err != nil {
		return err
	}
	if len(s.opts.Svclab) > 0 {
		var args []string
		for _, a := range s.opts.Svclab {
			args = append(args, shellQuote(a))
		}
		bin, name := strings.Join(args, " "), shellQuote(s.Cluster.Name())
		// svclab's node commands take the cluster's name with --name.
		script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = node ] && [ $# -ge 2 ]; then sub=$2; shift 2; exec %s node \"$sub\" --name %s \"$@\"; fi\nexec %s \"$@\"\n", bin, name, bin)
		if err := os.WriteFile(filepath.Join(dir, "svclab"), []byte(script), 0o755); err != nil {
			return err
		}
	}
	env := append(os.Environ(), "KUBECONFIG="+kcPath, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for i, line := range cmds {
		fmt.Fprintf(out, "$ %s\n", strings.TrimSpace(line))
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, out, out, dir
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("step %d (%s) failed: %w", i+1, firstLine(line), err)
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Teardown reverts the faults that can be reverted (the dataplane ones,
// which outlive the namespaces) and deletes what the setup created; with
// waitGone it returns once the namespaces are gone.
//
// It also puts back what the scenario (its faults, the learner or the
// reference solution) changed outside its namespaces: kube-proxy's and
// CoreDNS's configuration and workloads, and node labels and taints; so
// the cluster is ready for the next scenario.
func (s *Session) Teardown(ctx context.Context, waitGone bool) error {
	injected := s.Scenario.Faults
	if s.partial {
		injected = injected[:s.injected]
	}
	err := faults.Revert(ctx, s.Cluster, s.opts.Faults, injected)
	if s.guard != nil {
		if cs, cerr := s.Cluster.Client(); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			err = errors.Join(err, s.guard.restore(ctx, cs, s.opts.SettleTimeout))
		}
	}
	return errors.Join(err, remove(ctx, s.apply, s.Scenario, waitGone))
}
