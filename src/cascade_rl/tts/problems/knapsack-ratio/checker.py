# Scores one test: {"input", "output", "answer"} on stdin (answer: an optimal choice);
# prints the test's score in [0, 1], then a message.
import json
import sys

request = json.load(sys.stdin)
numbers = list(map(int, request["input"].split()))
n, capacity = numbers[0], numbers[1]
weights, values = numbers[2::2][:n], numbers[3::2][:n]


def chosen_value(text):
    """Total value of a choice, or None if it is malformed or infeasible."""
    tokens = text.split()
    try:
        k = int(tokens[0])
        picked = [int(t) for t in tokens[1:]]
    except (IndexError, ValueError):
        return None
    if len(picked) != k or len(set(picked)) != k or not all(1 <= i <= n for i in picked):
        return None
    if sum(weights[i - 1] for i in picked) > capacity:
        return None
    return sum(values[i - 1] for i in picked)


best = chosen_value(request["answer"])
got = chosen_value(request["output"])
if best is None:
    sys.exit("the reference answer is not a valid choice")
if got is None:
    print("0\nmalformed or infeasible choice")
elif best == 0:
    print("1\nvalue 0 of 0")
else:
    print(f"{min(1.0, got / best):.6f}\nvalue {got} of {best}")
