"""The JVM round trips a piece of PySpark code makes (py4j commands sent by the driver)."""

from __future__ import annotations

from collections.abc import Callable

from py4j import clientserver


def round_trips(build: Callable[[], object]) -> int:
    """The py4j commands ``build()`` sends, py4j's own garbage collection of Java objects aside
    (it may run at any time)."""
    sent = []
    orig = clientserver.ClientServerConnection.send_command

    def counting(self, command):
        if not command.startswith("m"):
            sent.append(command)
        return orig(self, command)

    clientserver.ClientServerConnection.send_command = counting
    try:
        build()
    finally:
        clientserver.ClientServerConnection.send_command = orig
    return len(sent)
