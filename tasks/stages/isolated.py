"""Run a pack-scope stage (resolve, publish) in a child process.

The reduce steps see the whole pack: entity resolution holds every extraction, publish
every page's record and the pack's tables. On the threads runner they ran inside the
build's process, whose peak memory then grew with the pack (1.34x from 2,000 to 20,000
pages, all of it in resolve and publish). In a child process their memory is returned to
the system when they end, and the driver's peak stays what the shard stages need. On a
Dask cluster they already run in a worker process, so the flow asks for this only on
in-process runners (see flows.build).

The stage, its context and inputs (small records) go to the child as a pickle; its
result, or the exception it raised (GuardError, PublishError, StoreError, ...), comes
back the same way, so the caller cannot tell the difference. The child's log lines are
passed on to the run logger.
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from tasks.stages.common import BuildContext, log

TIMEOUT_S = 6 * 3600
_FAILED = 3  # the child's exit code when the stage raised (its exception is pickled)


class IsolatedStageError(RuntimeError):
    """The child process died without reporting a result or an exception."""


def run(name: str, ctx: BuildContext, inputs: dict):
    """`tasks.stages.get(name).run(ctx, None, inputs)` in a child process."""
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=ctx.work.pack_dir) as tmp:
        request, reply = Path(tmp) / "request.pkl", Path(tmp) / "reply.pkl"
        request.write_bytes(pickle.dumps((name, ctx, inputs)))
        proc = subprocess.Popen([sys.executable, "-m", "tasks.stages.isolated", str(request),
                                 str(reply)], stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:  # relay as it comes: progress stays visible
            level, _, message = line.rstrip("\n").partition(" ")
            log.log(logging.getLevelName(level) if level.isupper() else logging.INFO,
                    message if level.isupper() else line.rstrip("\n"))
        code = proc.wait(timeout=TIMEOUT_S)
        if reply.is_file():
            outcome = pickle.loads(reply.read_bytes())
            if code == _FAILED and isinstance(outcome, BaseException):
                raise outcome
            if code == 0:
                return outcome
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise IsolatedStageError(f"the {name} step's process {how} without a result")


def _child(request: Path, reply: Path) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s",
                        stream=sys.stderr)
    from tasks import stages

    name, ctx, inputs = pickle.loads(request.read_bytes())
    try:
        result = stages.get(name).run(ctx, None, inputs)
    except Exception as exc:  # handed to the parent, which raises it as its own
        try:
            data = pickle.dumps(exc)
            pickle.loads(data)
        except Exception:  # an exception that cannot travel: keep its type and message
            data = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
        reply.write_bytes(data)
        return _FAILED
    reply.write_bytes(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(Path(sys.argv[1]), Path(sys.argv[2])))
