package handlers

import (
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// storeProblem maps the store's errors to problems: the one table for every object of the API (links, webhook
// endpoints, deliveries, events). what and id name the object a not-found error is about. Other errors are
// internal and returned as they are.
func storeProblem(err error, what, id string) error {
	var (
		disabled *store.EndpointDisabledError
		slug     *store.SlugTakenError
		external *store.ExternalIDTakenError
	)
	switch {
	case errors.As(err, &disabled):
		why := "Switchboard disabled this endpoint"
		switch disabled.Reason {
		case "gone":
			why = "This endpoint was disabled because its receiver answered 410 Gone"
		case "failing":
			why = "This endpoint was disabled because its deliveries kept failing without a success"
		}
		return newProblem(problem.WebhookDisabled, fmt.Sprintf("%s. Enable it with POST /api/v1/webhooks/%s/enable "+
			"(with recover_since to send what it missed).", why, disabled.EndpointID))
	case errors.As(err, &slug):
		return newProblem(problem.SlugTaken, fmt.Sprintf("The slug %q is taken on %s.", slug.Slug, slug.Domain))
	case errors.As(err, &external):
		return newProblem(problem.ExternalIDTaken, fmt.Sprintf("Another link of this workspace has external_id %q.",
			external.ExternalID))
	case errors.Is(err, store.ErrDeliveryInFlight):
		return newProblem(problem.DeliveryInFlight, "The delivery is being attempted right now; retry when the attempt is recorded (GET the delivery to see it).")
	case errors.Is(err, store.ErrNotFound):
		return newProblem(problem.NotFound, fmt.Sprintf("There is no %s %s in this workspace.", what, id))
	case errors.Is(err, store.ErrConflict):
		return newProblem(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}
