"""bench/host.py: what the Python benchmarks measure on this host (imported by bench/*/*.py)."""
import os
import subprocess


def drop_caches():
    """Drops the page cache (root only), for a cold start; True when it was dropped."""
    if os.geteuid() != 0:
        return False
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def rss_kib(pid):
    """The process's resident memory (VmRSS) in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def percentiles(ms):
    """(p50, p99) of a list of latencies."""
    ms = sorted(ms)
    return ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))]
