#!/usr/bin/env python3
"""Drive felab at a pseudo-terminal, as a person at a terminal would, for the prompt tests.

    pty_session.py TRANSCRIPT FELAB [STEP...]

felab runs with a pty as its controlling terminal (stdin, stdout and stderr all on it, 200
columns wide), so it is interactive: prompts, readline, and the live progress line. The
steps run in order:
    send:TEXT     type TEXT and Enter
    type:TEXT     type TEXT alone (\\t in it: Tab, to complete)
    expect:REGEX  wait (up to 15 s) until the output since the last expect matches REGEX
    ctrl-c        type Ctrl-C (the terminal sends SIGINT to felab)
    sleep:SECONDS wait
    eof           type Ctrl-D at an empty prompt and wait for felab to exit
Everything felab wrote goes to TRANSCRIPT (raw bytes: '\\r' and escape sequences kept).
Exits 0 when every step passed, else 1 with what was awaited on stderr.
"""
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

TIMEOUT = 15.0


def main():
    transcript_path, felab, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:  # the child: felab on the pty
        os.execv(felab, [felab])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    out = bytearray()
    mark = 0  # expect searches from here

    def read_some(wait):
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: felab closed the terminal (exited)
            return False
        if not data:
            return False
        out.extend(data)
        return True

    def fail(why):
        with open(transcript_path, "wb") as f:
            f.write(out)
        sys.stderr.write(why + "\n")
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        sys.exit(1)

    for step in steps:
        kind, _, arg = step.partition(":")
        if kind == "send":
            os.write(fd, arg.encode() + b"\r")
        elif kind == "type":
            os.write(fd, arg.replace("\\t", "\t").encode())
        elif kind == "ctrl-c":
            os.write(fd, b"\x03")
        elif kind == "sleep":
            end = time.time() + float(arg)
            while time.time() < end:
                read_some(max(0.0, end - time.time()))
        elif kind == "expect":
            pattern = re.compile(arg.encode())
            end = time.time() + TIMEOUT
            while True:
                found = pattern.search(out, mark)
                if found:
                    mark = found.end()
                    break
                if time.time() > end:
                    fail("timed out waiting for /%s/" % arg)
                if not read_some(0.1):
                    fail("felab exited while waiting for /%s/" % arg)
        elif kind == "eof":
            os.write(fd, b"\x04")
            end = time.time() + TIMEOUT
            while read_some(0.1):
                if time.time() > end:
                    fail("felab did not exit after Ctrl-D")
            _, status = os.waitpid(pid, 0)
            if os.WEXITSTATUS(status) != 0:
                fail("felab exited with status %d" % os.WEXITSTATUS(status))
        else:
            fail("unknown step %r" % step)
    with open(transcript_path, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
