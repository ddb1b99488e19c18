"""The Debian package installed into a fresh root and its server started from
the unit's own command line.

The root is made here from local files only (no network, no Docker): the static
busybox as /bin/sh and the usual commands, an empty dpkg database, the host's
useradd/groupadd (Debian's passwd, required in every Debian root), and the
shared libraries the package's binaries link against, copied from this host
at their own paths (what apt would bring in as the package's Depends). Then:
`dpkg --root ROOT -i lote_*.deb` (its maintainer script runs in the root and
adds the `lote` system user), the unit's ExecStart run in the root as its
User, with its Environment and StateDirectory, and `aws batch
describe-job-queues` against it with the admin key it wrote. Needs root (chroot).
Also: `apt-get -s install ./lote_*.deb` on this host resolves every Depends.

Run: python3 test_install.py --deb build/lote_0.1.0_amd64.deb
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

DEB = None
WORK = None


def host_libraries(binary):
    """The shared libraries `binary` loads (ldd), the loader included; none for a
    static binary (the node runner)."""
    proc = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if proc.returncode != 0 and "not a dynamic executable" in proc.stdout + proc.stderr:
        return []
    if proc.returncode != 0:
        raise RuntimeError("ldd %s: %s" % (binary, proc.stderr))
    out = proc.stdout
    libs = set()
    for line in out.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m:
            libs.add(m.group(1))
    return sorted(libs)


def copy_at_own_path(path, root):
    dest = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy2(os.path.realpath(path), dest)


def make_root(root, libraries_of):
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "tmp", "dev", "proc",
              "var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "run"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    busybox = shutil.which("busybox")
    shutil.copy2(busybox, os.path.join(root, "bin/busybox"))
    applets = subprocess.run([busybox, "--list-full"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        link = os.path.join(root, applet)
        if not os.path.lexists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink("/bin/busybox", link)
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\n")
    for name in ("status", "available"):
        open(os.path.join(root, "var/lib/dpkg", name), "w").close()
    # useradd and groupadd (Debian's passwd, in every Debian root) for the
    # package's postinst, with /etc/login.defs.
    tools = [shutil.which("useradd"), shutil.which("groupadd")]
    for tool in tools + ["/etc/login.defs"]:
        copy_at_own_path(tool, root)
    for binary in list(libraries_of) + tools:
        for lib in host_libraries(binary):
            copy_at_own_path(lib, root)
    for dev, major, minor in (("null", 1, 3), ("zero", 1, 5), ("random", 1, 8), ("urandom", 1, 9)):
        path = os.path.join(root, "dev", dev)
        os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))
        os.chmod(path, 0o666)


def unit_settings(path):
    """The [Service] keys of a systemd unit (Environment may repeat)."""
    settings = {"Environment": []}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", "[")) or "=" not in line:
                continue
            k, v = line.split("=", 1)
            if k == "Environment":
                settings[k].append(v)
            else:
                settings[k] = v
    return settings


class InstallTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="root-", dir=WORK)
        os.chmod(self.root, 0o755)  # a root's /, not mkdtemp's 0700
        self.proc = None
        self.mounted = False

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        if self.mounted:
            subprocess.run(["umount", os.path.join(self.root, "proc")], check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def test_package_installs_and_its_unit_serves_the_api(self):
        # The libraries of the packaged binaries, taken from the package itself.
        unpacked = os.path.join(self.root + ".x")
        subprocess.run(["dpkg-deb", "-x", DEB, unpacked], check=True)
        try:
            make_root(self.root, [os.path.join(unpacked, "usr/bin/lote"),
                                  os.path.join(unpacked, "usr/lib/lote/lote-exec-shim")])
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)
        # --force-depends: the root has the libraries but no packages that own them.
        install = subprocess.run(["dpkg", "--root", self.root, "--force-depends", "-i", DEB],
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        status = subprocess.run(["dpkg", "--root", self.root, "-s", "lote"],
                                capture_output=True, text=True, check=True).stdout
        self.assertIn("Status: install ok installed", status)
        for path in ("usr/bin/lote", "usr/lib/lote/lote-exec-shim", "etc/lote/server.conf",
                     "usr/share/doc/lote/README.md"):
            self.assertTrue(os.path.exists(os.path.join(self.root, path)), path)
        with open(os.path.join(self.root, "etc/passwd")) as f:
            users = {line.split(":")[0]: line.split(":") for line in f}
        self.assertIn("lote", users)  # the maintainer script's system user
        uid, gid = int(users["lote"][2]), int(users["lote"][3])

        unit = unit_settings(glob.glob(os.path.join(self.root, "usr/lib/systemd/system",
                                                    "lote-server.service"))[0])
        self.assertEqual(unit["User"], "lote")
        # What systemd does before ExecStart: StateDirectory=lote → /var/lib/lote.
        state = os.path.join(self.root, "var/lib", unit["StateDirectory"])
        os.makedirs(state, mode=0o700)
        os.chown(state, uid, gid)
        subprocess.run(["mount", "-t", "proc", "proc", os.path.join(self.root, "proc")], check=True)
        self.mounted = True
        env = ["HOME=/var/lib/lote", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"] + unit["Environment"]
        # The unit's command, on any free port (a second listen wins over the file's).
        command = unit["ExecStart"].split() + ["--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(
            ["chroot", "--userspec=%d:%d" % (uid, gid), self.root, "/usr/bin/env", "-i"] + env +
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("lote server listening on "):
            self.proc.kill()
            self.fail("the server did not start: %r; stderr:\n%s" % (line, self.proc.stderr.read()))
        endpoint = line.strip().split(" on ", 1)[1]

        credentials = os.path.join(state, "credentials")
        self.assertEqual(os.stat(credentials).st_uid, uid)  # written by the server, as lote
        self.assertEqual(os.stat(credentials).st_mode & 0o777, 0o600)
        keys = dict(l.split("=", 1) for l in open(credentials).read().replace(" ", "").splitlines()
                    if "=" in l)
        aws_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        aws_env.update(AWS_ACCESS_KEY_ID=keys["aws_access_key_id"],
                       AWS_SECRET_ACCESS_KEY=keys["aws_secret_access_key"],
                       AWS_DEFAULT_REGION="us-east-1")
        listed = subprocess.run(["aws", "--endpoint-url", endpoint, "batch", "describe-job-queues",
                                 "--output", "json"], env=aws_env, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertEqual(json.loads(listed.stdout)["jobQueues"], [])
        self.assertTrue(os.path.exists(os.path.join(state, "lote.db")))  # the config's home


class AptTest(unittest.TestCase):
    def test_apt_install_resolves_every_depends_here(self):
        # `apt install ./lote_*.deb`, simulated (-s: nothing changes): every Depends
        # that dpkg-shlibdeps computed names a package apt can install here.
        proc = subprocess.run(["apt-get", "-s", "--no-install-recommends", "install",
                               os.path.abspath(DEB)], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("Inst lote (0.1.0", proc.stdout)


def main():
    global DEB, WORK
    parser = argparse.ArgumentParser()
    parser.add_argument("--deb", required=True, help="the package, or a folder holding lote_*.deb")
    parser.add_argument("--work", default=tempfile.gettempdir(), help="where roots are made")
    args, rest = parser.parse_known_args()
    DEB = args.deb
    if os.path.isdir(DEB):
        found = sorted(glob.glob(os.path.join(DEB, "lote_*.deb")))
        if not found:
            sys.exit("no lote_*.deb in %s: cmake --build build --target deb" % DEB)
        DEB = found[-1]
    WORK = os.path.abspath(args.work)
    os.makedirs(WORK, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
