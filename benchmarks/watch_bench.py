"""Drive `mailmortem watch` with a writer process at a given rate and measure it.

    python benchmarks/watch_bench.py [--rates 1000,2000] [--seconds 60] [--workers 2] [--poll SECONDS] [--every 300]

For each rate, a writer process appends logfmt send lines to `--workers` files in a fresh folder (in batches
every 10 ms, as a busy mailer would), and plants a duplicated person twice a second: two sends of one campaign
step to one person, by two workers, 0.1 s apart; it notes the wall time each second send was flushed. The
watch (`mailmortem watch DIR --format jsonl`, started before the writer) reports each duplicate; the latency of
one is from its second line flushed to its event read on the watch's stdout. The watch's CPU time (user +
system, from /proc) over the writer's run gives its share of one core; its resident memory is sampled every
second (peak and last). Every `--every` seconds (default 300) a row on stderr gives that interval's CPU share,
the RSS at its end and the machine's load average, so that a long run shows whether they stay flat. Prints one
row per rate (Markdown).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLANTS_PER_S = 2


def writer(folder: str, rate: int, seconds: float, workers: int) -> None:
    """The writer process: `rate` lines a second over `workers` files; planted duplicates noted on stdout."""
    files = [open(Path(folder) / f"worker-{w}.log", "a", buffering=1 << 16) for w in range(workers)]
    start, n, plant, pending = time.time(), 0, 0, []
    while (now := time.time()) - start < seconds:
        due = int((now - start) * rate)
        for i in range(n, due):
            w = i % workers
            files[w].write(f"ts={_ts(now)} level=info event=send worker=w{w} campaign=c-1 step=1 "
                           f"email=p{i}@example.com msg_id=<m{i}@mail.example.com> status=sent\n")
        n = max(n, due)
        if (now - start) * PLANTS_PER_S >= plant:
            files[0].write(_plant(plant, 0, now))
            pending.append((plant, now + 0.1))
            plant += 1
        for number, at in [p for p in pending if p[1] <= now]:
            files[1 % workers].write(_plant(number, 1 % workers, now))
            for handle in files:
                handle.flush()
            print(json.dumps({"recipient": f"dup{number}@example.com", "written": time.time()}), flush=True)
            pending.remove((number, at))
        for handle in files:
            handle.flush()
        time.sleep(0.01)


def _plant(number: int, worker: int, now: float) -> str:
    return (f"ts={_ts(now)} level=info event=send worker=w{worker} campaign=c-1 step=1 email=dup{number}@example.com "
            f"msg_id=<dup{number}-{worker}@mail.example.com> status=sent\n")


def _ts(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def measure(rate: int, seconds: float, workers: int, poll: float | None, every: float = 300) -> dict:
    folder = tempfile.mkdtemp(prefix="mm-watch-bench-")
    for w in range(workers):
        (Path(folder) / f"worker-{w}.log").write_text("")
    polled = ["--poll", str(poll)] if poll is not None else []  # else the watch's own default
    watch = subprocess.Popen([sys.executable, "-m", "mailmortem", "watch", folder, "--format", "jsonl", *polled,
                              "--for", f"{int(seconds + 5)}s"], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen: dict[str, float] = {}
    started = threading.Event()
    threading.Thread(target=_read_events, args=(watch, seen, started), daemon=True).start()
    started.wait(60)
    cpu0, rss = _cpu_s(watch.pid), []
    proc = subprocess.Popen([sys.executable, __file__, "--writer", folder, str(rate), str(seconds), str(workers)],
                            text=True, stdout=subprocess.PIPE)
    sampler = threading.Thread(target=_sample_rss, args=(watch.pid, proc, rss, rate, every), daemon=True)
    sampler.start()
    written = {json.loads(line)["recipient"]: json.loads(line)["written"] for line in proc.stdout}
    proc.wait()
    cpu = _cpu_s(watch.pid) - cpu0
    try:  # the watch ends by itself (--for) once the last duplicates' events are out
        watch.wait(timeout=60)
    except subprocess.TimeoutExpired:
        watch.kill()
    shutil.rmtree(folder, ignore_errors=True)
    latencies = sorted(seen[r] - t for r, t in written.items() if r in seen)
    return {"rate": rate, "seconds": seconds, "planted": len(written), "reported": len(latencies),
            "p50_s": _pct(latencies, 0.50), "p99_s": _pct(latencies, 0.99),
            "max_s": latencies[-1] if latencies else None,
            "cpu_share": cpu / seconds, "rss_peak_mb": max(rss) / 1024 if rss else None,
            "rss_last_mb": rss[-1] / 1024 if rss else None}


def _read_events(watch, seen: dict, started: threading.Event) -> None:
    for line in watch.stdout:
        event = json.loads(line)
        if event["event"] == "start":
            started.set()
        elif event["event"] == "duplicate":
            seen.setdefault(event["recipient"], time.time())


def _sample_rss(pid: int, writer_process, out: list, rate: int, every: float) -> None:
    """RSS every second; every `every` seconds an interval row (stderr): its CPU share, RSS now, load average."""
    began = mark = time.monotonic()
    cpu_mark = _cpu_s(pid)
    while writer_process.poll() is None:
        with open(f"/proc/{pid}/status") as status:
            out += [int(line.split()[1]) for line in status if line.startswith("VmRSS:")]
        now = time.monotonic()
        if now - mark >= every:
            cpu = _cpu_s(pid)
            print(f"| {rate:,} | {now - began:.0f} | {(cpu - cpu_mark) / (now - mark):.1%} | {out[-1] / 1024:.0f} | "
                  f"{max(out) / 1024:.0f} | {' '.join(f'{x:.2f}' for x in os.getloadavg())} |", file=sys.stderr,
                  flush=True)
            mark, cpu_mark = now, cpu
        time.sleep(1)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process and its finished children (fields 14-17 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float | None:
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        folder, rate, seconds, workers = sys.argv[2:6]
        writer(folder, int(rate), float(seconds), int(workers))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,2000")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--poll", type=float, default=None, help="seconds between polls (default: the watch's)")
    parser.add_argument("--every", type=float, default=300, help="seconds between interval rows (stderr)")
    args = parser.parse_args()
    print("| lines/s | at s | CPU in the interval | RSS MB | RSS peak MB | load average 1/5/15 min |\n"
          "|---:|---:|---:|---:|---:|---|", file=sys.stderr, flush=True)
    print("| lines/s | s | duplicates planted | reported | latency p50 s | p99 s | max s | CPU (share of a core) | "
          "RSS peak MB | RSS last MB | load average at end |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for rate in (int(r) for r in args.rates.split(",")):
        r = measure(rate, args.seconds, args.workers, args.poll, args.every)
        print(f"| {r['rate']:,} | {r['seconds']:g} | {r['planted']} | {r['reported']} | {r['p50_s']:.2f} | "
              f"{r['p99_s']:.2f} | {r['max_s']:.2f} | {r['cpu_share']:.1%} | {r['rss_peak_mb']:.0f} | "
              f"{r['rss_last_mb']:.0f} | {' '.join(f'{x:.2f}' for x in os.getloadavg())} |", flush=True)


if __name__ == "__main__":
    main()
