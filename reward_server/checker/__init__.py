"""The checker: an answer and its reference read once (``reading``, ``sentence``, ``values``,
``normalize`` and ``notation`` under it), compared (``compare``, and ``symbolic`` in the
verification workers) and decided (``decide``). No HTTP, no process pool: the service
(``reward_server.service``) calls it."""
