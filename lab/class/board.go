package class

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/class/stream"
	"github.com/svclab/svclab/lab/grade"
)

// CellState is where a learner is with a scenario.
type CellState string

const (
	NotStarted CellState = "not-started"
	Working    CellState = "working"
	// Passing: the last check run passed some checks, not all.
	Passing CellState = "passing"
	Solved  CellState = "solved"
)

// CheckResult is one check of a check run, as the board shows it.
type CheckResult struct {
	ID      string  `json:"id"`
	Weight  float64 `json:"weight"`
	Passed  bool    `json:"passed"`
	Message string  `json:"message"`
}

// CheckRun is the last check run of a learner on a scenario.
type CheckRun struct {
	At     time.Time `json:"at"`
	Score  float64   `json:"score"`
	Passed bool      `json:"passed"`
	// Text is the score as svclab writes scores (grade.FormatScore).
	Text    string        `json:"text"`
	Results []CheckResult `json:"results"`
}

// Cell is one learner × scenario of the board.
type Cell struct {
	Scenario  string    `json:"scenario"`
	State     CellState `json:"state"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	SolvedAt  time.Time `json:"solvedAt,omitzero"`
	// TimeSpent runs from the start to the solve (or to the snapshot).
	TimeSpent time.Duration `json:"timeSpent"`
	HintsUsed int           `json:"hintsUsed"`
	Checks    int           `json:"checks"`
	LastCheck *CheckRun     `json:"lastCheck,omitempty"`
}

// Row is one learner on the board.
type Row struct {
	Learner Learner `json:"learner"`
	// Lab is the learner's lab (State "" when they never asked for one).
	Lab   labs.Lab `json:"lab"`
	Cells []Cell   `json:"cells"`
}

// Snapshot is the whole board at one time.
type Snapshot struct {
	ClassID   string    `json:"classId"`
	Name      string    `json:"name"`
	Exam      bool      `json:"exam"`
	Scenarios []string  `json:"scenarios"`
	Rows      []Row     `json:"rows"`
	Messages  []Message `json:"messages"`
	At        time.Time `json:"at"`
}

// Message is a message or a hint the instructor pushed.
type Message struct {
	ID int64 `json:"id"`
	// To is the learner's id, "" for everyone.
	To   string `json:"to,omitempty"`
	Kind string `json:"kind"` // "message" or "hint"
	// Scenario is the scenario a hint is about.
	Scenario string    `json:"scenario,omitempty"`
	Body     string    `json:"body"`
	At       time.Time `json:"at"`
}

// UpdateKind is what an Update carries.
type UpdateKind string

const (
	UpdateLearner UpdateKind = "learner"
	UpdateCell    UpdateKind = "cell"
	UpdateLab     UpdateKind = "lab"
	UpdateMessage UpdateKind = "message"
	// UpdateLabEvent carries an event of the learner's lab (queue
	// position, warnings) for the learner's page.
	UpdateLabEvent UpdateKind = "lab-event"
)

// Update is one change of the board.
type Update struct {
	Kind UpdateKind `json:"kind"`
	// Learner is whose row changed; "" for a message to everyone.
	Learner  string      `json:"learner,omitempty"`
	Row      *Row        `json:"row,omitempty"`
	Cell     *Cell       `json:"cell,omitempty"`
	Lab      *labs.Lab   `json:"lab,omitempty"`
	LabEvent *labs.Event `json:"labEvent,omitempty"`
	Message  *Message    `json:"message,omitempty"`
}

// MaxMessage bounds a pushed message.
const MaxMessage = 4000

// Board is a class's live board: learners × scenarios, fed by the
// learners' attempts (Started, Checked, HintUsed) and their labs, with a
// change stream.
type Board struct {
	db    *DB
	class *Class
	now   func() time.Time

	mu      sync.Mutex
	order   []string
	rows    map[string]*Row
	updates stream.Broker[Update]
	// writes serialises each learner's changes while they are stored:
	// the database may retry for seconds, and nobody else (the board,
	// other learners) waits for that.
	writes sync.Map // learner id → *sync.Mutex
}

func newBoard(ctx context.Context, db *DB, c *Class, now func() time.Time) (*Board, error) {
	b := &Board{db: db, class: c, now: now, rows: map[string]*Row{}}
	learners, err := db.Learners(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	saved, err := db.Cells(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, l := range learners {
		r := b.addRow(l)
		for _, cell := range saved[l.ID] {
			if i := b.index(cell.Scenario); i >= 0 {
				r.Cells[i] = cell
			}
		}
	}
	return b, nil
}

func (b *Board) index(scenario string) int {
	for i, id := range b.class.Scenarios {
		if id == scenario {
			return i
		}
	}
	return -1
}

func (b *Board) addRow(l Learner) *Row {
	r := &Row{Learner: l, Cells: make([]Cell, len(b.class.Scenarios))}
	for i, id := range b.class.Scenarios {
		r.Cells[i] = Cell{Scenario: id, State: NotStarted}
	}
	b.rows[l.ID] = r
	b.order = append(b.order, l.ID)
	return r
}

// AddLearner puts a learner who just joined on the board.
func (b *Board) AddLearner(l Learner) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.rows[l.ID]; ok {
		return
	}
	r := b.addRow(l)
	b.publish(Update{Kind: UpdateLearner, Learner: l.ID, Row: b.rowCopy(r)})
}

// cell finds learner's cell of scenario.
func (b *Board) cell(learner, scenario string) (*Cell, error) {
	r := b.rows[learner]
	if r == nil {
		return nil, fmt.Errorf("learner %s is not in the class: %w", learner, ErrNotFound)
	}
	i := b.index(scenario)
	if i < 0 {
		return nil, fmt.Errorf("scenario %s is not one of the class's (%s)", scenario, strings.Join(b.class.Scenarios, ", "))
	}
	return &r.Cells[i], nil
}

// change applies fn to a cell, stores it and publishes it. The board's
// lock is not held while the cell is stored (a write may wait on a busy
// database); the learner's own lock keeps their changes in order.
func (b *Board) change(ctx context.Context, learner, scenario string, fn func(*Cell)) error {
	lk, _ := b.writes.LoadOrStore(learner, &sync.Mutex{})
	lk.(*sync.Mutex).Lock()
	defer lk.(*sync.Mutex).Unlock()
	b.mu.Lock()
	c, err := b.cell(learner, scenario)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	next := *c
	b.mu.Unlock()
	fn(&next)
	if err := b.db.saveCell(ctx, learner, next); err != nil {
		return err // the board shows what is stored
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, err = b.cell(learner, scenario); err != nil {
		return err
	}
	*c = next
	cc := b.cellCopy(*c)
	b.publish(Update{Kind: UpdateCell, Learner: learner, Cell: &cc})
	return nil
}

// Started records that learner started (or restarted) scenario.
func (b *Board) Started(ctx context.Context, learner, scenario string) error {
	now := b.now().UTC()
	return b.change(ctx, learner, scenario, func(c *Cell) {
		if c.State == NotStarted {
			c.State, c.StartedAt = Working, now
		}
	})
}

// Checked records a check run of learner on scenario.
func (b *Board) Checked(ctx context.Context, learner, scenario string, rep *grade.Report) error {
	if rep == nil {
		return errors.New("no report")
	}
	now := b.now().UTC()
	run := &CheckRun{At: now, Score: rep.Score, Passed: rep.Passed, Text: rep.ScoreText()}
	passed := 0
	for _, r := range rep.Results {
		run.Results = append(run.Results, CheckResult{ID: r.ID, Weight: r.Weight, Passed: r.Passed, Message: r.Message})
		if r.Passed {
			passed++
		}
	}
	return b.change(ctx, learner, scenario, func(c *Cell) {
		if c.StartedAt.IsZero() {
			c.StartedAt = now
		}
		c.Checks++
		c.LastCheck = run
		switch {
		case c.State == Solved:
			// Solved stays solved: the board shows progress, the last
			// check shows the present.
		case rep.Passed:
			c.State, c.SolvedAt = Solved, now
		case passed > 0:
			c.State = Passing
		default:
			c.State = Working
		}
	})
}

// HintUsed records that learner saw hint n (1-based) of scenario.
func (b *Board) HintUsed(ctx context.Context, learner, scenario string, n int) error {
	return b.change(ctx, learner, scenario, func(c *Cell) {
		c.HintsUsed = max(c.HintsUsed, n)
	})
}

// LabChanged shows a lab's new state (and, for its learner, the event).
func (b *Board) LabChanged(e labs.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[e.Learner]
	if r == nil {
		return
	}
	r.Lab = e.Lab
	lab, ev := e.Lab, e
	b.publish(Update{Kind: UpdateLab, Learner: e.Learner, Lab: &lab, LabEvent: &ev})
}

// Push sends a message (kind "message") or a hint (kind "hint", about
// scenario) to one learner (to: their id) or to everyone (to: "").
func (b *Board) Push(ctx context.Context, to, kind, scenario, body string) (Message, error) {
	body = strings.TrimSpace(body)
	switch {
	case body == "":
		return Message{}, errors.New("the message is empty")
	case len(body) > MaxMessage:
		return Message{}, fmt.Errorf("the message is %d characters long: keep it under %d", len(body), MaxMessage)
	case kind != "message" && kind != "hint":
		return Message{}, fmt.Errorf("unknown kind %q: message or hint", kind)
	case kind == "hint" && b.index(scenario) < 0:
		return Message{}, fmt.Errorf("a hint needs one of the class's scenarios (%s), not %q", strings.Join(b.class.Scenarios, ", "), scenario)
	}
	b.mu.Lock()
	known := to == "" || b.rows[to] != nil
	b.mu.Unlock()
	if !known {
		return Message{}, fmt.Errorf("learner %s is not in the class: %w", to, ErrNotFound)
	}
	m := Message{To: to, Kind: kind, Scenario: scenario, Body: body, At: b.now().UTC()}
	// Stored without the board's lock (see change).
	if err := b.db.addMessage(ctx, b.class.ID, &m); err != nil {
		return Message{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish(Update{Kind: UpdateMessage, Learner: to, Message: &m})
	return m, nil
}

// Snapshot is the board now.
func (b *Board) Snapshot(ctx context.Context) (Snapshot, error) {
	msgs, err := b.db.messages(ctx, b.class.ID, "")
	if err != nil {
		return Snapshot{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{ClassID: b.class.ID, Name: b.class.Name, Exam: b.class.Exam, Scenarios: b.class.Scenarios, Messages: msgs, At: b.now().UTC()}
	for _, id := range b.order {
		s.Rows = append(s.Rows, *b.rowCopy(b.rows[id]))
	}
	return s, nil
}

// LearnerSnapshot is the board as one learner may see it: their own row
// and the messages for them.
func (b *Board) LearnerSnapshot(ctx context.Context, learner string) (Snapshot, error) {
	msgs, err := b.db.messages(ctx, b.class.ID, learner)
	if err != nil {
		return Snapshot{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[learner]
	if r == nil {
		return Snapshot{}, fmt.Errorf("learner %s is not in the class: %w", learner, ErrNotFound)
	}
	return Snapshot{ClassID: b.class.ID, Name: b.class.Name, Exam: b.class.Exam, Scenarios: b.class.Scenarios, Rows: []Row{*b.rowCopy(r)}, Messages: msgs, At: b.now().UTC()}, nil
}

// subscribe returns the stream of every update (learner "") or of one
// learner's: their row, their lab, and the messages to them or to all.
func (b *Board) subscribe(learner string, buffer int) *stream.Subscription[Update] {
	var filter func(Update) bool
	if learner != "" {
		filter = func(u Update) bool {
			return u.Learner == learner || (u.Kind == UpdateMessage && u.Learner == "")
		}
	}
	return b.updates.Subscribe(buffer, filter)
}

func (b *Board) publish(u Update) { b.updates.Publish(u) }

func (b *Board) cellCopy(c Cell) Cell {
	if c.State != NotStarted && !c.StartedAt.IsZero() {
		end := c.SolvedAt
		if end.IsZero() {
			end = b.now()
		}
		c.TimeSpent = end.Sub(c.StartedAt).Round(time.Second)
	}
	if c.LastCheck != nil {
		lc := *c.LastCheck
		lc.Results = append([]CheckResult(nil), lc.Results...)
		c.LastCheck = &lc
	}
	return c
}

func (b *Board) rowCopy(r *Row) *Row {
	out := &Row{Learner: r.Learner, Lab: r.Lab, Cells: make([]Cell, len(r.Cells))}
	for i, c := range r.Cells {
		out.Cells[i] = b.cellCopy(c)
	}
	return out
}

// learnerName is learner's display name ("" when unknown).
// LearnerName is the display name of learner ("" when unknown).
func (b *Board) LearnerName(learner string) string { return b.learnerName(learner) }

func (b *Board) learnerName(learner string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.rows[learner]; r != nil {
		return r.Learner.Name
	}
	return ""
}

// lastChecks are learner's last check runs by scenario.
func (b *Board) lastChecks(learner string) map[string]*CheckRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]*CheckRun{}
	if r := b.rows[learner]; r != nil {
		for _, c := range r.Cells {
			if c.LastCheck != nil {
				out[c.Scenario] = b.cellCopy(c).LastCheck
			}
		}
	}
	return out
}
