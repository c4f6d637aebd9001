"""Hardware listeners: sample GPUs, CPUs and processes. Knows nothing of MLflow."""
from listeners.base import Listener, ListenerError, Reading, Target

__all__ = ["Listener", "ListenerError", "Reading", "Target"]
