"""trainer/allocator.py: after reuse_freed_memory, a large tensor allocated again reuses freed pages."""

import subprocess
import sys

#: allocates and frees an 80 MiB tensor, then prints the minor page faults of filling a 64 MiB one (not
#: the same size: torch asks for 64-byte aligned blocks, and glibc does not always fit one into a freed
#: block of exactly its size; in a loop of equal sizes the heap settles after two extra blocks)
FAULTS_OF_A_SECOND_TENSOR = """
import resource, sys, torch
from flywheel.trainer.allocator import reuse_freed_memory
if sys.argv[1] == "tuned":
    assert reuse_freed_memory()
torch.ones(20 << 20).sum()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.ones(16 << 20).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", FAULTS_OF_A_SECOND_TENSOR, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_a_freed_large_tensor_is_reused_without_page_faults():
    pages = (64 << 20) // 4096
    assert faults("default") > pages / 2  # glibc maps a fresh 64 MiB and faults on each page
    assert faults("tuned") < pages / 50
