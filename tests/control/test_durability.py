"""Durability: 1,000 signed mutations, SIGKILL at a random point, restart.

Every acknowledged mutation must be present after the restart, and every
resource that is present must be whole (its content matches its own checksum).
Run: python3 test_durability.py --lote build/lote
"""
import argparse
import hashlib
import json
import os
import random
import sys
import threading
import unittest

import botocore.exceptions
import urllib3.exceptions

from lote_server import LoteServer

LOTE = None
TOTAL = 1000
THREADS = 4


def payload(i, attempt):
    """A job definition whose parameters carry a checksum of the rest."""
    name = "dur-%04d-%d" % (i, attempt)
    command = ["train", "--step", str(i), "--blob", hashlib.sha256(name.encode()).hexdigest() * 4]
    check = hashlib.sha256(json.dumps([name, command]).encode()).hexdigest()
    return name, {
        "jobDefinitionName": name, "type": "container",
        "containerProperties": {"image": "img", "command": command, "vcpus": 1, "memory": 64},
        "parameters": {"check": check}, "tags": {"i": str(i)},
    }


def whole(jd):
    name = jd["jobDefinitionName"]
    command = jd["containerProperties"]["command"]
    return jd["parameters"].get("check") == hashlib.sha256(json.dumps([name, command]).encode()).hexdigest()


class DurabilityTest(unittest.TestCase):
    def test_sigkill_loses_nothing_acknowledged(self):
        seed = int.from_bytes(os.urandom(4), "little")
        rng = random.Random(seed)
        kill_after = rng.randint(100, 900)
        print("seed %d: SIGKILL after %d acknowledgements" % (seed, kill_after), file=sys.stderr)
        server = LoteServer(LOTE).start()
        try:
            acked = {}  # name -> index
            lock = threading.Lock()
            killed = threading.Event()
            next_index = [0]
            sent = [0]

            def worker(client):
                while True:
                    with lock:
                        if next_index[0] >= TOTAL or killed.is_set():
                            return
                        i = next_index[0]
                        next_index[0] += 1
                        sent[0] += 1
                    name, req = payload(i, 0)
                    try:
                        # One mutation = a job definition row + its tag row, atomically.
                        client.register_job_definition(**req)
                        with lock:
                            acked[name] = i
                            if len(acked) >= kill_after and not killed.is_set():
                                killed.set()
                                server.kill()
                    except (botocore.exceptions.EndpointConnectionError,
                            botocore.exceptions.ConnectionClosedError,
                            botocore.exceptions.ReadTimeoutError,
                            urllib3.exceptions.HTTPError, ConnectionError):
                        return

            clients = [server.client() for _ in range(THREADS)]
            threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertTrue(killed.is_set(), "the server was never killed")
            self.assertGreaterEqual(len(acked), kill_after)

            server.start()  # same home, new port
            client = server.client()
            present = {}
            for page in client.get_paginator("describe_job_definitions").paginate():
                for jd in page["jobDefinitions"]:
                    present[jd["jobDefinitionName"]] = jd
            missing = sorted(set(acked) - set(present))
            self.assertEqual(missing, [], "acknowledged but lost after SIGKILL")
            for name, jd in present.items():
                self.assertTrue(whole(jd), "half-written job definition %s: %r" % (name, jd))
                self.assertEqual(jd["revision"], 1)
                self.assertEqual(jd["status"], "ACTIVE")
                tags = client.list_tags_for_resource(resourceArn=jd["jobDefinitionArn"])["tags"]
                self.assertEqual(tags, {"i": name.split("-")[1].lstrip("0") or "0"})
            # Unacknowledged requests may or may not have committed, but nothing else exists.
            self.assertLessEqual(len(present), sent[0])

            # Send the rest so that 1,000 mutations are acknowledged in total.
            remaining = TOTAL - len(acked)
            for j in range(remaining):
                name, req = payload(TOTAL + j, 1)
                client.register_job_definition(**req)
                acked[name] = TOTAL + j
            server.stop()
            server.start()
            client = server.client()
            names = set()
            for page in client.get_paginator("describe_job_definitions").paginate():
                names |= {jd["jobDefinitionName"] for jd in page["jobDefinitions"]}
            self.assertEqual(sorted(set(acked) - names), [])
            self.assertEqual(len(acked), TOTAL)
            client.close()
        finally:
            server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
