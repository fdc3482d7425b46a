"""Counting this process's open file descriptors and the sockets among them that connect to a
port: what the leak checks of the chaos and abort tests read (Linux /proc)."""

from __future__ import annotations

import os


def fds(port: int, client_ends_only: bool = False) -> tuple[int, int]:
    """(everything else, sockets connected to or from `port`); with `client_ends_only`, only
    those whose peer is `port` count as its (a server in this process keeps its own ends)."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table, encoding="ascii").read().splitlines()[1:]:
            cols = line.split()
            local, peer = (int(cols[i].rsplit(":", 1)[1], 16) for i in (1, 2))
            sockets[cols[9]] = peer == port or (not client_ends_only and local == port)
    other = connected = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
        if inode is not None and sockets.get(inode):
            connected += 1
        else:
            other += 1
    return other, connected
