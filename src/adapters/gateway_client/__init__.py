"""The command line's client of a gateway (docs/gateway.md, "The command line as a client"):
``remote.RemoteLifecycles`` asks a gateway the verbs the local ``Lifecycles`` offers."""
