package attempt

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// blockingObjects answers no read until the context ends, like an API
// server that hangs.
type blockingObjects struct{}

func (blockingObjects) Get(ctx context.Context, _ scenario.ObjectRef) ([]*unstructured.Unstructured, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The manager tells a check that timed out by lab/grade's wording: keep
// the two in step.
func TestGradeTimeoutWording(t *testing.T) {
	g := &grade.Grader{Cluster: clustertest.NewCluster("lab"), Objects: blockingObjects{}, CheckTimeout: 20 * time.Millisecond}
	c := &scenario.Check{ID: "slow", Description: "d", Weight: 1, API: &scenario.APICheck{
		Object: scenario.ObjectRef{Kind: "Service", Namespace: "shop", Name: "web"}, JSONPath: "{.spec.selector.app}", Op: scenario.OpEquals, Value: "web"}}
	r := g.Check(context.Background(), c, nil)
	if r.Passed || !strings.Contains(r.Error, timeoutMarker) {
		t.Fatalf("result of a check that timed out: %+v", r)
	}
}
