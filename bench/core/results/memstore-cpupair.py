# CPU time per operation (user+sys from getrusage of the child), before vs
# after, alternating binaries each round; the difference of two iteration
# counts removes the setup (prefilling 100k keys) and the process start.
import resource, subprocess, statistics, sys, os
cases = sys.argv[1].split(",")
rounds = int(sys.argv[2])
N1, N2 = 200000, 2200000
bins = {"before": "/tmp/memstore-before.test", "after": "/tmp/memstore-after.test"}
def cpu(binary, case, n):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary, "-test.run", "^$", "-test.bench", "^" + case + "$", "-test.benchtime", "%dx" % n],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
res = {c: {"before": [], "after": []} for c in cases}
print(open("/proc/loadavg").read().strip(), flush=True)
for r in range(rounds):
    order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
    for c in cases:
        for v in order:
            ns = (cpu(bins[v], c, N2) - cpu(bins[v], c, N1)) / (N2 - N1) * 1e9
            res[c][v].append(ns)
    print("round", r + 1, "done;", open("/proc/loadavg").read().strip(), flush=True)
print("%-58s %6s %8s %8s  %s" % ("case (CPU ns/op)", "rounds", "before", "after", "after/before: median of rounds [min, max]"))
for c in cases:
    b, a = res[c]["before"], res[c]["after"]
    rs = [x / y for x, y in zip(a, b)]
    print("%-58s %6d %8.1f %8.1f  %.2f [%.2f, %.2f]" % (c, len(rs), statistics.median(b), statistics.median(a), statistics.median(rs), min(rs), max(rs)))
