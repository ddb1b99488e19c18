"""A container node's start with the host deciding its user (issue 39) against
main's, same run: the two things that changed on the start path, each timed
against what main did.

1. The user resolution the server now takes per container node
   (exec::ResolveJobUser: getpwnam_r + getgrouplist), timed alone by the
   `user_resolution` binary (main took none: it passed the name).
2. `podman run` with this build's user flags (`--user=65534:65534
   --security-opt=no-new-privileges --cap-drop=all`) against main's (`--user
   nobody`), the runner's other flags and limits the same, one of each per round
   in alternating order: the median of the per-round differences and quartiles.

Usage: user_start.py --lote BUILD/lote --resolution BUILD/bench/containers/user_resolution [--rounds R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "containers"))
from lote_server import LoteServer  # noqa: E402
from test_containers import make_base_image, podman  # noqa: E402


def timed(argv, env):
    t = time.time()
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(argv), r.stderr[-500:]))
    return (time.time() - t) * 1000, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lote", required=True)
    ap.add_argument("--resolution", required=True)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    print(subprocess.run([args.resolution, "nobody"], check=True, capture_output=True,
                         text=True).stdout.strip())
    server = LoteServer(os.path.abspath(args.lote)).start()
    conf = os.path.join(server.home, "containers", "containers.conf")
    env = dict(os.environ, CONTAINERS_CONF=conf)
    image = "localhost/lote-bench-user:%d" % os.getpid()
    work = tempfile.mkdtemp(prefix="lote_bench_user_")
    try:
        make_base_image(conf, image, ['CMD ["/bin/true"]'])
        common = ["podman", "run", "--rm", "--init", "--network=host", "--pull=missing",
                  "--log-driver=passthrough", "--memory=64m", "--cpus=1"]
        flags = {"main": ["--user", "nobody"],
                 "this build": ["--user=65534:65534", "--security-opt=no-new-privileges",
                                "--cap-drop=all"]}
        # Both run as 65534 here: busybox's passwd maps nobody to it.
        for name, f in flags.items():
            _, out = timed(common + f + [image, "/bin/sh", "-c", "id -u"], env)
            if out.strip() != "65534":
                raise SystemExit("%s's flags ran as %r" % (name, out.strip()))
        ms = {name: [] for name in flags}
        for i in range(args.rounds):
            order = list(flags) if i % 2 == 0 else list(reversed(list(flags)))
            for name in order:
                ms[name].append(timed(common + flags[name] + [image, "/bin/true"], env)[0])
        d = [a - b for a, b in zip(ms["this build"], ms["main"])]
        q = statistics.quantiles(d, n=4)
        print("podman run, %d alternating rounds: main's --user nobody median %.0f ms, this "
              "build's numbers + no-new-privileges + cap-drop median %.0f ms; this build - main: "
              "median %+.1f ms (quartiles %+.1f / %+.1f ms), %d of %d rounds faster"
              % (args.rounds, statistics.median(ms["main"]), statistics.median(ms["this build"]),
                 statistics.median(d), q[0], q[2], sum(1 for x in d if x < 0), len(d)))
    finally:
        podman(conf, "rmi", "-f", image, check=False)
        server.cleanup()


if __name__ == "__main__":
    main()
