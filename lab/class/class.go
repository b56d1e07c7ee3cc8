package class

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/scenario"
)

// Spec is what an instructor asks for when creating a class.
type Spec struct {
	Name string `json:"name"`
	// Scenarios are the ids of the class's scenarios (its track, or the
	// exam's tasks), in order.
	Scenarios []string `json:"scenarios"`
	// Capacity is the most labs that run at once; more learners queue.
	Capacity int `json:"capacity"`
	// Seats is the most learners who can join.
	Seats int `json:"seats"`
	// PoolSize is the number of warm clusters kept ready.
	PoolSize int `json:"poolSize"`
	// TimeLimit ends a learner's lab this long after it started (and is
	// the exam's duration in exam mode).
	TimeLimit time.Duration `json:"timeLimit"`
	// IdleTimeout reclaims a lab nobody used for this long.
	IdleTimeout time.Duration `json:"idleTimeout"`
	// CodeTTL is how long the join code works.
	CodeTTL time.Duration `json:"codeTTL"`
	// Exam makes the class an exam: the scenarios are timed tasks with
	// Weights (default: equal).
	Exam    bool               `json:"exam"`
	Weights map[string]float64 `json:"weights,omitempty"`
	// Webhook, when set, receives an event per learner state change
	// (see WebhookEvent), signed with WebhookSecret, which CreateClass
	// draws and "svclab class create" prints once.
	Webhook       string `json:"webhook,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// ProxyMode is the kube-proxy mode of the class's labs, in which the
	// scenarios that name no mode run (nftables or iptables). A scenario
	// written for the other mode switches its lab for its run. Default:
	// iptables when every scenario of the class is written for it, else
	// nftables.
	ProxyMode string `json:"proxyMode,omitempty"`
}

// Defaults of a Spec.
const (
	DefaultCapacity    = 10
	DefaultSeats       = 100
	DefaultPoolSize    = 1
	DefaultTimeLimit   = 2 * time.Hour
	DefaultIdleTimeout = 20 * time.Minute
	DefaultCodeTTL     = 24 * time.Hour
	MaxNameLength      = 60
)

// Normalize fills in defaults and checks the spec against the scenarios
// in cat. It returns the cluster shape that fits every scenario.
func (s *Spec) Normalize(cat *scenario.Catalog) (labs.Shape, error) {
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" {
		return labs.Shape{}, errors.New("the class needs a name: --name, for example --name cka-week-3")
	}
	if utf8.RuneCountInString(s.Name) > MaxNameLength || strings.IndexFunc(s.Name, unicode.IsControl) >= 0 {
		return labs.Shape{}, fmt.Errorf("class name %q: use at most %d printable characters", s.Name, MaxNameLength)
	}
	if len(s.Scenarios) == 0 {
		return labs.Shape{}, fmt.Errorf("the class needs scenarios: --scenarios ID,ID (the scenarios are %s)", strings.Join(cat.IDs(), ", "))
	}
	seen := map[string]bool{}
	var shape labs.Shape
	allIPTables := true
	for _, id := range s.Scenarios {
		sc := cat.Get(id)
		if sc == nil {
			return labs.Shape{}, fmt.Errorf("no scenario %q: the scenarios are %s (svclab scenario list)", id, strings.Join(cat.IDs(), ", "))
		}
		if seen[id] {
			return labs.Shape{}, fmt.Errorf("scenario %s is listed twice", id)
		}
		seen[id] = true
		shape.Workers = max(shape.Workers, sc.Cluster.Nodes-1)
		allIPTables = allIPTables && sc.Cluster.ProxyMode == scenario.ProxyModeIPTables
		for node, l := range sc.Cluster.NodeLabels {
			if shape.NodeLabels == nil {
				shape.NodeLabels = map[string]map[string]string{}
			}
			if shape.NodeLabels[node] == nil {
				shape.NodeLabels[node] = map[string]string{}
			}
			for k, v := range l {
				if old, ok := shape.NodeLabels[node][k]; ok && old != v {
					return labs.Shape{}, fmt.Errorf("scenario %s needs node %s labelled %s=%s, another scenario of the class %s=%s: make two classes", id, node, k, v, k, old)
				}
				shape.NodeLabels[node][k] = v
			}
		}
	}
	switch s.ProxyMode {
	case "":
		s.ProxyMode = scenario.ProxyModeNFTables
		if allIPTables {
			s.ProxyMode = scenario.ProxyModeIPTables
		}
	case scenario.ProxyModeNFTables, scenario.ProxyModeIPTables:
	default:
		return labs.Shape{}, fmt.Errorf("--proxy-mode %q: give %s or %s", s.ProxyMode, scenario.ProxyModeNFTables, scenario.ProxyModeIPTables)
	}
	shape.ProxyMode = s.ProxyMode
	if s.Capacity == 0 {
		s.Capacity = DefaultCapacity
	}
	if s.Seats == 0 {
		s.Seats = DefaultSeats
	}
	if s.TimeLimit == 0 {
		s.TimeLimit = DefaultTimeLimit
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = DefaultIdleTimeout
	}
	if s.CodeTTL == 0 {
		s.CodeTTL = DefaultCodeTTL
	}
	if s.Webhook != "" {
		if err := ValidateWebhook(s.Webhook); err != nil {
			return labs.Shape{}, err
		}
	}
	switch {
	case s.Capacity < 1:
		return labs.Shape{}, fmt.Errorf("--capacity %d: a class needs room for at least one lab", s.Capacity)
	case s.Seats < 1:
		return labs.Shape{}, fmt.Errorf("--seats %d: a class needs at least one seat", s.Seats)
	case s.PoolSize < 0 || s.PoolSize > s.Capacity:
		return labs.Shape{}, fmt.Errorf("--warm-pool %d: use 0 to %d (the capacity)", s.PoolSize, s.Capacity)
	case s.TimeLimit < time.Minute:
		return labs.Shape{}, fmt.Errorf("--time-limit %s: use at least 1m", s.TimeLimit)
	case s.IdleTimeout < time.Minute:
		return labs.Shape{}, fmt.Errorf("--idle-timeout %s: use at least 1m", s.IdleTimeout)
	case s.CodeTTL < time.Minute:
		return labs.Shape{}, fmt.Errorf("--code-expires %s: use at least 1m", s.CodeTTL)
	}
	if !s.Exam {
		if len(s.Weights) > 0 {
			return labs.Shape{}, errors.New("--weights is for exams: add --exam")
		}
		return shape, nil
	}
	for _, id := range slices.Sorted(maps.Keys(s.Weights)) {
		if !seen[id] {
			return labs.Shape{}, fmt.Errorf("--weights names %s, which is not one of the class's scenarios (%s)", id, strings.Join(s.Scenarios, ", "))
		}
		if w := s.Weights[id]; w <= 0 {
			return labs.Shape{}, fmt.Errorf("--weights %s=%g: a weight must be positive", id, w)
		}
	}
	if s.Weights == nil {
		s.Weights = map[string]float64{}
	}
	for _, id := range s.Scenarios {
		if _, ok := s.Weights[id]; !ok {
			s.Weights[id] = 1
		}
	}
	return shape, nil
}

// ParseWeights parses ID=WEIGHT,ID=WEIGHT.
func ParseWeights(flags []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, f := range flags {
		id, w, ok := strings.Cut(f, "=")
		var v float64
		if _, err := fmt.Sscanf(w, "%g", &v); !ok || err != nil || id == "" {
			return nil, fmt.Errorf("--weights %q: use SCENARIO=WEIGHT, for example selector-typo=30", f)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("--weights names %s twice", id)
		}
		out[id] = v
	}
	return out, nil
}

// Class is a class as stored.
type Class struct {
	ID string `json:"id"`
	Spec
	JoinCode      string    `json:"joinCode"`
	CodeExpiresAt time.Time `json:"codeExpiresAt"`
	CreatedAt     time.Time `json:"createdAt"`
	ClosedAt      time.Time `json:"closedAt,omitzero"`
	tokenHash     string
}

// Open tells whether the class has not been closed.
func (c *Class) Open() bool { return c.ClosedAt.IsZero() }

// ClusterPrefix starts the names of the class's clusters.
func (c *Class) ClusterPrefix() string { return "c" + c.ID }

// CheckInstructorToken tells whether token is the class's instructor
// token, in constant time.
func (c *Class) CheckInstructorToken(token string) bool {
	return tokenMatches(c.tokenHash, token)
}

// Learner is someone who joined a class. There are no accounts: the
// learner holds a token (in a cookie) that says who they are.
type Learner struct {
	// ID is unique across classes; lab/store knows the learner by it.
	ID       string    `json:"id"`
	ClassID  string    `json:"classId"`
	Name     string    `json:"name"`
	JoinedAt time.Time `json:"joinedAt"`
}

// Errors joining a class, matched with errors.Is. Their messages are for
// the learner.
var (
	ErrBadCode     = errors.New("that join code is not valid: check it with your instructor")
	ErrCodeExpired = errors.New("that join code has expired: ask your instructor for a new one")
	ErrClassClosed = errors.New("this class has ended")
	ErrClassFull   = errors.New("this class is full: every seat is taken; ask your instructor")
	ErrNameTaken   = errors.New("someone in this class already uses that name: pick another")
	ErrNotFound    = errors.New("not found")
	// ErrBadToken refuses a sign-in with a token that is not the class's.
	ErrBadToken = errors.New("that is not this class's instructor token")
	// ErrInvalid matches the other refusals of a join whose message is
	// written for the learner (a bad name, a class not served here).
	ErrInvalid = errors.New("invalid")
)

// refusal is a refusal written for the learner; it matches ErrInvalid.
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == ErrInvalid }

// MaxLearnerName bounds display names.
const MaxLearnerName = 40

// CleanName checks and tidies a learner's display name.
func CleanName(name string) (string, error) {
	name = strings.Join(strings.Fields(name), " ")
	switch {
	case name == "":
		return "", refusal("enter a name so your instructor knows who you are")
	case utf8.RuneCountInString(name) > MaxLearnerName:
		return "", refusal(fmt.Sprintf("use a name of at most %d characters", MaxLearnerName))
	case !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return "", refusal("use letters, digits and punctuation in your name")
	}
	return name, nil
}

// nameKey is what two names must not share within a class.
func nameKey(name string) string { return strings.ToLower(name) }

const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" // no 0/O, 1/I

// newJoinCode is 8 characters shown as XXXX-XXXX (40 bits).
func newJoinCode() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:4]) + "-" + string(b[4:])
}

// NormalizeCode accepts a join code as people type it: any case, with or
// without the dash, with spaces.
func NormalizeCode(code string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(code) {
		if r == '-' || unicode.IsSpace(r) {
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) != 8 {
		return s
	}
	return s[:4] + "-" + s[4:]
}

// newID is a random id of n lower-case letters and digits, starting with
// a letter.
func newID(n int) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		if i == 0 {
			b[i] = alpha[int(b[i])%26]
			continue
		}
		b[i] = alpha[int(b[i])%len(alpha)]
	}
	return string(b)
}

// newToken is a secret: prefix and 160 random bits.
func newToken(prefix string) string {
	b := make([]byte, 20)
	rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// Token prefixes tell the kinds apart (and make leaked tokens easy to
// find in logs and repositories).
const (
	InstructorTokenPrefix = "svi_"
	LearnerTokenPrefix    = "svl_"
	// SessionTokenPrefix starts an instructor's session token (what the
	// sign-in cookie holds; never the instructor token itself).
	SessionTokenPrefix = "svs_"
)

// hashToken is what is stored of a token.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func tokenMatches(hash, token string) bool {
	got := hashToken(token)
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1 && hash != ""
}
