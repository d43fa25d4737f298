package handlers

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
)

// admitInstances decides on a request of a key limited to some instances (apikey.Key.Limited), after its scopes:
// an instance it does not reach, named in the path, is another workspace's to it — 404 not_found as the messaging
// service answers for those, whatever the route under /api/v1/instances/{instance_id} — and it creates no
// instance. The lists and event filters it reads are narrowed where they are answered (ListInstances, ListEvents,
// GetEvent, the event stream, webhook endpoints).
func admitInstances(in *openapi3filter.AuthenticationInput, key apikey.Key, op *operation) *Problem {
	if !key.Limited() {
		return nil
	}
	if id, ok := in.RequestValidationInput.PathParams["instance_id"]; ok && !key.Reaches(id) {
		return newProblem(problem.NotFound, channels.InstanceNotFound(id).Detail)
	}
	if op != nil && op.ID == "createInstance" {
		return newProblem(problem.KeyLimitedToInstances, fmt.Sprintf("This API key is limited to %d instance(s) of "+
			"the workspace, so it cannot create another; use a key that reaches every instance.", len(key.InstanceIDs)))
	}
	return nil
}

// keyInstances applies a limited key's instances to an instance filter of events (a webhook endpoint's, a stream's):
// none asked for is the key's instances, and one the key does not reach is refused as not in the workspace, with
// at(i) locating it. Other keys' filters pass unchanged.
func keyInstances(key apikey.Key, ids []string, at func(i int) problem.Field) ([]string, error) {
	if !key.Limited() {
		return ids, nil
	}
	if len(ids) == 0 {
		return append([]string{}, key.InstanceIDs...), nil
	}
	var fields []problem.Field
	for i, id := range ids {
		if !key.Reaches(id) {
			f := at(i)
			f.Detail = fmt.Sprintf("there is no instance %s in this workspace", id)
			fields = append(fields, f)
		}
	}
	if len(fields) > 0 {
		e := problem.Errorf(problem.ReferenceNotFound, "instance_ids names %d instance(s) that are not in this workspace.", len(fields))
		e.Fields = fields
		return nil, e
	}
	return ids, nil
}

// bodyInstance locates the i-th instance of a body's instance_ids.
func bodyInstance(i int) problem.Field {
	return problem.Field{Pointer: fmt.Sprintf("/instance_ids/%d", i)}
}

// queryInstances locates an instance of the instance_ids parameter.
func queryInstances(int) problem.Field { return problem.Field{Parameter: "instance_ids"} }
