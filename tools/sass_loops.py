#!/usr/bin/env python3
"""Static instruction counts of a CUDA kernel's loops, from its SASS: no GPU needed.

Compiles one of zt's .cu files for the build's architecture (or reads a .cubin), and for
each kernel whose mangled name contains the pattern prints its size and every loop (a
backward branch and the instructions it spans, inner loops included) of at least
--min instructions, with the loop's opcode mix. Where a kernel's time is issue-bound,
a hot loop's instructions per HMMA (or per element of a memory-bound loop) predict its
speed before a GPU is at hand; ptxas's registers and spills are printed too.

  tools/sass_loops.py core/cuda/flash_attention.cu 'bfloat16Li4EEELi4ELi1ELi2ELi2EEELNS3_4PassE0E'
  tools/sass_loops.py --dump 1b70:3440 core/cuda/flash_attention.cu PATTERN   # the listing

Needs nvcc (CUDA_HOME, default /usr/local/cuda) and cuobjdump: on PATH, next to nvcc, or
$CUOBJDUMP (the toolkit's, or PyPI's nvidia-cuda-cuobjdump wheel, unpacked).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cuobjdump():
    for c in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
              os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump")):
        if c and os.access(c, os.X_OK):
            return c
    sys.exit("sass_loops: no cuobjdump (set CUOBJDUMP, or pip download nvidia-cuda-cuobjdump "
             "and unpack its wheel)")


def compile_cubin(cu, arch, out):
    nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    cmd = [nvcc, "-DZT_WITH_CUDA", "-I" + ROOT, "-O3", "-DNDEBUG", "-arch=sm_" + arch,
           "--expt-relaxed-constexpr", "-std=c++20", "-cubin", "-Xptxas", "-v", "-o", out, cu]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr)
    return r.stderr  # ptxas's report


def kernels(sass):
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        ins = []
        for line in body.split("\n"):
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if m:
                ins.append((int(m.group(1), 16), m.group(2)))
        yield name.strip(), ins


def opcode(text):
    words = text.split()
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def loops(ins):
    at = {a: i for i, (a, _) in enumerate(ins)}
    for i, (a, t) in enumerate(ins):
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
            yield at[int(m.group(1), 16)], i


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", help="a .cu file (compiled here) or a .cubin")
    p.add_argument("pattern", help="part of the kernels' mangled names")
    p.add_argument("--arch", default="90")
    p.add_argument("--min", type=int, default=40, help="smallest loop shown (instructions)")
    p.add_argument("--dump", help="print the listing between two hex addresses, LO:HI")
    a = p.parse_args()
    ptxas = ""
    objdump = cuobjdump()  # before compiling: without it the compile would be wasted
    with tempfile.TemporaryDirectory() as tmp:
        cubin = a.source
        if not cubin.endswith(".cubin"):
            cubin = os.path.join(tmp, "k.cubin")
            ptxas = compile_cubin(a.source, a.arch, cubin)
        sass = subprocess.run([objdump, "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout
    for name, ins in kernels(sass):
        if a.pattern not in name:
            continue
        print(f"{name}: {len(ins)} instructions")
        m = re.search(r"Function properties for " + re.escape(name) +
                      r"\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill"
                      r" loads\s+ptxas info\s+: Used (\d+) registers", ptxas)
        if m:
            print(f"  {m.group(4)} registers, spills {m.group(2)} / {m.group(3)} bytes"
                  f" (stores / loads)")
        for s, e in loops(ins):
            if e - s + 1 < a.min:
                continue
            mix = collections.Counter(opcode(t) for _, t in ins[s:e + 1])
            print(f"  loop {ins[s][0]:x}-{ins[e][0]:x}: {e - s + 1} instructions; " +
                  ", ".join(f"{k} {v}" for k, v in mix.most_common(16)))
        if a.dump:
            lo, hi = (int(x, 16) for x in a.dump.split(":"))
            for addr, t in ins:
                if lo <= addr <= hi:
                    print(f"  {addr:x}  {t}")


if __name__ == "__main__":
    main()
