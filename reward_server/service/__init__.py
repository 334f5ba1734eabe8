"""The HTTP service: the app and its routes, settings, request and response schemas, metrics,
connection limits, the scorer of whole completions, and the verification pool that runs the
checker's symbolic step (``reward_server.checker``) in killable worker processes."""
