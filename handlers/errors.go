package handlers

import (
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// storeProblem maps the store's errors to problems for the objects whose handlers read the store (webhook endpoints,
// deliveries, events; the links service maps its own). what and id name the object a not-found error is about. Other
// errors are internal and returned as they are.
func storeProblem(err error, what, id string) error {
	var (
		disabled *store.EndpointDisabledError
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
	case errors.Is(err, store.ErrDeliveryInFlight):
		return newProblem(problem.DeliveryInFlight, "The delivery is being attempted right now; retry when the attempt is recorded (GET the delivery to see it).")
	case errors.Is(err, store.ErrNotFound):
		return newProblem(problem.NotFound, fmt.Sprintf("There is no %s %s in this workspace.", what, id))
	case errors.Is(err, store.ErrConflict):
		return newProblem(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}
