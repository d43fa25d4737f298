package handlers

import (
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// storeProblem maps the store's errors of short links to problems; what and id name the object a not-found error
// is about. Other errors are internal and returned as they are.
func storeProblem(err error, what, id string) error {
	var (
		slug     *store.SlugTakenError
		external *store.ExternalIDTakenError
	)
	switch {
	case errors.As(err, &slug):
		return newProblem(problem.SlugTaken, fmt.Sprintf("The slug %q is taken on %s.", slug.Slug, slug.Domain))
	case errors.As(err, &external):
		return newProblem(problem.ExternalIDTaken, fmt.Sprintf("Another link of this workspace has external_id %q.",
			external.ExternalID))
	case errors.Is(err, store.ErrNotFound):
		return newProblem(problem.NotFound, fmt.Sprintf("There is no %s %s in this workspace.", what, id))
	case errors.Is(err, store.ErrConflict):
		return newProblem(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}
