package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/server"
)

func newServeCommand(e *env) *cobra.Command {
	var addr, token, publicURL, tlsCert, tlsKey string
	var classes bool
	var maxStarting int
	var allowedHosts []string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the lab's web UI",
		Long: `Serve the lab's web UI.

By default it serves the local lab: one learner, no sign-in, any cluster.
With --classes it serves the open classes instead (see 'svclab class create'):
learners join at /join with the class's code, the instructor's board is at
/class/ID/board, and the local lab's pages are off, so that learners reach
their own labs only. Stopping the server ends the classes' labs and deletes
their clusters; the classes stay open for the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if classes && e.backend == kind.BackendName {
				// Root in a kind node is root on the Docker host: fine for
				// a learner's own machine, not for strangers.
				return errors.New("classes run on the embedded backend only: a learner who is root in a kind node is root on the machine that runs Docker. Serve the class on Linux as root without --backend kind (or SVCLAB_BACKEND)")
			}
			a, err := e.openAttempts(cmd, false)
			if err != nil {
				return err
			}
			defer a.close()
			p, st, m, log := a.provider, a.store, a.manager, e.log
			s := &server.Server{
				Clusters: p, Log: log, Background: cmd.Context(), Owners: a.owners,
				Catalog: m.Catalog(), Attempts: server.AttemptManager{M: m}, Learner: store.LocalLearner, Timeline: st,
				KubeBin: func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) },
				PodExec: func(c cluster.Cluster) (views.PodExecutor, error) { return grade.NewPodExecutor(c) },
			}
			if classes {
				db, err := class.OpenDB(cmd.Context(), store.Location(e.stateDir, e.databaseURL), nil)
				if err != nil {
					return err
				}
				defer db.Close()
				hub := class.NewHub(class.Options{DB: db, Provider: p, Catalog: m.Catalog(), Attempts: m, Store: st, Log: log,
					Labs: labs.Config{Starts: labs.NewStartLimit(maxStarting)}})
				defer func() {
					// Every lab of every class ends with the server.
					ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Minute)
					defer cancel()
					if err := hub.Shutdown(ctx); err != nil {
						log.Error("ending the classes' labs", "err", err)
					}
				}()
				if err := hub.OpenAll(cmd.Context()); err != nil {
					return err
				}
				rooms := hub.Classrooms()
				if len(rooms) == 0 {
					return errors.New("there is no open class to serve: create one with 'svclab class create --name NAME --scenarios IDS', or serve the local lab without --classes")
				}
				s.Classes, s.ClassesOnly = hub, true
				for _, cr := range rooms {
					fmt.Fprintf(e.out, "class %s: join code %s\n", cr.Class.Name, cr.Class.JoinCode)
				}
			}
			access := &server.Access{Hosts: allowedHosts}
			var tlsConfig *tls.Config
			if (tlsCert == "") != (tlsKey == "") {
				return errors.New("--tls-cert and --tls-key go together: give both, or neither")
			}
			if tlsCert != "" {
				cr, err := server.NewCertReloader(tlsCert, tlsKey)
				if err != nil {
					return err
				}
				tlsConfig, access.Secure = cr.TLSConfig(), true
			}
			if publicURL != "" {
				u, err := url.Parse(publicURL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("--public-url %q: give the address learners open, such as https://lab.example.org", publicURL)
				}
				access.Hosts = append(access.Hosts, u.Host)
				access.Secure = access.Secure || u.Scheme == "https"
				access.TrustProxy = true
			}
			if classes {
				// Learners come with join codes, under whatever name the
				// classroom reaches the machine by.
				access.AnyHost = len(access.Hosts) == 0
			} else {
				access.Token = token
				if access.Token == "" {
					access.Token = server.NewToken()
				}
			}
			s.Access = access
			l, err := server.Listen(addr)
			if err != nil {
				return err
			}
			if !classes && !isLoopback(l.Addr()) {
				fmt.Fprintf(e.errOut, "svclab: warning: the local lab is served on %s, beyond this machine: whoever reaches that address with the link below gets root shells in your labs. Serve classes with --classes instead, or keep --addr on 127.0.0.1.\n", l.Addr())
			}
			scheme := "http"
			if tlsConfig != nil {
				scheme = "https"
			}
			link := fmt.Sprintf("%s://%s/", scheme, displayAddr(l.Addr()))
			if publicURL != "" {
				link = strings.TrimRight(publicURL, "/") + "/"
			}
			if access.Token != "" {
				link += "?token=" + access.Token
			}
			fmt.Fprintf(e.out, "svclab is serving on %s (Ctrl-C stops it)\n", link)
			err = server.Serve(cmd.Context(), l, s.Handler(), log, tlsConfig)
			// A cluster being created when the server stops rolls back.
			s.Wait()
			return err
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	c.Flags().StringArrayVar(&allowedHosts, "allowed-host", nil, "a name (or address) the server answers to besides localhost and 127.0.0.1, e.g. lab.example.org (repeatable); requests naming any other host are refused")
	c.Flags().StringVar(&publicURL, "public-url", "", "the address learners open when a TLS-terminating proxy is in front, e.g. https://lab.example.org: its name is allowed, and with https cookies are Secure and HSTS is sent")
	c.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (read again when it changes)")
	c.Flags().StringVar(&tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	c.Flags().StringVar(&token, "token", "", "the local lab's token, which every browser must bring once (the printed link carries it; default: a new random one each start)")
	c.Flags().BoolVar(&classes, "classes", false, "serve the open classes (join codes, the instructor's board) instead of the local lab")
	c.Flags().IntVar(&maxStarting, "max-starting", 0, "with --classes: how many lab clusters are created at once; the others wait their turn, and learners see their place (0: one per CPU)")
	return c
}

// isLoopback tells whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// displayAddr is the address to print in a link: a wildcard listener is
// reached through 127.0.0.1 from this machine.
func displayAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if ok && ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return a.String()
}
