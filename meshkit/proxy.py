"""A TCP proxy on loopback that counts the bytes crossing it in each direction (wire measurements)."""

from __future__ import annotations

import asyncio


class CountingProxy:
    """A TCP proxy on 127.0.0.1 that counts bytes in each direction."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.up = 0
        self.down = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upward: bool) -> None:
            try:
                while data := await src.read(65536):
                    if upward:
                        self.up += len(data)
                    else:
                        self.down += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
