# Workload for Tandem's end-to-end test: two hot functions with distinctive
# names, called alternately from the same caller at the same depth, so that
# they share every native frame and differ only in the Python frame.
import sys
import time


def tandem_py_alpha(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def tandem_py_beta(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def tandem_py_driver(deadline):
    rounds = 0
    while time.time() < deadline:
        tandem_py_alpha(20000)
        tandem_py_beta(20000)
        rounds += 1
    return rounds


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    print(tandem_py_driver(time.time() + seconds))
