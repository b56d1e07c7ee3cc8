package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// junitSuites is what the suite writes to junit_01.xml (Ginkgo's JUnit
// report: one testsuite, a testcase per spec and per suite node).
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time  float64     `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
	Skipped *junitMessage `xml:"skipped"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// suiteNode matches the testcases Ginkgo writes for the suite's own nodes
// ("[SynchronizedBeforeSuite]", "[ReportAfterSuite] Kubernetes e2e suite
// report"), which are not specs.
var suiteNode = regexp.MustCompile(`^\[(SynchronizedBeforeSuite|BeforeSuite|SynchronizedAfterSuite|AfterSuite|ReportBeforeSuite|ReportAfterSuite|DeferCleanup \(Suite\))\]`)

// Spec is one spec of a run.
type Spec struct {
	Name string
	// State is Ginkgo's: passed, failed, skipped, panicked, timedout,
	// interrupted, aborted, pending.
	State    string
	Duration time.Duration
	// Message is the failure's text, when it failed.
	Message string
}

// Reason is the failure's first line ("[FAILED] service is not reachable
// …").
func (s Spec) Reason() string {
	msg := strings.TrimSpace(s.Message)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return msg
}

// Passed says whether the spec passed.
func (s Spec) Passed() bool { return s.State == "passed" }

// readJUnit reads a JUnit report into the specs that ran (skipped ones
// are counted, not listed) and the suite nodes that failed.
func readJUnit(path string) (ran []Spec, skipped int, setup []Spec, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, nil, err
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, 0, nil, fmt.Errorf("reading the suite's JUnit report %s: %w", path, err)
	}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			sp := Spec{Name: strings.TrimPrefix(c.Name, "[It] "), State: c.Status, Duration: time.Duration(c.Time * float64(time.Second))}
			if sp.State == "" {
				sp.State = "passed"
				switch {
				case c.Failure != nil:
					sp.State = "failed"
				case c.Error != nil:
					sp.State = "failed"
				case c.Skipped != nil:
					sp.State = "skipped"
				}
			}
			for _, m := range []*junitMessage{c.Failure, c.Error} {
				if m != nil && sp.Message == "" {
					sp.Message = strings.TrimSpace(m.Message + "\n" + m.Text)
				}
			}
			switch {
			case suiteNode.MatchString(c.Name):
				if !sp.Passed() && sp.State != "skipped" {
					setup = append(setup, sp)
				}
			case sp.State == "skipped" || sp.State == "pending":
				skipped++
			default:
				ran = append(ran, sp)
			}
		}
	}
	return ran, skipped, setup, nil
}
