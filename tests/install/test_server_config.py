"""`lote server --config PATH` on a real server: values in the file change what
the server does (its home, listen address and region), the command line wins
over the file, and an unknown key or a bad value is a clear error (exit 2, the
file and line named) before anything starts.

Run: python3 test_server_config.py --lote build/lote
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

LOTE = None


class ServerConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lote_config_test_")
        self.home = os.path.join(self.dir, "state")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_config(self, text):
        path = os.path.join(self.dir, "server.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, *args):
        """Starts `lote server ARGS` with no --home or --listen of its own; the
        endpoint it prints."""
        env = dict(os.environ)
        env.pop("LOTE_HOME", None)
        self.proc = subprocess.Popen([LOTE, "server"] + list(args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        self.assertTrue(line.startswith("lote server listening on "),
                        (line, self.proc.stderr.read() if self.proc.poll() is not None else ""))
        return line.strip().split(" on ", 1)[1]

    def refused(self, config_text):
        proc = subprocess.run([LOTE, "server", "--config", self.write_config(config_text)],
                              capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stdout, proc.stderr

    def test_values_in_the_file_change_the_server(self):
        config = self.write_config(
            "# a shared head node\nhome = \"%s\"\nlisten = 127.0.0.1:0\nregion = eu-west-3\n"
            "console-listen = off\nregistry = off\n" % self.home)
        endpoint = self.start("--config", config)
        self.assertTrue(endpoint.startswith("http://127.0.0.1:"), endpoint)
        self.assertNotEqual(endpoint, "http://127.0.0.1:7480")
        with open(os.path.join(self.home, "server.json")) as f:
            info = json.load(f)
        self.assertEqual(info["region"], "eu-west-3")
        self.assertEqual(info["endpoint"], endpoint)
        self.assertTrue(os.path.exists(os.path.join(self.home, "credentials")))

    def test_the_command_line_wins(self):
        config = self.write_config("home = %s\nlisten = 127.0.0.1:0\nregion = eu-west-3\n"
                                   "console-listen = off\nregistry = off\n" % self.home)
        self.start("--config", config, "--region", "ap-south-1")
        with open(os.path.join(self.home, "server.json")) as f:
            self.assertEqual(json.load(f)["region"], "ap-south-1")

    def test_unknown_key_and_bad_value_are_clear_errors(self):
        code, out, err = self.refused("home = %s\nlisten = 127.0.0.1:0\ncolour = blue\n" % self.home)
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertIn("server.conf:3: unknown key 'colour'; the keys are the options of "
                      "`lote server` without their --: ", err)
        self.assertIn("listen", err)
        self.assertFalse(os.path.exists(self.home))  # nothing started
        code, _, err = self.refused("runtime = teleport\n")
        self.assertEqual(code, 2, err)
        self.assertIn("server.conf:1: runtime = teleport: ", err)
        code, _, err = self.refused("listen 127.0.0.1:0\n")
        self.assertEqual(code, 2, err)
        self.assertIn("server.conf:1: expected `key = value`", err)
        missing = subprocess.run([LOTE, "server", "--config", os.path.join(self.dir, "none")],
                                 capture_output=True, text=True, timeout=60)
        code, err = missing.returncode, missing.stderr
        self.assertEqual(code, 2, err)
        self.assertIn("reading the config file", err)


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
