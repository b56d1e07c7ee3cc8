package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/web"
)

// The lab's life in the learner's hands: start over, end the scenario,
// delete the lab, and the Clusters page. Each asks first what it will do
// and lose: the page's dialog posts confirmed=yes; a form posted without
// it (no script) gets a page that asks.

// confirmed tells whether the request confirms its action; when it does
// not, it answers with the page that asks and returns false.
func (s *Server) confirmed(w http.ResponseWriter, r *http.Request, c web.Confirmation) bool {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if r.PostFormValue("confirmed") == "yes" {
		return true
	}
	c.Action = r.URL.Path
	writeHTML(w, r, s, web.Confirm(c))
	return false
}

// startOverText says what Start over does and loses.
func startOverText(clusterName string) web.Confirmation {
	return web.Confirmation{Title: "Start over?", Button: "Start over",
		Text: fmt.Sprintf("The scenario is set up again from scratch on cluster %s: its namespaces are deleted and created again with the fault (about a minute; a cluster that does not answer is created again, a few minutes). "+
			"What you changed in the cluster is lost. This attempt ends; its checks, hints and replay stay in its record.", clusterName)}
}

func endText(clusterName string) web.Confirmation {
	return web.Confirmation{Title: "End this scenario?", Button: "End the scenario",
		Text: fmt.Sprintf("The scenario is removed from cluster %s (its namespaces and the fault); the cluster stays for the next scenario. "+
			"What you changed for this scenario is lost. This attempt ends; its checks, hints and replay stay in its record.", clusterName)}
}

func deleteText(clusterName string, attempt bool) web.Confirmation {
	c := web.Confirmation{Title: fmt.Sprintf("Delete cluster %s?", clusterName), Button: "Delete the cluster",
		Text: fmt.Sprintf("Cluster %s is deleted with everything in it: its nodes, Pods, rules and whatever you changed. Starting a scenario creates a cluster again (a few minutes).", clusterName)}
	if attempt {
		c.Text += " The scenario running on it ends; its checks, hints and replay stay in its record."
	}
	return c
}

// endScenario ends the learner's attempt: its scenario is removed from
// the cluster, which stays.
func (s *Server) endScenario(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	c := endText(a.Cluster)
	c.Cancel = s.scopeOf(r).scenarioURL(sc.ID)
	if !s.confirmed(w, r, c) {
		return
	}
	scope := s.scopeOf(r)
	s.forgetLabs(a.Cluster)
	op := s.ops.start(s.base(), scope.owner, "Ending "+sc.Title, scope.scenarioURL(sc.ID), func(ctx context.Context, op *Operation) error {
		done := op.Start(fmt.Sprintf("Removing the scenario from cluster %s", a.Cluster))
		err := scope.attempts.End(ctx, a.ID)
		done(err)
		return err
	})
	http.Redirect(w, r, scope.operationURL(op.ID), http.StatusSeeOther)
}

// deleteLab ends the learner's attempt and deletes its cluster (the local
// lab only: a class learner's lab is the class's).
func (s *Server) deleteLab(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	scope := s.scopeOf(r)
	if scope.classScenarios != nil {
		jsonError(w, http.StatusForbidden, "Your lab belongs to the class: end the scenario instead, or ask your instructor for a fresh lab.")
		return
	}
	c := deleteText(a.Cluster, true)
	c.Cancel = scope.scenarioURL(sc.ID)
	if !s.confirmed(w, r, c) {
		return
	}
	s.startDelete(w, r, a.Cluster, a, scope.scenarioURL(sc.ID))
}

// startDelete runs the deletion of cluster name (ending attempt a on it
// first, when set) as an operation and sends the browser to it.
func (s *Server) startDelete(w http.ResponseWriter, r *http.Request, name string, a *Attempt, next string) {
	scope := s.scopeOf(r)
	s.forgetLabs(name)
	op := s.ops.start(s.base(), scope.owner, "Deleting cluster "+name, next, func(ctx context.Context, op *Operation) error {
		if a != nil {
			done := op.Start(fmt.Sprintf("Ending attempt %d at %s", a.ID, a.ScenarioID))
			err := scope.attempts.End(ctx, a.ID)
			done(err)
			if err != nil {
				// The cluster goes anyway, and with it what the attempt
				// left; the attempt is recorded as ended.
				s.Log.Warn("ending an attempt before deleting its cluster", "attempt", a.ID, "err", err)
			}
		}
		// Somebody else's (an exercise run, another server's learner):
		// refused as `svclab cluster delete` refuses it.
		if s.Owners != nil {
			if err := s.Owners.Busy(ctx, cmp.Or(s.Backend, "embedded"), name); err != nil {
				return err
			}
		}
		done := op.Start("Deleting cluster " + name)
		err := s.Clusters.Delete(ctx, name)
		if errors.Is(err, cluster.ErrNotFound) {
			err = nil
		}
		done(err)
		return err
	})
	http.Redirect(w, r, scope.operationURL(op.ID), http.StatusSeeOther)
}

// activeLister lists a learner's attempts that hold a cluster (running,
// or errored with the scenario still on it).
type activeLister interface {
	Active(ctx context.Context, learner string) ([]*Attempt, error)
}

// clustersPage lists the lab's clusters with the attempts on them and
// what can be done with each.
func (s *Server) clustersPage(w http.ResponseWriter, r *http.Request) {
	list, err := s.Clusters.List(r.Context())
	if err != nil {
		answerError(w, r, fmt.Errorf("the clusters could not be listed: %w", err), http.StatusInternalServerError)
		return
	}
	on := map[string][]*Attempt{}
	if al, ok := s.Attempts.(activeLister); ok {
		active, err := al.Active(r.Context(), s.learner(r))
		if err != nil {
			s.Log.Warn("listing the attempts for the clusters page", "err", err)
		}
		for _, a := range active {
			on[a.Cluster] = append(on[a.Cluster], a)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	var rows []web.ClusterRow
	for _, c := range list {
		row := web.ClusterRow{Summary: c, DeleteURL: "/clusters/" + c.Name + "/delete"}
		for _, a := range on[c.Name] {
			title := a.ScenarioID
			if s.Catalog != nil {
				if sc := s.Catalog.Get(a.ScenarioID); sc != nil {
					title = sc.Title
				}
			}
			row.Attempts = append(row.Attempts, web.ClusterAttempt{ID: a.ID, Scenario: a.ScenarioID, Title: title, State: a.State,
				Since: a.Started.UTC().Format("2006-01-02 15:04 UTC"), URL: "/scenarios/" + a.ScenarioID,
				EndURL: "/scenarios/" + a.ScenarioID + "/end", EndText: endText(c.Name).Text})
		}
		row.DeleteText = deleteText(c.Name, len(row.Attempts) > 0).Text
		rows = append(rows, row)
	}
	writeHTML(w, r, s, web.ClustersPage(rows))
}

// deleteCluster deletes a cluster from the Clusters page, ending the
// learner's attempt on it first.
func (s *Server) deleteCluster(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := cluster.ValidateName(name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := s.Clusters.Get(r.Context(), name); errors.Is(err, cluster.ErrNotFound) {
		http.Error(w, fmt.Sprintf("There is no cluster %s (any more): see the Clusters page.", name), http.StatusNotFound)
		return
	}
	var on *Attempt
	if al, ok := s.Attempts.(activeLister); ok {
		active, _ := al.Active(r.Context(), s.learner(r))
		for _, a := range active {
			if a.Cluster == name {
				on = a
			}
		}
	}
	c := deleteText(name, on != nil)
	c.Cancel = "/clusters"
	if !s.confirmed(w, r, c) {
		return
	}
	s.startDelete(w, r, name, on, "/clusters")
}

// timeLeft is when the scope's lab or exam ends (zero: no limit).
func (sc *scope) timeLeft() time.Time {
	if sc.deadline == nil {
		return time.Time{}
	}
	return sc.deadline()
}
