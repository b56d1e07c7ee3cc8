package scenario

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/proxier/config"
)

// Judge compares a field's value, as config.Field returns it (found false
// for an unset field, which compares as empty text), with k.Value:
// durations as durations (1000ms equals 1s), numbers as numbers, anything
// else as text. It returns whether the field passes and the value as
// shown to the learner.
func (k *KubeProxyConfigCheck) Judge(v any, found bool) (ok bool, shown string, err error) {
	want := strings.TrimSpace(string(k.Value))
	var got string
	switch v := v.(type) {
	case nil:
	case string:
		got = v
	case float64:
		got = strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		got = strconv.FormatBool(v)
	default:
		return false, "", fmt.Errorf("%s is not a single value", k.Field)
	}
	if !found {
		got = ""
	}
	_, number := v.(float64)
	var order int
	if gd, err1 := time.ParseDuration(got); err1 == nil && !number {
		wd, err := time.ParseDuration(want)
		if err != nil {
			return false, got, fmt.Errorf("%s is a duration and %q is not", k.Field, want)
		}
		order = cmp.Compare(gd, wd)
	} else if number && found {
		gn, _ := strconv.ParseFloat(got, 64)
		wn, err := strconv.ParseFloat(want, 64)
		if err != nil {
			return false, got, fmt.Errorf("%s is a number and %q is not", k.Field, want)
		}
		order = cmp.Compare(gn, wn)
	} else {
		if k.Op == OpAtMost || k.Op == OpAtLeast {
			return false, got, fmt.Errorf("%s is %q, neither a duration nor a number: %s cannot compare it", k.Field, got, k.Op)
		}
		if got != want {
			order = 1 // text has equality, no order
		}
	}
	switch k.Op {
	case OpEquals:
		return order == 0, got, nil
	case OpNotEquals:
		return order != 0, got, nil
	case OpAtMost:
		return order <= 0, got, nil
	case OpAtLeast:
		return order >= 0, got, nil
	}
	return false, got, fmt.Errorf("unknown operator %q", k.Op)
}

// kubeProxyConfig checks a kubeProxyConfig check: its field is one of
// KubeProxyConfiguration's, and atMost and atLeast have a duration or a
// number to compare with.
func (v *validator) kubeProxyConfig(p string, k *KubeProxyConfigCheck) {
	if err := config.CheckField(k.Field); err != nil {
		v.bad(p+".field", "%v", err)
	}
	if k.Op != OpAtMost && k.Op != OpAtLeast {
		return
	}
	want := strings.TrimSpace(string(k.Value))
	_, errD := time.ParseDuration(want)
	_, errN := strconv.ParseFloat(want, 64)
	if errD != nil && errN != nil {
		v.bad(p+".value", "%s needs a duration (such as 1s) or a number, not %q", k.Op, want)
	}
}
