"""The end of a workload's stderr, kept while it is passed through to radt-ext's own stderr, so a run
that fails can say why (a tag and an artifact) and not only FAILED."""
from __future__ import annotations

import os
import sys
import threading

KEEP_BYTES = 64 * 1024  # the artifact's size at most
TAG_CHARS = 4000  # the tag's: MLflow tags hold 5000 characters on every store


def _stderr_fd() -> int:
    """Our stderr's descriptor; the process's fd 2 where sys.stderr has none (a notebook, a captured stream)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


class StderrTail:
    def __init__(self, fd: int, passthrough: int | None = None):
        self.fd = fd
        self.passthrough = _stderr_fd() if passthrough is None else passthrough
        self._buf = bytearray()
        self._thread = threading.Thread(target=self._pump, name="radt-stderr-tail", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                os.write(self.passthrough, chunk)
            except OSError:
                pass  # our own stderr is gone: the workload still runs and the tail is still kept
            self._buf += chunk
            if len(self._buf) > 2 * KEEP_BYTES:
                del self._buf[:-KEEP_BYTES]
        try:
            os.close(self.fd)
        except OSError:
            pass

    def close(self, timeout: float = 2.0) -> None:
        """Wait for the last bytes (a grandchild that kept the pipe open is not waited for long)."""
        self._thread.join(timeout)

    def text(self) -> str:
        return bytes(self._buf[-KEEP_BYTES:]).decode("utf-8", errors="replace")

    def tag(self) -> str:
        """The last lines that fit a tag, whole lines where possible."""
        text = self.text().rstrip()
        if len(text) <= TAG_CHARS:
            return text
        cut = text[-TAG_CHARS:]
        return cut[cut.find("\n") + 1:] if "\n" in cut[:-1] else cut
