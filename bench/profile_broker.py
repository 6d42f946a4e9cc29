"""Where the broker's time goes per request: `request_cost.py`'s replay under py-spy.

One pre-encoded request is replayed over a blocking socket (as in request_cost.py) while
py-spy samples the broker (stopping it for each sample: ``--nonblocking`` tears stacks, and
the scheduler's share came out four times too big). Each sample is charged to
the part of the broker its innermost frame belongs to, so the table says how much of a
request is the socket's system calls, epoll, trio's scheduler, the wire codec, the gateway,
the group actor and its state machine, or the coordinator log. The CPU figure is measured
with the sampler attached (py-spy costs the broker a little).

    .venv/bin/python bench/profile_broker.py [--broker KIND | --bootstrap HOST:PORT --pid PID]
        [--ops commit,fetch,heartbeat,apiversions] [--seconds 5] [--rate 500] [--top 12]
        [--clients 1] [-o KEY=VALUE ...]

py-spy needs to read the broker's memory: root, or ptrace allowed for the user
(``/proc/sys/kernel/yama/ptrace_scope`` 0).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.consumer_workloads import create_topic
from request_cost import broker, broker_arguments, frame_of, groups_of, replay

_FRAME = re.compile(r"(?P<function>.*) \((?P<file>[^():]*)(?::\d+)?\)$")

# (part, test on the innermost frame's function and file), first match wins
PARTS: tuple[tuple[str, str, str], ...] = (
    (
        "socket system calls (send, recv)",
        r"_nonblocking_helper|sock_method_wrapper|LeanSocketStream\.(send_all|_read)$",
        r"",
    ),
    ("epoll (waiting for and polling sockets)", r"", r"trio/_core/_io_epoll"),
    ("trio scheduler, scopes, channels", r"", r"(^|/)(trio|tricycle|outcome)/"),
    ("wire codec (kio, headers, frames)", r"", r"kio|/protocol/|<generated|gateway/frames"),
    ("gateway (dispatch, handlers)", r"", r"/gateway/"),
    ("coordinator log and storage", r"", r"/storage/|durable_log"),
    (
        "group actor and state machine",
        r"",
        r"/(actors|coordinator|group|group_common|consumer_group)/",
    ),
)
OTHER = "other (interpreter, stdlib, libraries)"
# A worker thread waiting for work (a lock or queue get in C, under no Python frame of its
# own) is sampled as if it ran: py-spy takes a thread blocked on a lock for an active one.
IDLE_WAITS = frozenset({"FsyncThread._serve", "WorkerThread._work"})


@dataclass(frozen=True)
class Profile:
    samples: int
    parts: Counter[str]  # part -> samples whose innermost frame is in it
    functions: Counter[str]  # "function (file)" -> samples spent in it itself


def frames_of(stack: str) -> list[tuple[str, str]]:
    """[(function, file)] of one py-spy raw stack, outermost first."""
    out = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame)
        out.append((match["function"], match["file"]) if match else (frame, ""))
    return out


def part_of(function: str, file: str) -> str:
    for part, function_pattern, file_pattern in PARTS:
        if (not function_pattern or re.search(function_pattern, function)) and (
            not file_pattern or re.search(file_pattern, file)
        ):
            return part
    return OTHER


def aggregate(lines: Iterable[str]) -> Profile:
    """A py-spy ``--format raw`` output (one "stack count" per line) summed by part and by
    innermost function; a worker thread's wait for work (IDLE_WAITS) is not counted."""
    parts: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    samples = 0
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        function, file = frames_of(stack)[-1]
        if function in IDLE_WAITS:
            continue
        samples += int(count)
        parts[part_of(function, file)] += int(count)
        functions[f"{function} ({Path(file).name})"] += int(count)
    return Profile(samples, parts, functions)


def sample(pid: int, seconds: float, rate: int, out: Path) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    command = [py_spy, "record", "--format", "raw", "--output", str(out)]
    command += ["--pid", str(pid), "--rate", str(rate), "--duration", str(max(1, round(seconds)))]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def report(op: str, rate: float, cpu_us: float, profile: Profile, top: int) -> str:
    lines = [f"## {op}: {rate:,.0f} requests/s, broker CPU {cpu_us:.0f} us per request", ""]
    lines += ["| part of the broker | share of samples | us per request |", "|---|---|---|"]
    for part, count in profile.parts.most_common():
        share = count / profile.samples
        lines.append(f"| {part} | {share:.0%} | {share * cpu_us:.1f} |")
    lines += ["", f"Top {top} functions by own samples:", ""]
    for function, count in profile.functions.most_common(top):
        lines.append(f"- {count / profile.samples:5.1%}  {function}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    broker_arguments(parser)
    parser.add_argument("--ops", default="commit,fetch,apiversions")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--clients", type=int, default=1, help="at once, one group each")
    args = parser.parse_args()
    if args.bootstrap and not args.pid:
        parser.error("--bootstrap needs --pid (the process py-spy samples)")
    print(f"# {shlex.join(['bench/profile_broker.py', *sys.argv[1:]])}\n")
    with broker(args) as target, tempfile.TemporaryDirectory() as tmp:
        assert target.pid is not None
        topic = create_topic(target, 1)
        for op in args.ops.split(","):
            frames = [
                # (commits and fetches share their groups: a fetch reads what commit stored)
                frame_of(op, target, f"profile-{groups_of(op)}-{i}", topic)
                for i in range(args.clients)
            ]
            replay(target.bootstrap, target.pid, frames, 0.5)  # the groups exist, warm
            out = Path(tmp) / f"{op}.txt"
            sampler = sample(target.pid, args.seconds, args.rate, out)
            rate, cpu_us = replay(target.bootstrap, target.pid, frames, args.seconds)
            _, err = sampler.communicate(timeout=args.seconds + 60)
            if sampler.returncode != 0 or not out.exists():
                print(f"py-spy failed ({sampler.returncode}): {err.decode().strip()}")
                return 1
            print(report(op, rate, cpu_us, aggregate(out.read_text().splitlines()), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
