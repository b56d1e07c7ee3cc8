package attempt

import (
	"context"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// regexpLine tells whether a line of out matches expr.
func regexpLine(out, expr string) bool {
	re := regexp.MustCompile(expr)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

func waitNamespaceGone(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
