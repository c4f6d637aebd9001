"""Output that survives its reader going away.

When whoever reads radt-ext's stdout or stderr closes the pipe (`radt-ext listeners | head -1`, a
parent that stopped reading, a closed terminal), a write raises BrokenPipeError. A monitor that
is flushing a run must not die of that, nor print a traceback at interpreter exit. `tolerate()`
wraps sys.stdout and sys.stderr so that such a write is dropped and the stream is pointed at
/dev/null from then on; a stream that was closed before the process started (`>&-`) becomes
/dev/null at once.
"""
from __future__ import annotations

import os
import sys

GONE = (BrokenPipeError, ConnectionResetError, ValueError)  # ValueError: write to a closed file


class TolerantStream:
    """A text stream's stand-in; everything but write/flush goes to the stream itself."""

    def __init__(self, stream):
        self._stream = stream
        self.gone = False

    def _lost(self) -> None:
        self.gone = True
        try:  # the original object may still hold buffered text; let it drain into /dev/null at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except GONE:
                self._lost()
            except OSError as exc:
                if exc.errno not in (32, 9):  # EPIPE, EBADF
                    raise
                self._lost()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except GONE:
                self._lost()
            except OSError as exc:
                if exc.errno not in (32, 9):
                    raise
                self._lost()

    def isatty(self) -> bool:
        return not self.gone and self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name):  # encoding, errors, ...
        if name == "buffer":  # writing bytes past this wrapper would bring the error back
            raise AttributeError(name)
        return getattr(self._stream, name)


def tolerate() -> None:
    """Make this process's sys.stdout and sys.stderr tolerant of a reader that went away."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, TolerantStream):
            continue
        if stream is None:  # the descriptor was closed when the process started
            setattr(sys, name, open(os.devnull, "w"))
            continue
        setattr(sys, name, TolerantStream(stream))


def say(message: str, err: bool = True) -> None:
    """One line for the user; never raises because the stream went away."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    try:
        stream.write(message + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def cli_process() -> bool:
    """This process is the `radt-ext` command itself (not a test or a program calling it in its own process)."""
    return os.path.basename(sys.argv[0]) in ("radt-ext", "cli.py")


def leave(code: int, now: bool = False) -> None:
    """End the `radt-ext` process with `code` once its output is flushed, through os._exit: the
    interpreter's teardown of MLflow's, the figures' and the store's modules takes 0.1-1 s after
    everything is recorded (`now`: so too when the command was called in-process, after a stop that left
    threads with the store). Otherwise at least without its last garbage collection."""
    import gc

    if now or cli_process():
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a reader gone: nothing left to say
                pass
        os._exit(code)
    gc.disable()
    gc.freeze()
    sys.exit(code)
