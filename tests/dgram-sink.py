#!/usr/bin/env python3
"""dgram-sink.py SOCKET OUTFILE: receive datagrams on the unix socket
SOCKET (a syslog socket such as /dev/log, or systemd's NOTIFY_SOCKET) and
append each to OUTFILE as one line.  Prints "ready" on stdout once bound;
removes SOCKET when stopped by SIGTERM or SIGINT."""
import os
import signal
import socket
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    os.chmod(path, 0o666)

    def stop(signum, frame):
        os.unlink(path)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    with open(out, "ab", buffering=0) as f:
        while True:
            data = sock.recv(65536)
            f.write(data.rstrip(b"\n").replace(b"\n", b" | ") + b"\n")


if __name__ == "__main__":
    main()
