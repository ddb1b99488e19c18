"""The node agent through a real `lote server` (docs/executor.md, "The node agent").

Jobs wait for a file before they exit, so each kill happens while they run:
- kill -9 of the agent: a single-node and a 2-node job still end SUCCEEDED,
  with one attempt and every node ended once; the next job gets a new agent;
- kill -9 of the server and of the agent together: the next server adopts the
  running nodes, the job ends SUCCEEDED, and new jobs run through a new agent;
- the home removed under a running agent (the server killed first): the agent
  kills every node's processes and exits, and its keeper exits after it.
Run: python3 test_node_agent.py --lote build/lote
"""
import argparse
import json
import os
import shutil
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

LOTE = None
LIMIT_S = 60  # upper bound for anything to happen, so a broken build fails instead of hanging


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def starts_with(path, text):
    try:
        with open(path) as f:
            return f.read(len(text)) == text
    except OSError:
        return False


def wait_until(what, predicate):
    deadline = time.time() + LIMIT_S
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class NodeAgentThroughTheServer(unittest.TestCase):
    def setUp(self):
        # The agent is off by default; these servers (and their restarts)
        # inherit the switch that turns it on.
        os.environ["LOTE_NODE_AGENT"] = "1"
        self.server = LoteServer(LOTE).start()
        self.go = os.path.join(self.server.home, "go")
        self.batch = self.server.client()
        create_emulated_environment(self.batch)
        self.batch.create_job_queue(jobQueueName="q", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        wait_until("the queue", lambda: self.batch.describe_job_queues(jobQueues=["q"])
                   ["jobQueues"][0]["status"] == "VALID")
        held = {"image": "img", "vcpus": 1, "memory": 64,
                "command": ["sh", "-c", "echo up; while [ ! -e %s ]; do sleep 0.05; done" % self.go]}
        self.batch.register_job_definition(jobDefinitionName="held", type="container",
                                           containerProperties=held)
        self.batch.register_job_definition(
            jobDefinitionName="held2", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0,
                            "nodeRangeProperties": [{"targetNodes": "0:", "container": held}]})

    def tearDown(self):
        if os.path.isdir(self.server.home):
            open(self.go, "w").close()  # nothing left waiting
        self.batch.close()
        self.server.cleanup()

    def agent_pid(self):
        try:
            with open(os.path.join(self.server.home, "agent", "agent.json")) as f:
                return json.load(f)["process"]["pid"]
        except (OSError, ValueError, KeyError):
            return None

    def submit_running(self, definition):
        job = self.batch.submit_job(jobName="j", jobQueue="q", jobDefinition=definition)["jobId"]
        wait_until("job %s RUNNING" % job, lambda: self.batch.describe_jobs(jobs=[job])
                   ["jobs"][0]["status"] == "RUNNING")
        nodes = 2 if definition == "held2" else 1
        for n in range(nodes):  # every node's command has started
            out = os.path.join(self.server.home, "jobs", job, "1", str(n), "output.log")
            wait_until("node %d's output" % n, lambda: starts_with(out, "up"))
        return job

    def assert_succeeded_once(self, job, nodes):
        final = wait_until("job %s ended" % job, lambda: (lambda j: j if j["status"] in (
            "SUCCEEDED", "FAILED") else None)(self.batch.describe_jobs(jobs=[job])["jobs"][0]))
        self.assertEqual(final["status"], "SUCCEEDED", final.get("statusReason"))
        self.assertEqual(len(final["attempts"]), 1, final["attempts"])
        for n in range(nodes):
            folder = os.path.join(self.server.home, "jobs", job, "1", str(n))
            # A node torn down with the gang may still be ending.
            wait_until("node %d's outcome" % n,
                       lambda: os.path.exists(os.path.join(folder, "status.json")))
            with open(os.path.join(folder, "status.json")) as f:
                status = json.load(f)
            # Every node ended once. The main node's exit ends the gang: the
            # others exited too, or were torn down by then.
            if n == 0 or not status["terminated"]:
                self.assertEqual((status["outcome"], status["exit_code"]), ("exited", 0), status)
        if nodes > 1:
            children = self.batch.describe_jobs(
                jobs=["%s#%d" % (job, n) for n in range(nodes)])["jobs"]
            self.assertEqual(len(children), nodes)
            for c in children:
                self.assertNotIn(c["status"], ("RUNNING", "FAILED"), c)
                self.assertLessEqual(len(c.get("attempts", [])), 1, c["attempts"])

    def test_kill_9_of_the_agent_while_jobs_run(self):
        single = self.submit_running("held")
        gang = self.submit_running("held2")
        agent = self.agent_pid()
        self.assertIsNotNone(agent, "no node agent was started")
        os.kill(agent, signal.SIGKILL)
        wait_until("the agent gone", lambda: not alive(agent))
        open(self.go, "w").close()
        self.assert_succeeded_once(single, 1)
        self.assert_succeeded_once(gang, 2)
        os.unlink(self.go)
        # The next job starts another agent.
        after = self.submit_running("held")
        second = self.agent_pid()
        self.assertNotEqual(second, agent)
        self.assertTrue(alive(second))
        open(self.go, "w").close()
        self.assert_succeeded_once(after, 1)

    def test_kill_9_of_server_and_agent_together(self):
        job = self.submit_running("held2")
        agent = self.agent_pid()
        self.assertIsNotNone(agent)
        self.batch.close()
        self.server.kill()
        os.kill(agent, signal.SIGKILL)
        wait_until("the agent gone", lambda: not alive(agent))
        self.server.start()
        self.batch = self.server.client()
        self.assertEqual(self.batch.describe_jobs(jobs=[job])["jobs"][0]["status"], "RUNNING")
        open(self.go, "w").close()
        self.assert_succeeded_once(job, 2)
        # New jobs run through a new agent.
        fresh = self.batch.submit_job(jobName="k", jobQueue="q", jobDefinition="held")["jobId"]
        self.assert_succeeded_once(fresh, 1)
        self.assertNotEqual(self.agent_pid(), agent)
        self.assertTrue(alive(self.agent_pid()))

    def test_the_home_removed_under_a_running_agent(self):
        jobs = [self.submit_running("held"), self.submit_running("held2")]
        agent = self.agent_pid()
        self.assertIsNotNone(agent)
        commands, keepers = [], set()
        for job, nodes in zip(jobs, (1, 2)):
            for n in range(nodes):
                folder = os.path.join(self.server.home, "jobs", job, "1", str(n))
                with open(os.path.join(folder, "command.json")) as f:
                    commands.append(json.load(f)["process"]["pid"])
                with open(os.path.join(folder, "shim.json")) as f:
                    keepers.add(json.load(f)["keeper"]["pid"])
        self.assertEqual(len(keepers), 1, keepers)
        for pid in commands + [agent] + list(keepers):
            self.assertTrue(alive(pid), pid)
        self.batch.close()
        self.server.kill()  # nobody else would end the nodes
        shutil.rmtree(self.server.home)
        # The commands wait for a file that can no longer appear: only the
        # agent can end them.
        for pid in commands:
            wait_until("command %d killed" % pid, lambda: not alive(pid))
        wait_until("the agent gone", lambda: not alive(agent))
        for pid in keepers:
            wait_until("the keeper gone", lambda: not alive(pid))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
