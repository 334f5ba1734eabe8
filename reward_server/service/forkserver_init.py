"""Imported only by the multiprocessing forkserver (``set_forkserver_preload`` in pool.py).

Three jobs, done once in the forkserver so that every worker forked from it inherits them:

* Warm sympy and the answer grammar (``symbolic.warm_up``): cold, the first checks of a new worker
  take 100-300 ms each; forked from a warm forkserver, a fresh or replacement worker is fast at
  once, which keeps tail latency low after a worker was killed.
* Die with the server. Workers are children of the forkserver, not of the server, and the
  forkserver lives as long as any worker holds its "alive" pipe — so after a SIGKILL of the
  server, a busy worker and the forkserver would keep each other alive forever. Asking Linux to
  kill the forkserver when the server dies breaks that cycle: the workers' own death signal (set
  in ``pool._worker_main``) then fires. The server starts the forkserver from its event-loop
  thread (``VerifierPool.start``) because the death signal follows the thread that forked it.
* Outlast a stop signal sent to the server's whole process group (below).
"""

import gc

from reward_server.checker.symbolic import warm_up
from reward_server.service.pool import die_with_parent, ignore_stop_signals

# A stop signal sent to the whole process group (systemd, Slurm, `kill -- -PGID`, Ctrl-C) must
# not end the forkserver before the server: the pool would start a new one to replace workers,
# and it would outlive the server. It ends when the server does (its "alive" pipe closes). The
# pool starts it with these signals blocked (``pool.stop_signals_blocked``), so the imports
# above, seconds on a busy machine, cannot be cut by one either.
ignore_stop_signals()
die_with_parent()
warm_up()
# Everything imported and cached so far lives as long as the workers: keep it out of their
# garbage collections (which would otherwise scan, and copy-on-write fault, the whole
# inherited heap), as the Python docs advise for pre-fork servers.
gc.freeze()
