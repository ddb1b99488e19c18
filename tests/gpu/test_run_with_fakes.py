"""tests/gpu/run.sh, the checks for a real GPU host, run here against stand-ins so that
its own plumbing is known to work before a GPU is lent: a fake `nvidia-smi` naming one
GPU, an inventory file naming that GPU (its device file is /dev/null, which lote never
fences), and a `torch` module that counts CUDA_VISIBLE_DEVICES and does no arithmetic.
Everything lote does is real: the server, the compute environment of one GPU, the
assignment, the jobs, their stamps, `lote report`. What this cannot show is a real GPU
training: that needs `make test-gpu` on one."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LOTE = None

FAKE_SMI = """#!/bin/sh
case "$1" in
  -L) echo "GPU 0: Stand-in H100 (UUID: GPU-standin-0)";;
  *) echo "0, GPU-standin-0, Stand-in H100";;
esac
"""

FAKE_TORCH = '''
import os
class _T:
    def __init__(self, v=0.25): self.v = v
    def pow(self, n): return self
    def mean(self): return self
    def backward(self): pass
    def item(self): return self.v
    def __sub__(self, o): return self
class cuda:
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: len([x for x in os.environ.get(
        "CUDA_VISIBLE_DEVICES", "").split(",") if x]))
    get_device_name = staticmethod(lambda i: "Stand-in H100")
    synchronize = staticmethod(lambda: None)
    class _P:
        uuid = "standin"
    get_device_properties = staticmethod(lambda i: cuda._P())
class _M:
    def __init__(self, *a, **k): pass
    def cuda(self): return self
    def parameters(self): return []
    def __call__(self, x): return _T()
class nn:
    Sequential = Linear = GELU = _M
class optim:
    class AdamW:
        def __init__(self, *a, **k): pass
        def zero_grad(self): pass
        def step(self): pass
def randn(*a, **k): return _T()
'''


class RunWithFakesTest(unittest.TestCase):
    def test_the_gpu_checks_pass_on_stand_ins(self):
        work = tempfile.mkdtemp(prefix="lote_gpu_fakes_")
        try:
            os.makedirs(os.path.join(work, "bin"))
            os.makedirs(os.path.join(work, "py", "torch"))
            smi = os.path.join(work, "bin", "nvidia-smi")
            with open(smi, "w") as f:
                f.write(FAKE_SMI)
            os.chmod(smi, 0o755)
            with open(os.path.join(work, "py", "torch", "__init__.py"), "w") as f:
                f.write(FAKE_TORCH)
            inventory = os.path.join(work, "inventory.txt")
            with open(inventory, "w") as f:
                f.write("gpu /dev/null index=0 uuid=GPU-standin-0 name=Stand-in_H100\n")
            for d in (work, os.path.join(work, "py"), os.path.join(work, "py", "torch")):
                os.chmod(d, 0o755)
            env = dict(os.environ, PATH=os.path.join(work, "bin") + ":" + os.environ["PATH"],
                       PYTHONPATH=os.path.join(work, "py"), PYTHON="/usr/bin/python3",
                       LOTE_GPU_SERVER_ARGS="--accelerators " + inventory)
            out = subprocess.run(["bash", os.path.join(HERE, "run.sh"), LOTE], env=env,
                                 capture_output=True, text=True, timeout=600)
            text = out.stdout + out.stderr
            self.assertEqual(out.returncode, 0, text)
            self.assertIn("lote sees 1 GPU(s)", text)
            self.assertIn("device_count 1 CUDA_VISIBLE_DEVICES 0", text)
            self.assertIn("the training job SUCCEEDED on device(s) [0]", text)
            self.assertIn("two GPU=1 jobs ran one after the other", text)
            self.assertIn("all GPU checks passed", text)
            # A second GPU in nvidia-smi that lote's inventory lacks is a failure, named.
            with open(smi, "w") as f:
                f.write(FAKE_SMI.replace('echo "GPU 0: Stand-in H100 (UUID: GPU-standin-0)"',
                                         'echo "GPU 0: a"; echo "GPU 1: b"').replace(
                    'echo "0, GPU-standin-0, Stand-in H100"',
                    'echo "0, GPU-standin-0, a"; echo "1, GPU-standin-1, b"'))
            out = subprocess.run(["bash", os.path.join(HERE, "run.sh"), LOTE], env=env,
                                 capture_output=True, text=True, timeout=600)
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn("lote's inventory has 1 GPUs, nvidia-smi 2", out.stdout + out.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
