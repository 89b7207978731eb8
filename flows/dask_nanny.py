"""The Nanny of the build's local Dask workers (flows/runners.py `local_cluster_kwargs`).

distributed's Nanny gives its worker process 4 s (0.8 x 5) to exit when the cluster
closes, then kills it with "Worker process still alive after 4.0 seconds, killing". A
worker that has run the build's stages needs 2-6 s on a loaded machine: Prefect sends its
last events and the interpreter tears down polars, ONNX Runtime and the rest. So the
cluster's workers get WORKER_CLOSE_TIMEOUT_S; a hung worker is still killed after it.
Imported only when a local Dask cluster is asked for (it imports distributed).
"""

from __future__ import annotations

from distributed import Nanny

WORKER_CLOSE_TIMEOUT_S = 60.0


class GracefulNanny(Nanny):
    """A Nanny whose close waits WORKER_CLOSE_TIMEOUT_S (or longer if asked) for its worker."""

    async def close(self, timeout: float = WORKER_CLOSE_TIMEOUT_S, reason: str = "nanny-close"):
        return await super().close(timeout=max(timeout, WORKER_CLOSE_TIMEOUT_S), reason=reason)
