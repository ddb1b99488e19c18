"""Container mode vs process mode, same server, same run (see run.sh)."""
import argparse
import json
import os
import shutil
import socket
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


def queue(batch, name, tags):
    batch.create_compute_environment(
        computeEnvironmentName=name, type="MANAGED", tags=tags,
        computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 64,
                          "instanceTypes": ["c5.large"], "subnets": ["s"]})
    while batch.describe_compute_environments(
            computeEnvironments=[name])["computeEnvironments"][0]["status"] != "VALID":
        time.sleep(0.05)
    batch.create_job_queue(jobQueueName=name, priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": name}])


def run_jobs(batch, q, definition, n):
    """n jobs submitted at once; (wall seconds, per-job stoppedAt - startedAt in ms)."""
    t0 = time.time()
    ids = [batch.submit_job(jobName="b", jobQueue=q, jobDefinition=definition)["jobId"]
           for _ in range(n)]
    done = {}
    while len(done) < n:
        todo = [i for i in ids if i not in done]
        for k in range(0, len(todo), 100):
            for j in batch.describe_jobs(jobs=todo[k:k + 100])["jobs"]:
                if j["status"] in ("SUCCEEDED", "FAILED"):
                    if j["status"] != "SUCCEEDED":
                        raise SystemExit("job failed: %s" % j.get("statusReason"))
                    done[j["jobId"]] = j["stoppedAt"] - j["startedAt"]
        time.sleep(0.05)
    return time.time() - t0, sorted(done.values())


def timed(argv, env):
    t = time.time()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return (time.time() - t) * 1000


def runner_against_podman(batch, server, work, image, env, rounds):
    """The runner alone (`lote-exec-shim --node-dir`, what every backend starts per
    node) on a copy of a real container node's spec, against a bare `podman run`
    of the same image with the same limits and against `podman run` with the
    runner's own flags (--name, --pull=missing, --cidfile, -e KEY...), one of each
    per round: the medians of the per-round differences and their quartiles."""
    job_id = batch.submit_job(jobName="spec", jobQueue="cont", jobDefinition="cont")["jobId"]
    done = os.path.join(server.home, "jobs", job_id, "1", "0", "status.json")
    server.wait_for(lambda: os.path.exists(done), 120, "the spec job")
    with open(os.path.join(os.path.dirname(done), "spec.json")) as f:
        spec = json.load(f)
    shim = os.path.join(os.path.dirname(server.binary), "lote-exec-shim")
    limits = ["--memory=%dm" % spec["container_memory_mib"],
              "--cpus=%g" % (spec["container_vcpu_milli"] / 1000.0)]
    bare = ["podman", "run", "--rm", "--init", "--network=host", "--log-driver=passthrough"]
    flags_env = dict(env, **dict(kv.split("=", 1) for kv in spec["env"]))
    keys = [a for kv in spec["env"] for a in ("-e", kv.split("=", 1)[0])]
    runner_ms, bare_ms, flags_ms = [], [], []
    for i in range(rounds):
        node = os.path.join(work, "runner", str(i))
        os.makedirs(node)
        spec["container"]["name"] = "lote-bench-runner-%d-%d" % (os.getpid(), i)
        spec["output_path"] = os.path.join(node, "output.log")
        spec["working_dir"] = os.path.join(node, "work")
        with open(os.path.join(node, "spec.json"), "w") as f:
            json.dump(spec, f)
        runner_ms.append(timed([shim, "--node-dir", node], env))
        with open(os.path.join(node, "status.json")) as f:
            status = json.load(f)
        if (status["outcome"], status["exit_code"]) != ("exited", 0):
            raise SystemExit("runner sample %d: %s" % (i, status))
        bare_ms.append(timed(bare + limits + [image, "/bin/true"], env))
        flags_ms.append(timed(
            bare[:3] + ["--name", "lote-bench-flags-%d-%d" % (os.getpid(), i)] + bare[3:]
            + ["--pull=missing", "--cidfile=" + os.path.join(node, "flags.id")] + keys + limits
            + [image, "/bin/true"], flags_env))

    # The runner's own share: the same spec as a host process of /bin/true (the
    # runner's work but podman's), against /bin/true started directly.
    for k in ("container", "container_user", "container_memory_mib", "container_vcpu_milli"):
        spec.pop(k, None)
    spec["argv"] = ["/bin/true"]
    spec["cgroup_dir"] = ""  # container mode makes none either
    spec["env"] = spec["env"] + ["PATH=/usr/bin:/bin"]
    alone_ms, true_ms = [], []
    for i in range(rounds):
        node = os.path.join(work, "runner-process", str(i))
        os.makedirs(node)
        spec["output_path"] = os.path.join(node, "output.log")
        spec["working_dir"] = os.path.join(node, "work")
        with open(os.path.join(node, "spec.json"), "w") as f:
            json.dump(spec, f)
        alone_ms.append(timed([shim, "--node-dir", node], env))
        true_ms.append(timed(["/bin/true"], env))

    def diff(a, b):
        d = [x - y for x, y in zip(a, b)]
        q = statistics.quantiles(d, n=4)
        return "median %+.1f ms (quartiles %+.1f / %+.1f ms)" % (statistics.median(d), q[0], q[2])
    print("%d rounds (%s): runner alone median %d ms, podman run with the runner's flags %d ms, "
          "bare podman run %d ms; runner - bare: %s; runner - same flags: %s; flags - bare: %s"
          % (rounds, " ".join(limits), statistics.median(runner_ms), statistics.median(flags_ms),
             statistics.median(bare_ms), diff(runner_ms, bare_ms), diff(runner_ms, flags_ms),
             diff(flags_ms, bare_ms)))
    print("the runner's own work (the same spec as a host process of /bin/true), %d rounds: "
          "median %.1f ms against /bin/true alone %.1f ms; runner - /bin/true: %s"
          % (rounds, statistics.median(alone_ms), statistics.median(true_ms),
             diff(alone_ms, true_ms)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lote", required=True)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=30)
    args = ap.parse_args()
    server = LoteServer(os.path.abspath(args.lote)).start()
    work = tempfile.mkdtemp(prefix="lote_bench_containers_")
    conf = os.path.join(server.home, "containers", "containers.conf")
    env = dict(os.environ, CONTAINERS_CONF=conf)
    image = "localhost/lote-bench:%d" % os.getpid()
    reg_proc = None
    try:
        make_base_image(conf, image, ['CMD ["/bin/true"]'])
        batch = server.client()
        queue(batch, "proc", {"lote:emulation": "true"})
        queue(batch, "cont", {"lote:emulation": "true", "lote:runtime": "container"})
        for name in ("proc", "cont"):
            batch.register_job_definition(
                jobDefinitionName=name, type="container",
                containerProperties={"image": image, "command": ["/bin/true"],
                                     "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                              {"type": "MEMORY", "value": "64"}]})
        run_jobs(batch, "cont", "cont", 2)  # warm the image and the server
        results = {}
        for name in ("proc", "cont"):
            wall, node_ms = run_jobs(batch, name, name, args.jobs)
            results[name] = (wall, statistics.median(node_ms))
            print("%-9s %d trivial jobs: %.1f s (%.1f jobs/s), node start-to-end median %d ms"
                  % ({"proc": "process", "cont": "container"}[name], args.jobs, wall,
                     args.jobs / wall, results[name][1]))
        print("container / process: jobs/s %.2fx, node time %.1fx" % (
            results["proc"][0] / results["cont"][0], results["cont"][1] / results["proc"][1]))
        # One node at a time against bare podman runs of the same image.
        lote_one = [run_jobs(batch, "cont", "cont", 1)[1][0] for _ in range(10)]
        bare = [timed(["podman", "run", "--rm", "--init", "--network=host",
                       "--log-driver=passthrough", image, "/bin/true"], env) for _ in range(10)]
        print("one node alone: lote container node median %d ms, bare podman run median %d ms: "
              "lote adds %d ms (%.2fx)" % (statistics.median(lote_one), statistics.median(bare),
                                          statistics.median(lote_one) - statistics.median(bare),
                                          statistics.median(lote_one) / statistics.median(bare)))
        runner_against_podman(batch, server, work, image, env, args.pairs)
        # Pulls from a local docker-registry (plain HTTP on loopback).
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        regdir = os.path.join(work, "registry")
        os.makedirs(regdir)
        with open(os.path.join(regdir, "config.yml"), "w") as f:
            f.write("version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s},"
                    " delete: {enabled: true}}\nhttp: {addr: 127.0.0.1:%d}\n" % (regdir, port))
        reg_proc = subprocess.Popen(["docker-registry", "serve", os.path.join(regdir, "config.yml")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        remote = "127.0.0.1:%d/bench/img:1" % port
        for _ in range(100):
            if subprocess.run(["podman", "push", "--tls-verify=false", image, remote], env=env,
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        image_mb = int(podman(conf, "image", "inspect", "--format", "{{.Size}}",
                              image).stdout) / 1e6
        cold, cached = [], []
        for _ in range(5):
            podman(conf, "rmi", "-f", remote, check=False)
            cold.append(timed(["podman", "pull", "--tls-verify=false", remote], env))
            cached.append(timed(["podman", "pull", "--tls-verify=false", remote], env))
        print("pull %s (%.1f MB image) from the local registry: cold median %d ms, cached median "
              "%d ms" % (remote, image_mb, statistics.median(cold),
                         statistics.median(cached)))
        podman(conf, "rmi", "-f", remote, check=False)
        # The same through lote's own registry and the ECR flow (htpasswd auth:
        # the registry checks a bcrypt hash on every request).
        ecr_env = dict(server.env(), CONTAINERS_CONF=conf)
        authfile = os.path.join(work, "auth.json")
        subprocess.run(["aws", "ecr", "create-repository", "--repository-name", "bench/img"],
                       env=ecr_env, check=True, capture_output=True)
        password = subprocess.run(["aws", "ecr", "get-login-password"], env=ecr_env, check=True,
                                  capture_output=True, text=True).stdout
        subprocess.run(["podman", "login", "--authfile", authfile, "--username", "AWS",
                        "--password-stdin", ecr_env["LOTE_REGISTRY"]], env=ecr_env, check=True,
                       capture_output=True, input=password, text=True)
        ecr = "%s/bench/img:1" % ecr_env["LOTE_REGISTRY"]
        subprocess.run(["podman", "push", "--authfile", authfile, image, ecr], env=ecr_env,
                       check=True, capture_output=True)
        ecr_cold, ecr_cached = [], []
        for _ in range(5):
            podman(conf, "rmi", "-f", ecr, check=False)
            ecr_cold.append(timed(["podman", "pull", "--authfile", authfile, ecr], ecr_env))
            ecr_cached.append(timed(["podman", "pull", "--authfile", authfile, ecr], ecr_env))
        print("pull %s through the ECR flow (lote's registry, logged in): cold median %d ms, "
              "cached median %d ms; against the anonymous registry: cold %.2fx, cached %.2fx"
              % (ecr, statistics.median(ecr_cold), statistics.median(ecr_cached),
                 statistics.median(ecr_cold) / statistics.median(cold),
                 statistics.median(ecr_cached) / statistics.median(cached)))
        podman(conf, "rmi", "-f", ecr, check=False)
    finally:
        if reg_proc:
            reg_proc.terminate()
            reg_proc.wait()
        podman(conf, "rmi", "-f", image, check=False)
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
