"""What both sides of the gateway's HTTP share, defined once: the request and answer shapes
(``shapes``), the error body and the refusal it becomes on the client (``remote_error``), the
exit codes (``exit_codes``) and the classification of typed errors into them (``errors``), and
the store's figures in Prometheus's text format (``metrics_text``)."""
