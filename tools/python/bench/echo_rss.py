"""Peak memory of a 64 MiB echo, per process: worker0 echoes a 64 MiB uint8
numpy array through worker1 (its `echo` built-in) a few times; each worker
reports its resident set before the payload existed and its peak during
the echoes (the kernel's high-water mark, reset first).

    tools/dev python --opt -m ferry.launch -n 2 tools/python/bench/echo_rss.py

One JSON line per worker. Both processes keep large buffers on the heap
(rpc/process_tuning.h's malloc settings, applied here through ctypes).
"""
import ctypes
import json

import numpy as np

import ferry

M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8
PAYLOAD = 64 << 20


def tune_malloc():
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, 512 << 20)
    libc.mallopt(M_ARENA_MAX, 1)


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field + " not in /proc/self/status")


def main():
    tune_malloc()
    ferry.init(timeout=600, shutdown_timeout=600)
    rank = ferry.rank()
    ferry.barrier()
    before = status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # Resets VmHWM to the current resident set.
    if rank == 0:
        payload = np.ones(PAYLOAD, np.uint8)
        for _ in range(4):
            reply = ferry.rpc_sync("worker1", "echo", args=(payload,))
            assert reply.nbytes == PAYLOAD
            del reply
    ferry.barrier()
    peak = status_kib("VmHWM")
    print(json.dumps({"rank": rank, "payload_mib": PAYLOAD >> 20,
                      "rss_before_mib": round(before / 1024, 1),
                      "peak_rss_mib": round(peak / 1024, 1),
                      "peak_over_before_mib": round((peak - before) / 1024, 1),
                      "peak_over_before_x_payload":
                          round((peak - before) * 1024 / PAYLOAD, 2)}),
          flush=True)
    ferry.shutdown()


if __name__ == "__main__":
    main()
