-- A route's attempts are listed by route (GET …/messages?route_id=).
CREATE INDEX messages_route ON messages (route_id) WHERE route_id IS NOT NULL;
