"""The self-contained bundle (scripts/make-bundle.sh, `make bundle`): built from this
build, under 60 MiB, unpacked elsewhere and run with a scrubbed environment: its lote
resolves every library but the C library from the bundle, starts a server that runs a
job (its node runner re-executes lote from the bundle), and the GPU checks it carries
(tests/gpu/run.sh) say there is no GPU here and exit 77 instead of passing."""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
BUILD = None


class BundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="lote_bundle_")
        out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-bundle.sh"), BUILD,
                              cls.work], capture_output=True, text=True)
        if out.returncode != 0:
            raise AssertionError("make-bundle.sh failed:\n" + out.stdout + out.stderr)
        cls.tarball = glob.glob(os.path.join(cls.work, "lote-bundle-*.tar.gz"))[0]
        cls.unpacked = os.path.join(cls.work, "elsewhere")
        os.makedirs(cls.unpacked)
        subprocess.run(["tar", "-C", cls.unpacked, "-xzf", cls.tarball], check=True)
        cls.lote = os.path.join(cls.unpacked, "lote-bundle", "lote")
        cls.env = {"PATH": "/usr/bin:/bin", "HOME": cls.work}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_size_and_libraries(self):
        self.assertLess(os.path.getsize(self.tarball), 60 * 1024 * 1024)
        lib = os.path.join(self.unpacked, "lote-bundle", "lib")
        out = subprocess.run(["ldd", os.path.join(self.unpacked, "lote-bundle", "bin", "lote")],
                             env=dict(self.env, LD_LIBRARY_PATH=lib), capture_output=True,
                             text=True, check=True).stdout
        outside = []
        for line in out.splitlines():
            if "=>" not in line:
                continue
            name, path = line.split("=>")[0].strip(), line.split("=>")[1].split()[0]
            self.assertNotEqual(path, "not", line)  # "not found"
            glibc = name.split(".so")[0] in ("libc", "libm", "libdl", "libpthread", "librt",
                                              "libresolv", "libmvec")
            if not glibc and not path.startswith(lib):
                outside.append(line)
        self.assertEqual(outside, [], "libraries resolved outside the bundle")

    def test_runs_a_job_from_the_bundle(self):
        out = subprocess.run([self.lote, "--version"], env=self.env, capture_output=True,
                             text=True, check=True).stdout
        self.assertTrue(out.startswith("lote "), out)
        home = os.path.join(self.work, "home")
        os.makedirs(home)
        stderr = open(os.path.join(self.work, "server.stderr"), "wb")
        server = subprocess.Popen([self.lote, "server", "--home", home, "--listen", "127.0.0.1:0"],
                                  env=self.env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            line = server.stdout.readline()
            self.assertTrue(line.startswith("lote server listening on "), line)
            endpoint = line.strip().split(" on ", 1)[1]
            env = dict(self.env, LOTE_ENDPOINT=endpoint)
            sys.path.insert(0, os.path.join(HERE, "..", "control"))
            from lote_server import LoteServer, create_emulated_environment  # noqa: E402
            client = LoteServer(self.lote, home=home)
            client.endpoint = endpoint
            batch = client.client()
            create_emulated_environment(batch)
            batch.create_job_queue(jobQueueName="q", priority=1, computeEnvironmentOrder=[
                {"order": 1, "computeEnvironment": "ce"}])
            done = subprocess.run(
                [self.lote, "submit", "--queue", "q", "--wait", "--", "sh", "-c",
                 "echo from-the-bundle"], env=dict(env, **dict(
                     zip(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), client.credentials()))),
                capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertIn("SUCCEEDED", done.stdout + done.stderr)
        finally:
            server.terminate()
            server.wait(timeout=30)
            server.stdout.close()
            stderr.close()

    def test_gpu_checks_say_there_is_no_gpu(self):
        script = os.path.join(self.unpacked, "lote-bundle", "test-gpu.sh")
        out = subprocess.run(["bash", script, self.lote], env=self.env, capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 77, out.stdout + out.stderr)
        self.assertIn("nothing to check", out.stdout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args, rest = parser.parse_known_args()
    BUILD = os.path.abspath(args.build)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
