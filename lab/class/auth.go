package class

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// Role is who is asking.
type Role string

const (
	Anonymous      Role = "anonymous"
	LearnerRole    Role = "learner"
	InstructorRole Role = "instructor"
)

// Principal is the person behind a request.
type Principal struct {
	Role    Role
	ClassID string
	// LearnerID is set for learners.
	LearnerID string
}

// Access is what a request does to a learner's lab.
type Access int

const (
	// Read: see the lab's panels, stream its events, watch its terminal.
	Read Access = iota
	// Write: type into the terminal, run checks, ask for hints, reset.
	Write
)

// Errors of authorization, matched with errors.Is; HTTPStatus maps them.
var (
	ErrUnauthenticated = errors.New("join the class first: open the join link your instructor gave you")
	ErrForbidden       = errors.New("forbidden")
)

// forbidden is a refusal with a message of its own; it matches
// ErrForbidden.
type forbidden string

func (f forbidden) Error() string        { return string(f) }
func (f forbidden) Is(target error) bool { return target == ErrForbidden }

const notYours = forbidden("this is not yours: you can only reach your own lab")

// Authenticate tells who holds token for class classID: the instructor
// (a live session of theirs, or the instructor token itself as a bearer,
// for scripts), one of its learners (a learner token of that class), or
// nobody.
func Authenticate(ctx context.Context, db *DB, c *Class, token string) (Principal, error) {
	anon := Principal{Role: Anonymous}
	switch {
	case strings.HasPrefix(token, InstructorTokenPrefix):
		if c.CheckInstructorToken(token) {
			return Principal{Role: InstructorRole, ClassID: c.ID}, nil
		}
		return anon, nil
	case strings.HasPrefix(token, SessionTokenPrefix):
		classID, err := db.InstructorSession(ctx, token)
		if errors.Is(err, ErrNotFound) || (err == nil && classID != c.ID) {
			return anon, nil
		}
		if err != nil {
			return anon, err
		}
		return Principal{Role: InstructorRole, ClassID: c.ID}, nil
	case strings.HasPrefix(token, LearnerTokenPrefix):
		l, err := db.LearnerByToken(ctx, token)
		if errors.Is(err, ErrNotFound) || (err == nil && l.ClassID != c.ID) {
			return anon, nil
		}
		if err != nil {
			return anon, err
		}
		return Principal{Role: LearnerRole, ClassID: l.ClassID, LearnerID: l.ID}, nil
	}
	return anon, nil
}

// Authorize decides whether p may reach learnerID's lab in class classID
// with access a. The HTTP layer calls it for every learner-scoped route
// and stream: a learner reaches their own lab only; the class's
// instructor reads every lab of the class (the board's drill-down and a
// read-only terminal) but does not type into them; anybody else is
// refused.
func Authorize(p Principal, classID, learnerID string, a Access) error {
	switch p.Role {
	case LearnerRole:
		if p.ClassID == classID && p.LearnerID != "" && p.LearnerID == learnerID {
			return nil
		}
		return notYours
	case InstructorRole:
		if p.ClassID != classID {
			return forbidden("you are not this class's instructor")
		}
		if a == Write {
			return forbidden("instructors watch learners' labs read-only: push a hint or a message instead, or reset the lab")
		}
		return nil
	}
	return ErrUnauthenticated
}

// AuthorizeInstructor decides whether p may act as class classID's
// instructor (the board, extend, reset, push, close).
func AuthorizeInstructor(p Principal, classID string) error {
	switch {
	case p.Role == InstructorRole && p.ClassID == classID:
		return nil
	case p.Role != InstructorRole && p.Role != LearnerRole:
		return ErrUnauthenticated
	}
	return forbidden("only the class's instructor can do this")
}

// HTTPStatus is the status code of an authorization error: 401 for
// ErrUnauthenticated, 403 for refusals, 200 for nil.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	}
	return http.StatusForbidden
}
