"""``slurm-image serve``: the gateway every user of a site asks and one service account imports
for (docs/gateway.md). A second front end over the same use cases as the command line
(what ``site`` declares it calls, acting for each requester, which the composition root hands
it), adding none of its own rules: ``app`` translates HTTP to the verbs, with what the routes
share in ``state``, ``who`` says who is asking, ``http_errors`` maps the product's errors to
statuses, ``peer`` reads a unix socket's peer credentials, ``serve`` runs the listeners and
settles the store, ``page_routes`` serves the catalog's ``pages``.
"""
