# Full score: for every band of rows [top, bottom], Kadane's scan over the column sums.
import sys


def kadane(values):
    best, current = values[0], 0
    for value in values:
        current = max(value, current + value)
        best = max(best, current)
    return best


def main():
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    grid = [list(map(int, data[2 + r * m : 2 + (r + 1) * m])) for r in range(n)]
    best = grid[0][0]
    for top in range(n):
        columns = [0] * m
        for bottom in range(top, n):
            columns = [c + v for c, v in zip(columns, grid[bottom])]
            best = max(best, kadane(columns))
    print(best)


main()
