"""dldoctor: a doctor for deep-learning hosts.

The core is usable as a library: build a Host, a Facts store over it, and run checks.
The CLI, the JSON mode and (later) the TUI are all clients of the same API.
"""

__version__ = "0.1.0"
