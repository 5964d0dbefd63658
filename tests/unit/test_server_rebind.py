"""A service restarted on its port right after a drain binds it (the reliability suite's SIGTERM cases)."""

from __future__ import annotations

import socket

import pytest

from services.runtime.server import StartupError, _check_bindable


def time_wait_on_a_free_port() -> int:
    """A port whose last connection was closed by the server side first, leaving it in TIME_WAIT."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server closes first: its end of the connection waits in TIME_WAIT
        client.recv(1)
        client.close()
    return port


def test_time_wait_connections_of_the_last_run_do_not_block_the_bind() -> None:
    _check_bindable("127.0.0.1", time_wait_on_a_free_port())


def test_a_live_listener_still_blocks_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with pytest.raises(StartupError, match="cannot listen"):
            _check_bindable("127.0.0.1", int(listener.getsockname()[1]))
