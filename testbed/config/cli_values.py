"""Command-line values several commands take (`--time-scale`, `--runs-dir`,
`--summary-dir`, `--spark-master`), checked before a command starts anything: one line and exit 2, not a
traceback after the cluster started."""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import socket
from pathlib import Path

#: the most a --time-scale may stretch a run's timeouts (a day's run at 1000x is a day)
MAX_TIME_SCALE = 1000.0
#: the least: a 5 s workload lasts 50 ms and a 100 ms timeout 1 ms, about what a process on
#: this host can still keep to (below, timeouts shorter than a message's round trip)
MIN_TIME_SCALE = 0.01
_INT = re.compile(r"-?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(nan|inf|infinity)", re.ASCII | re.I)


def path_arg(text: str) -> Path:
    """A path as argparse takes one: `Path("")` is the working directory, so an empty value
    judged every run under it; a line break in a path is a pasting accident."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (expected a file or directory)")
    if "\n" in text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: a path with a line break or NUL in it")
    return Path(text)


def int_arg(text: str) -> int:
    """An integer of the digits 0-9 (`int` also reads `١٢` and `1_000`)."""
    if not _INT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of the digits 0-9")
    return int(text)


def float_arg(text: str) -> float:
    """A number of the digits 0-9 (`float` also reads `１.５`); NaN and infinities parse, for
    the checks that name what they should be instead."""
    if not _FLOAT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of the digits 0-9 (e.g. 1.5)")
    return float(text)


def joined_negative_numbers(argv: list[str]) -> list[str]:
    """`argv` with `--option -inf` written `--option=-inf`: argparse reads a value that starts
    with a dash and is not a plain negative decimal (`-inf`, `-nan`, `-1e3`) as an option, and
    said only "expected one argument" where the option's own check names the problem."""
    out: list[str] = []
    for token in argv:
        if (out and token.startswith("-") and _FLOAT.fullmatch(token) and out[-1].startswith("--")
                and "=" not in out[-1] and out[-1] != "--"):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def range_problem(flag: str, value: int | float | None, low: float, high: float) -> str | None:
    """Why `flag` cannot be `value`: outside low..high (NaN is); None when it can or is not given."""
    if value is None or low <= value <= high:
        return None
    return f"{flag} {value}: expected a number from {low:g} to {high:,g}"


def runs_dir_flag(runs_dir: Path | None) -> str:
    """` --runs-dir D` for a command printed to run again (a replay) into `runs_dir`; nothing
    for the default `runs/`."""
    if runs_dir is None or runs_dir.resolve() == Path("runs").resolve():
        return ""
    return f" --runs-dir {shlex.quote(str(runs_dir))}"


def unusable_dir(path: Path, flag: str) -> str | None:
    """Why `path` (the value of `flag`) cannot hold what a command writes, made if missing;
    None when it can. Asked before anything starts, so that a runs directory under a file
    or without write permission is one line, not a traceback after the cluster started."""
    if path.exists() and not path.is_dir():
        return f"{flag} {path}: a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{flag} {path}: cannot be made ({exc.strerror or exc})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{flag} {path}: not writable"
    return None


def time_scale_problem(value: float) -> str | None:
    """Why `--time-scale` cannot be `value` (it multiplies every protocol timeout); None when
    it can."""
    bounds = (f"--time-scale must be a number from {MIN_TIME_SCALE:g} to {MAX_TIME_SCALE:g} "
              f"(at {MIN_TIME_SCALE:g} a 100 ms timeout is 1 ms), got {value:g}")
    return None if math.isfinite(value) and MIN_TIME_SCALE <= value <= MAX_TIME_SCALE else bounds


#: Spark's own masters (`local`, `local[N]`, `local[N,F]`, `local-cluster[...]`, `spark://`,
#: `yarn`, `k8s://`) and a Spark Connect server's URL (`sc://`)
_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+|sc://\S+")
SPARK_CONNECT_PORT = 15002  # a Spark Connect URL's port when it names none


def spark_master_problem(master: str | None) -> str | None:
    """Why `--spark-master` cannot be `master`; None when it can (or is not given). A master
    Spark does not know is refused, and so is a Spark Connect URL where nothing accepts a
    connection: Spark's client retries such a request for ten minutes before it fails."""
    if master is None:
        return None
    if not _MASTER.fullmatch(master):
        return (f"--spark-master {master!r}: expected local, local[N], local[*], spark://host:port, yarn, "
                f"k8s://... or the URL of a Spark Connect server, sc://host:port")
    if master.startswith("local") and any(not 1 <= int(n) <= 1_000_000 for n in re.findall(r"[0-9]+", master)):
        return f"--spark-master {master}: its numbers (threads, workers, cores, MB) must be from 1 to 1,000,000"
    if master.startswith("sc://") and not connect_server_accepts(master):
        return (f"--spark-master {master}: no Spark Connect server answers there "
                f"(the connection was refused, or nothing answered HTTP/2 within {ANSWER_WAIT:g} s)")
    if master.startswith("spark://") and not standalone_master_accepts(master):
        return (f"--spark-master {master}: no Spark master accepts a connection there in 2 s (a standalone "
                f"master's URL is spark://host:port, port {STANDALONE_PORT} unless it says)")
    return None


STANDALONE_PORT = 7077  # a standalone Spark master's port when its URL names none


def standalone_master_accepts(url: str, timeout: float = 2.0) -> bool:
    """Some master of a standalone cluster's URL (`spark://host[:port][,host[:port]...]`)
    accepts a TCP connection: Spark's driver tries an absent master for a minute, then the
    run was left unjudged and its stored verdict overwritten."""
    for netloc in url[len("spark://"):].split(","):
        try:
            with socket.create_connection(_address(netloc, STANDALONE_PORT), timeout=timeout):
                return True
        except (OSError, OverflowError, ValueError):  # refused, no answer in time, not a port
            continue
    return False


def _connect_address(url: str) -> tuple[str, int]:
    """(host, port) of a Spark Connect URL, `sc://host[:port][/;param=value...]`."""
    return _address(url[len("sc://"):].split("/", 1)[0], SPARK_CONNECT_PORT)


def _address(netloc: str, default_port: int) -> tuple[str, int]:
    """(host, port) of a URL's `host[:port]` or `[IPv6]:port`; ValueError for a port that
    is not a number."""
    host, port = netloc, str(default_port)
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else port
    elif ":" in netloc:
        host, port = netloc.rsplit(":", 1)
    return host, int(port)


#: how long a Spark Connect URL's listener has to answer HTTP/2 before it is called silent. A
#: refused connection fails at once; a live server's JVM starved of CPU answers late, and at 2 s
#: a CI run of 2,774 s (three times the usual) had a `sim` refuse its tests' warm server
ANSWER_WAIT = 10.0


def connect_server_accepts(url: str, timeout: float = ANSWER_WAIT) -> bool:
    """Something answers HTTP/2, as a gRPC server does, at the host and port of a Spark
    Connect URL (`sc://host[:port][/;param=value...]`): a silent listener that only accepts
    connections made `analyze` retry for a minute and then leave the run unjudged."""
    try:
        return http2_answers(*_connect_address(url), timeout)
    except ValueError:  # not a port number
        return False


def connect_server_refuses(url: str, timeout: float = 1.0) -> bool:
    """Nothing listens any more at the host and port of a Spark Connect URL: a connection is
    refused (or the URL names no port). A listener that is busy, stopped or slow is not
    refused, so this says "gone", never "slow"."""
    try:
        with socket.create_connection(_connect_address(url), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, OverflowError):  # no answer in time, unreachable: not known to be gone
        return False
    except ValueError:  # not a port number
        return True


#: an HTTP/2 client's connection preface and an empty SETTINGS frame (RFC 9113, 3.4)
_H2_GREETING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4  # the frame type a server's preface begins with


def http2_answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """`host:port` answers an HTTP/2 greeting with its own SETTINGS frame within `timeout`.
    The kernel accepts a connection for a server that is stopped (SIGSTOP) or hung, and any
    listener accepts one: only an answer says a gRPC server is there."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(_H2_GREETING)
            head = conn.recv(9)
            return len(head) >= 4 and head[3] == _H2_SETTINGS
    except (OSError, OverflowError):  # refused, reset, no answer in time; a port beyond 65535
        return False
